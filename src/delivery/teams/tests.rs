use super::*;

fn context(figures: Value) -> Value {
    json!({
        "report": {"id": "w17", "title": "Warehouse 17", "timezone": "Europe/Berlin"},
        "date": "2026-11-30",
        "window": {"start": "2026-11-28T23:00:00Z", "end": "2026-11-29T23:00:00Z"},
        "stale": true,
        "figures": figures,
        "report_url": "https://reports.example/r/w17:2026-11-30?s=ab",
    })
}

#[test]
fn the_default_card_is_an_adaptive_card_1_5_in_its_envelope() {
    let figures = json!([{"label": "Late", "path": "data.late", "value": 1234}]);
    let card = default_card(&context(figures)).expect("made");
    let message = enveloped(&card).expect("a card Teams takes");
    assert!(message.len() < MAX_MESSAGE_BYTES);
    let v: Value = serde_json::from_slice(&message).expect("JSON");
    assert_eq!(v["type"], "message");
    let attachment = &v["attachments"][0];
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert!(attachment["contentUrl"].is_null());
    let content = &attachment["content"];
    assert_eq!(content["version"], "1.5");
    assert_eq!(content["body"][0]["text"], "Warehouse 17");
    assert!(
        content["body"][2]["text"]
            .as_str()
            .is_some_and(|t| t.contains("not ready"))
    );
    assert_eq!(
        content["body"][3]["facts"][0],
        json!({"title": "Late", "value": "1,234"})
    );
    assert_eq!(content["actions"][0]["type"], "Action.OpenUrl");
    assert_eq!(
        content["actions"][0]["url"],
        "https://reports.example/r/w17:2026-11-30?s=ab"
    );
}

#[test]
fn a_card_teams_would_not_show_is_refused_naming_what() {
    let refused = |v: Value| enveloped(&v.to_string()).expect_err("refused");
    assert!(refused(json!({"type": "Card", "version": "1.5"})).contains("AdaptiveCard"));
    assert!(refused(json!({"type": "AdaptiveCard", "version": "1.6"})).contains("1.0 to 1.5"));
    assert!(refused(json!({"type": "AdaptiveCard"})).contains("version"));
    let untyped = json!({"type": "AdaptiveCard", "version": "1.4", "body": [{"text": "x"}]});
    assert_eq!(refused(untyped), "body[0]: an element without a type");
    assert!(
        enveloped("{")
            .expect_err("not JSON")
            .starts_with("not JSON")
    );
    let old = json!({"type": "AdaptiveCard", "version": "1.2", "body": []});
    assert!(enveloped(&old.to_string()).is_ok());
}

#[test]
fn a_bounded_card_is_small_and_carries_the_link() {
    let message = bounded("Warehouse 17", 40_000, "https://r.example/r/x?s=1");
    assert!(message.len() < 2_000);
    let v: Value = serde_json::from_slice(&message).expect("JSON");
    let card = &v["attachments"][0]["content"];
    assert!(enveloped(&card.to_string()).is_ok());
    assert_eq!(card["actions"][0]["url"], "https://r.example/r/x?s=1");
    assert!(
        card["body"][1]["text"]
            .as_str()
            .is_some_and(|t| t.contains("too large for Teams"))
    );
}

#[test]
fn flow_answers_are_classified() {
    let c = |status| {
        classify(&chat::Reply {
            status,
            retry_after: None,
            body: String::new(),
        })
    };
    assert_eq!(c(202).class, ResponseClass::Accepted);
    assert_eq!(c(200).class, ResponseClass::Accepted);
    let o = c(429);
    assert_eq!((o.class, o.retry_after), (ResponseClass::RateLimited, None));
    assert!(o.reason.contains("no Retry-After"), "{}", o.reason);
    let o = c(400);
    assert_eq!(o.class, ResponseClass::Permanent);
    assert!(o.reason.contains("malformed"), "{}", o.reason);
    let o = c(413);
    assert_eq!(o.class, ResponseClass::Permanent);
    assert!(o.reason.contains("too large"), "{}", o.reason);
    assert_eq!(c(502).class, ResponseClass::Transient);
    assert_eq!(c(404).class, ResponseClass::Permanent);
    assert_eq!(c(408).class, ResponseClass::Transient);
}

#[test]
fn the_default_card_shows_each_chart_by_its_link() {
    let mut c = context(json!([]));
    c["charts"] = json!({"by_hour": {"alt": "Orders by hour: bar chart.", "url": "https://reports.example/r/w17:2026-11-30/charts/by_hour?s=ab"}});
    let card = default_card(&c).expect("made");
    let v: Value = serde_json::from_str(&card).expect("JSON");
    let image = (v["body"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "Image")
        .expect("an Image element");
    assert_eq!(
        image["url"],
        "https://reports.example/r/w17:2026-11-30/charts/by_hour?s=ab"
    );
    assert_eq!(image["altText"], "Orders by hour: bar chart.");
    assert!(enveloped(&card).is_ok());
}
