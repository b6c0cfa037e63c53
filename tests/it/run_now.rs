//! "Run now" and "Send a test", from the console (operator only, CSRF-checked, audited) and
//! the command line: today's job made ready at once, or a finished one offered for a reissue;
//! a report rendered for a date and emailed to one typed address, its subject led by `[test]`,
//! counted by nothing else and refused to a suppressed address.

use crate::common;

use std::path::Path;

use common::console::{hidden, location, page, post_form, sign_in};
use common::ops_server::{TOKEN, VIEWER_TOKEN, start};
use common::{TestLedger, jk};
use dawnpost::Clock;
use dawnpost::ledger::{Cause, JobOrigin, JobState, NewSuppression};
use mail_parser::MessageParser;
use reqwest::StatusCode;

/// The subjects of the emails in `outbox` (a folder of .eml files).
fn subjects(outbox: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(outbox) else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .filter_map(|b| Some(MessageParser::default().parse(&b)?.subject()?.to_string()))
        .collect();
    out.sort();
    out
}

async fn an_operator_runs_todays_job_now_and_a_viewer_cannot(t: &TestLedger) {
    let s = start(t).await;
    t.ledger
        .nodes()
        .follow_formats(common::fixtures::t0())
        .await
        .expect("formats");
    // The console's clock reads 2026-11-30 09:00 UTC: 10:00 in Berlin, the report's zone.
    let (path, action) = ("/ui/reports/warehouse-17", "/ui/reports/warehouse-17/run");
    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, path, &viewer).await;
    assert!(
        html.contains("warehouse-17:2026-11-30: not fired yet"),
        "{html}"
    );
    assert!(!html.contains(action), "no form for a viewer");
    let r = post_form(
        &s,
        action,
        Some(&viewer),
        &[("csrf", &hidden(&html, "csrf")), ("by", "vi")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, path, &operator).await;
    assert!(html.contains(action) && html.contains("Run now"), "{html}");
    let r = post_form(
        &s,
        action,
        Some(&operator),
        &[("csrf", "forged"), ("by", "ana")],
    )
    .await;
    assert_eq!(
        r.status(),
        StatusCode::FORBIDDEN,
        "a form without the page's token"
    );
    let csrf = hidden(&html, "csrf");
    let r = post_form(&s, action, Some(&operator), &[("csrf", &csrf), ("by", " ")]).await;
    assert_eq!(
        r.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "who runs it is audited"
    );
    let r = post_form(
        &s,
        action,
        Some(&operator),
        &[("csrf", &csrf), ("by", "ana")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/ui/jobs/warehouse-17:2026-11-30");
    let key = jk("warehouse-17:2026-11-30");
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("made");
    assert_eq!(
        (job.state, job.origin),
        (JobState::Ready, JobOrigin::Enqueue)
    );
    assert_eq!(job.ready_at, s.clock.now(), "ready at once");
    let audit = t.ledger.deliveries().redrives(&key).await.expect("audit");
    assert!(
        audit.iter().any(|a| a.action == "run"
            && a.by == "ana"
            && a.via.as_deref() == Some("console:operator")),
        "{audit:?}"
    );
    let html = page(&s, path, &operator).await;
    assert!(
        html.contains("Today's job is ready: it runs already."),
        "{html}"
    );
    // Once it is finished, the page offers a reissue, which asks why.
    let params = common::fixtures::params("w1", s.clock.now(), 10);
    let leased = t.ledger.leases().jobs(&params).await.expect("lease");
    let lease = &leased
        .iter()
        .find(|j| j.job.key == key)
        .expect("leased")
        .lease;
    let artifact = common::fixtures::artifact();
    let rendered = t
        .ledger
        .jobs()
        .rendered(lease, &artifact, &[], s.clock.now())
        .await;
    rendered.expect("rendered: done, with no destinations");
    let html = page(&s, path, &operator).await;
    assert!(
        html.contains("Today's job is done.")
            && html.contains("/ui/jobs/warehouse-17:2026-11-30/reissue")
            && html.contains("name=\"reason\""),
        "{html}"
    );
}

async fn an_operator_sends_a_test_to_one_address_and_never_to_a_suppressed_one(t: &TestLedger) {
    let s = start(t).await;
    let (path, action) = ("/ui/reports/warehouse-17", "/ui/reports/warehouse-17/test");
    let outbox = s.project.root().join("var/outbox");
    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, path, &viewer).await;
    let form = [
        ("csrf", hidden(&html, "csrf")),
        ("by", "vi".into()),
        ("to", "vi@example.com".into()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(
        post_form(&s, action, Some(&viewer), &form).await.status(),
        StatusCode::FORBIDDEN
    );

    let operator = sign_in(&s, TOKEN).await;
    let csrf = hidden(&page(&s, path, &operator).await, "csrf");
    let send = |to: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("by", "ana".to_string()),
            ("to", to.to_string()),
            ("date", "2026-11-29".to_string()),
        ]
    };
    let form = send("lead@example.com");
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post_form(&s, action, Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let back = location(&r).to_string();
    assert!(
        back.starts_with("/ui/reports/warehouse-17?tested="),
        "{back}"
    );
    let html = page(&s, &back, &operator).await;
    assert!(
        html.contains("Sent a test for 2026-11-29 to l***@example.com: written to the outbox"),
        "{html}"
    );
    assert!(
        !html.contains("lead@example.com"),
        "the address is shown in part only"
    );
    assert_eq!(
        subjects(&outbox),
        ["[test] Report warehouse-17 — 2026-11-29"]
    );
    assert!(
        t.ledger
            .jobs()
            .get(&jk("warehouse-17:2026-11-29"))
            .await
            .expect("get")
            .is_none(),
        "a test makes no job"
    );
    let sent = t
        .ledger
        .recipients()
        .test_sends("warehouse-17", 10)
        .await
        .expect("tests");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (
            sent[0].by.as_str(),
            sent[0].via.as_str(),
            sent[0].date.as_str(),
            sent[0].outcome.as_str()
        ),
        ("ana", "console:operator", "2026-11-29", "accepted")
    );
    assert_eq!(sent[0].at, s.clock.now());

    let at = s.clock.now();
    let suppression = NewSuppression {
        address: "gone@example.com",
        report: None,
        cause: Cause::Operator,
        why: "left the company",
        at,
    };
    t.ledger
        .recipients()
        .suppress(suppression, None)
        .await
        .expect("suppress");
    let form = send("gone@example.com");
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post_form(&s, action, Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = r.text().await.expect("page");
    assert!(
        html.contains(
            "g***@example.com is suppressed (left the company): a test is not sent to it"
        ),
        "{html}"
    );
    let form = send("not an address");
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post_form(&s, action, Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(subjects(&outbox).len(), 1, "neither was sent");
}

on_both_backends!(
    an_operator_runs_todays_job_now_and_a_viewer_cannot,
    an_operator_sends_a_test_to_one_address_and_never_to_a_suppressed_one,
);

#[test]
fn the_cli_sends_a_test_audited_and_refuses_a_suppressed_address() {
    use crate::cli::{dawnpost, stderr, stdout};
    let p = common::Project::new(&common::report(
        "warehouse-17",
        "0 30 6 * * *",
        "Europe/Berlin",
    ));
    let args = [
        "send-test",
        "warehouse-17",
        "--to",
        "lead@example.com",
        "--date",
        "2026-11-29",
        "--by",
        "ana",
    ];
    let out = dawnpost(&p, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "sent a test of warehouse-17 for 2026-11-29 to l***@example.com by ana: written to the outbox"
    );
    let outbox = p.root().join("var/outbox");
    assert_eq!(
        subjects(&outbox),
        ["[test] Report warehouse-17 — 2026-11-29"]
    );
    let out = dawnpost(&p, &["jobs", "--report", "warehouse-17"]);
    assert!(
        !stdout(&out).contains("warehouse-17:2026-11-29"),
        "a test makes no job: {}",
        stdout(&out)
    );

    let out = dawnpost(
        &p,
        &[
            "suppress",
            "lead@example.com",
            "--by",
            "ana",
            "--reason",
            "left",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = dawnpost(&p, &args);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not sent: report warehouse-17: l***@example.com is suppressed (left): a test is not sent to it"),
        "{}",
        stderr(&out)
    );
    let unaudited = [
        "send-test",
        "warehouse-17",
        "--to",
        "a@example.com",
        "--by",
        " ",
    ];
    let out = dawnpost(&p, &unaudited);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--by must not be empty"),
        "{}",
        stderr(&out)
    );
    assert_eq!(subjects(&outbox).len(), 1);
}
