use super::*;

fn context(figures: Value) -> Value {
    json!({
        "report": {"id": "w17", "title": "Warehouse 17 <Duisburg> & co", "timezone": "Europe/Berlin"},
        "date": "2026-11-30",
        "window": {"start": "2026-11-28T23:00:00Z", "end": "2026-11-29T23:00:00Z"},
        "stale": false,
        "figures": figures,
        "report_url": "https://reports.example/r/w17:2026-11-30?s=ab",
    })
}

fn reply(status: u16, body: &str, retry_after: Option<i64>) -> chat::Reply {
    chat::Reply {
        status,
        retry_after: retry_after.map(chrono::Duration::seconds),
        body: body.into(),
    }
}

#[test]
fn the_default_message_is_block_kit_within_the_limits() {
    let figures = json!([{"label": "Late", "path": "data.late", "value": 23}]);
    let message = default_message(&context(figures)).expect("made");
    assert_eq!(checked(&message), Ok(Vec::new()), "{message}");
    let v: Value = serde_json::from_str(&message).expect("JSON");
    assert_eq!(v["blocks"][0]["type"], "header");
    assert_eq!(
        v["blocks"][0]["text"]["text"],
        "Warehouse 17 <Duisburg> & co"
    );
    // mrkdwn escapes &, < and > (the title's copy in the header is plain text).
    let fields = v["blocks"][2]["fields"][0]["text"]
        .as_str()
        .expect("a field");
    assert_eq!(fields, "*Late*\n23");
    let link = v["blocks"][3]["text"]["text"].as_str().expect("the link");
    assert_eq!(
        link,
        "<https://reports.example/r/w17:2026-11-30?s=ab|Open the whole report>"
    );
    assert!(
        v["text"]
            .as_str()
            .is_some_and(|t| t.contains("Sunday 29 November 2026"))
    );
    let when = v["blocks"][1]["elements"][0]["text"]
        .as_str()
        .expect("window");
    assert_eq!(when, "2026-11-30 · Sunday 29 November 2026 (Europe/Berlin)");
}

#[test]
fn a_long_title_is_cut_to_the_header_limit() {
    let mut c = context(json!([]));
    c["report"]["title"] = json!("é".repeat(400));
    let message = default_message(&c).expect("made");
    assert_eq!(checked(&message), Ok(Vec::new()));
    let v: Value = serde_json::from_str(&message).expect("JSON");
    let header = v["blocks"][0]["text"]["text"].as_str().expect("header");
    assert_eq!(header.chars().count(), MAX_HEADER);
    assert!(header.ends_with('…'));
}

#[test]
fn each_limit_is_named_by_its_field() {
    let section =
        |n: usize| json!({"type": "section", "text": {"type": "mrkdwn", "text": "x".repeat(n)}});
    let over = |v: Value| checked(&v.to_string()).expect("Block Kit");
    assert_eq!(
        over(json!({"blocks": [section(3000)]})),
        Vec::<String>::new()
    );
    assert_eq!(
        over(json!({"blocks": [section(3001)]})),
        ["blocks[0].text.text: 3001 characters, over 3000 for a section"]
    );
    let many: Vec<Value> = (0..51).map(|_| json!({"type": "divider"})).collect();
    assert_eq!(
        over(json!({"text": "t", "blocks": many})),
        ["51 blocks, over 50"]
    );
    let header = json!({"type": "header", "text": {"type": "plain_text", "text": "h".repeat(151)}});
    assert_eq!(
        over(json!({"blocks": [header]})),
        ["blocks[0].text.text: 151 characters, over 150 for a header"]
    );
    assert_eq!(
        over(json!({"text": "t".repeat(40_001)})),
        ["text: 40001 characters, over 40000"]
    );
    let fields: Vec<Value> = (0..11)
        .map(|_| json!({"type": "mrkdwn", "text": "f"}))
        .collect();
    assert_eq!(
        over(json!({"blocks": [{"type": "section", "fields": fields}]})),
        ["blocks[0].fields: 11 fields, over 10"]
    );
    // Five sections of 2,900 characters each pass their own limit, not the total.
    let five: Vec<Value> = (0..5).map(|_| section(2900)).collect();
    let said = over(json!({"blocks": five}));
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("blocks: ") && said[0].ends_with("over 12000"),
        "{said:?}"
    );
}

