//! The console's dead letters and bulk redrive over real HTTP, both backends: groups by
//! report, host and class; the operator's dry run, start and the daemon's runbook service
//! stopping on a canary back in quarantine; the viewer refused; addresses redacted.

use crate::common;

use common::TestLedger;
use common::console::{hidden, location, page, post_form, sign_in};
use common::fixtures::*;
use common::ops_server::{TOKEN, VIEWER_TOKEN, start};
use dawnpost::domain::clock::Clock;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::Via;
use reqwest::StatusCode;

async fn a_group_is_redriven_as_a_runbook_that_stops_on_its_canary(t: &TestLedger) {
    let s = start(t).await;
    dead_letters(
        t,
        "carrier",
        1,
        3,
        "bad@carrier-y.example",
        ResponseClass::Permanent,
    )
    .await;
    dead_letters(
        t,
        "carrier",
        10,
        1,
        "x@other.example",
        ResponseClass::Transient,
    )
    .await;

    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, "/ui/dlq", &viewer).await;
    assert!(
        html.contains("carrier-y.example") && html.contains("3 deliveries"),
        "{html}"
    );
    assert!(
        html.contains("other.example") && html.contains("1 delivery"),
        "{html}"
    );
    assert!(!html.contains("bad@carrier-y.example"), "{html}");
    assert!(
        !html.contains("Dry run"),
        "no bulk form for a viewer: {html}"
    );
    let csrf = hidden(&html, "csrf");
    let plan = |csrf: &str| {
        vec![
            ("csrf", csrf.to_string()),
            ("report", "carrier".to_string()),
            ("host", "carrier-y.example".to_string()),
            ("class", "permanent".to_string()),
            ("canary", "1".to_string()),
            ("batch", "1".to_string()),
            ("since", String::new()),
            ("by", "ann".to_string()),
            ("reason", "carrier fixed the inbox".to_string()),
        ]
    };
    let form = plan(&csrf);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post_form(&s, "/ui/dlq/plan", Some(&viewer), &pairs).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(
        t.ledger
            .runbooks()
            .list(false, 10)
            .await
            .expect("list")
            .is_empty()
    );

    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, "/ui/dlq", &operator).await;
    assert!(html.contains("Dry run"), "{html}");
    let csrf = hidden(&html, "csrf");
    let form = plan(&csrf);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post_form(&s, "/ui/dlq/plan", Some(&operator), &pairs).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let runbook = location(&r).to_string();
    assert!(runbook.starts_with("/ui/runbooks/"), "{runbook}");
    let html = page(&s, &runbook, &operator).await;
    assert!(
        html.contains("3 deliveries") && html.contains("Start: redrive the canary"),
        "{html}"
    );
    assert!(html.contains("dry run: 3 deliver(ies)"), "{html}");
    assert!(!html.contains("bad@carrier-y.example"), "{html}");
    assert_eq!(
        deliver_due(t, s.clock.now(), ResponseClass::Accepted).await,
        0,
        "a dry run sends nothing"
    );

    let r = post_form(
        &s,
        &format!("{runbook}/start"),
        Some(&operator),
        &[("csrf", "x"), ("by", "ann")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(!woken(&s.runbooks).await, "a refused start wakes no driver");
    let r = post_form(
        &s,
        &format!("{runbook}/start"),
        Some(&operator),
        &[("csrf", &csrf), ("by", "ann")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        woken(&s.runbooks).await,
        "the driver, which looks seldom while none runs, is woken to carry it on"
    );
    let html = page(&s, &runbook, &operator).await;
    assert!(
        html.contains(">running<") && html.contains("canary"),
        "{html}"
    );

    // The pool sends the canary; the receiver refuses it again; the daemon's runbook service
    // judges it and stops the runbook before any batch.
    assert_eq!(
        deliver_due(t, s.clock.now(), ResponseClass::Permanent).await,
        1
    );
    let driver = dawnpost::services::runbook::Driver::new(
        t.ledger.clone(),
        std::sync::Arc::new(s.clock.clone()),
        std::time::Duration::from_secs(2),
    );
    assert_eq!(driver.run_once().await.expect("advance"), 1);
    let html = page(&s, &runbook, &operator).await;
    assert!(html.contains(">stopped<"), "{html}");
    assert!(
        html.contains("of the canary came back quarantined permanent"),
        "{html}"
    );
    assert!(
        !html.contains("Start: redrive") && !html.contains(">Stop<"),
        "{html}"
    );
    assert_eq!(
        deliver_due(t, s.clock.now(), ResponseClass::Accepted).await,
        0,
        "no batch"
    );
    let steps: Vec<String> = t
        .ledger
        .runbooks()
        .steps(1)
        .await
        .expect("steps")
        .into_iter()
        .map(|s| s.action)
        .collect();
    assert_eq!(steps, ["plan", "start", "canary", "stopped"]);
    s.cancel.cancel();
}

async fn a_planned_runbook_is_stopped_by_an_operator_not_started_by_a_viewer(t: &TestLedger) {
    let s = start(t).await;
    dead_letters(
        t,
        "carrier",
        1,
        2,
        "bad@carrier-y.example",
        ResponseClass::Permanent,
    )
    .await;
    let spec = dawnpost::ledger::RunbookSpec {
        report: "carrier".into(),
        host: String::new(),
        class: ResponseClass::Permanent,
        since: None,
        canary: 1,
        batch: 10,
        by: "ann".into(),
        reason: "fixed".into(),
        via: Via::Cli,
    };
    let (rb, _) = dawnpost::services::runbook::plan(&t.ledger, &spec, s.clock.now())
        .await
        .expect("plan");
    let path = format!("/ui/runbooks/{}", rb.id);

    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, &path, &viewer).await;
    assert!(
        !html.contains("Start: redrive") && !html.contains(">Stop<"),
        "{html}"
    );
    let csrf = hidden(&html, "csrf");
    let r = post_form(
        &s,
        &format!("{path}/start"),
        Some(&viewer),
        &[("csrf", &csrf), ("by", "vic")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let operator = sign_in(&s, TOKEN).await;
    let csrf = hidden(&page(&s, &path, &operator).await, "csrf");
    let r = post_form(
        &s,
        &format!("{path}/stop"),
        Some(&operator),
        &[("csrf", &csrf), ("by", "")],
    )
    .await;
    assert_eq!(
        r.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "a stop is audited: a name is needed"
    );
    let r = post_form(
        &s,
        &format!("{path}/stop"),
        Some(&operator),
        &[("csrf", &csrf), ("by", "bob")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&s, &path, &operator).await;
    assert!(
        html.contains(">stopped<") && html.contains("stopped by bob (console:operator)"),
        "{html}"
    );
    assert_eq!(
        deliver_due(t, s.clock.now(), ResponseClass::Accepted).await,
        0,
        "nothing redriven"
    );
    s.cancel.cancel();
}

on_both_backends!(
    a_group_is_redriven_as_a_runbook_that_stops_on_its_canary,
    a_planned_runbook_is_stopped_by_an_operator_not_started_by_a_viewer,
);

/// Whether `nudge` was woken since it was last waited on (a wake given while nobody waited
/// counts once).
async fn woken(nudge: &dawnpost::runtime::periodic::Nudge) -> bool {
    tokio::time::timeout(std::time::Duration::ZERO, nudge.notified())
        .await
        .is_ok()
}