#[test]
fn what_slack_would_not_take_is_refused_with_its_reason() {
    let refused = |v: &str| checked(v).expect_err("refused");
    assert!(refused("[1]").contains("not a JSON object"));
    assert!(refused("{}").contains("no_text"));
    assert!(refused(r#"{"text": 7}"#).contains("text: not a string"));
    assert_eq!(
        refused(r#"{"blocks": [{"type": "paragraph"}]}"#),
        "blocks[0].type: \"paragraph\" is not a block type Slack takes"
    );
    assert!(refused(r#"{"blocks": [{"type": "section"}]}"#).contains("a text or fields"));
    let markdown_header =
        r#"{"blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "x"}}]}"#;
    assert!(refused(markdown_header).contains("plain_text"));
}

#[test]
fn a_bounded_message_passes_the_limits_and_carries_the_link() {
    let body = bounded(
        "Warehouse 17",
        "60 blocks, over 50",
        "https://r.example/r/x?s=1",
    );
    let text = String::from_utf8(body).expect("utf-8");
    assert_eq!(checked(&text), Ok(Vec::new()));
    assert!(
        text.contains("<https://r.example/r/x?s=1|Open the whole report>"),
        "{text}"
    );
    assert!(text.contains("60 blocks, over 50"), "{text}");
}

#[test]
fn slack_answers_are_classified_by_status_and_error_string() {
    let c = |status, body: &str| classify(&reply(status, body, None));
    assert_eq!(c(200, "ok").class, ResponseClass::Accepted);
    for (status, error, words) in [
        (400, "invalid_payload", "malformed"),
        (400, "no_text", "no text"),
        (403, "action_prohibited", "prohibit"),
        (403, "invalid_token", "revoked"),
        (404, "channel_not_found", "no longer exists"),
        (404, "no_service", "disabled, removed or invalid"),
        (410, "channel_is_archived", "archived"),
    ] {
        let o = c(status, error);
        assert_eq!(o.class, ResponseClass::Permanent, "{error}");
        assert_eq!(o.code, Some(i64::from(status)));
        assert!(
            o.reason.contains(words) && o.reason.contains(error),
            "{}",
            o.reason
        );
        assert_eq!(o.diagnostics.as_deref(), Some(error));
    }
    let o = c(500, "rollup_error");
    assert_eq!(o.class, ResponseClass::Transient);
    assert!(o.reason.contains("internal error"), "{}", o.reason);
    assert_eq!(c(503, "").class, ResponseClass::Transient);
    assert_eq!(c(302, "").class, ResponseClass::Permanent);
    let throttled = classify(&reply(429, "rate_limited", Some(30)));
    assert_eq!(throttled.class, ResponseClass::RateLimited);
    assert_eq!(throttled.retry_after, Some(chrono::Duration::seconds(30)));
    let odd = c(400, "something_new");
    assert!(odd.reason.contains("\"something_new\""), "{}", odd.reason);
}

#[test]
fn the_default_message_shows_each_chart_by_its_link() {
    let mut c = context(json!([]));
    c["charts"] = json!({"by_hour": {"alt": "Orders by hour: bar chart.", "url": "https://reports.example/r/w17:2026-11-30/charts/by_hour?s=ab", "cid": "x", "width": 600, "height": 300}});
    let message = default_message(&c).expect("made");
    assert_eq!(checked(&message), Ok(Vec::new()), "{message}");
    let v: Value = serde_json::from_str(&message).expect("JSON");
    let image = (v["blocks"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "image")
        .expect("an image block");
    assert_eq!(
        image["image_url"],
        "https://reports.example/r/w17:2026-11-30/charts/by_hour?s=ab"
    );
    assert_eq!(image["alt_text"], "Orders by hour: bar chart.");
    // Without a link, no picture: an incoming webhook cannot upload one.
    c.as_object_mut().map(|o| o.remove("report_url"));
    c["charts"]["by_hour"]
        .as_object_mut()
        .map(|o| o.remove("url"));
    let plain = default_message(&c).expect("made");
    assert!(!plain.contains("\"image\""), "{plain}");
}
