//! Reissue: a finished job's next revision (`report:date.rN`), rendered from fresh data and
//! delivered again under its own keys — emails marked as a correction and threaded to the
//! first revision's, webhooks naming the revision they supersede — with every revision kept,
//! audited, and refused for work not finished. The ledger on both backends; the pipeline
//! through the file transport and a webhook receiver; the CLI for real.

use crate::common;
use common::text;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{params, ready_jobs, t0};
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger, jk, run_in};
use dawnpost::domain::keys::JobKey;
use dawnpost::ledger::{Audit, JobOrigin, JobState, LedgerError, Node, Via};
use mail_parser::MessageParser;

#[test]
fn a_revisions_key_names_it_and_has_its_own_artifact_folder() {
    let first: JobKey = "warehouse-17:2026-10-25".parse().expect("key");
    let second = first.with_revision(2);
    assert_eq!(second.to_string(), "warehouse-17:2026-10-25.r2");
    assert_eq!(
        second,
        "warehouse-17:2026-10-25.r2".parse::<JobKey>().expect("key")
    );
    assert_eq!((first.revision(), second.revision()), (1, 2));
    assert_eq!(
        (first.day(), second.day()),
        ("2026-10-25".into(), "2026-10-25.r2".into())
    );
    assert_eq!(second.csv_filename(), "warehouse-17-2026-10-25-r2.csv");
    assert_eq!(second.date(), first.date());
    for bad in [
        "w:2026-10-25.r1",
        "w:2026-10-25.r02",
        "w:2026-10-25.r",
        "w:2026-10-25.rx",
        "w:2026-10-25.r+3",
    ] {
        assert!(bad.parse::<JobKey>().is_err(), "{bad} is not a key");
    }
}

fn audit(reason: &str) -> Audit<'_> {
    Audit::new("ops", reason, Via::Cli).expect("audited")
}

/// `key` leased and rendered with no destinations: done.
async fn finish(t: &TestLedger, key: &JobKey) {
    let leased = t
        .ledger
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let lease = &leased
        .iter()
        .find(|j| &j.job.key == key)
        .expect("leased")
        .lease;
    let artifact = common::fixtures::artifact();
    t.ledger
        .jobs()
        .rendered(lease, &artifact, &[], t0())
        .await
        .expect("rendered");
}

async fn a_finished_job_is_reissued_as_its_next_revision_and_only_then(t: &TestLedger) {
    let l = &t.ledger;
    l.nodes().follow_formats(t0()).await.expect("formats");
    ready_jobs(t, &["w:2026-10-25"]).await;
    let first = jk("w:2026-10-25");
    let refused = l.jobs().reissue(&first, &audit("too early"), t0()).await;
    assert!(
        matches!(refused, Err(LedgerError::WrongState { .. })),
        "ready: {refused:?}"
    );
    finish(t, &first).await;

    let second = l
        .jobs()
        .reissue(&first, &audit("the totals were wrong"), t0())
        .await
        .expect("reissue");
    assert_eq!(second, jk("w:2026-10-25.r2"));
    let job = l.jobs().get(&second).await.expect("get").expect("job");
    assert_eq!(
        (job.state, job.origin),
        (JobState::Ready, JobOrigin::Reissue)
    );
    assert_eq!(job.supersedes, Some(first.clone()));
    let original = l.jobs().get(&first).await.expect("get").expect("job");
    assert_eq!(job.window, original.window, "the same data window");
    assert_eq!(
        original.state,
        JobState::Done,
        "the first revision is kept as it was"
    );
    let audited = l.deliveries().redrives(&first).await.expect("audit");
    assert!(
        audited
            .iter()
            .any(|a| a.action == "reissue" && a.reason == "the totals were wrong"),
        "{audited:?}"
    );

    // Not while the newest revision is unfinished, whichever revision is named.
    let again = l.jobs().reissue(&first, &audit("again"), t0()).await;
    assert!(
        matches!(&again, Err(LedgerError::WrongState { key, .. }) if key == "w:2026-10-25.r2"),
        "{again:?}"
    );
    finish(t, &second).await;
    // Two at once, naming different revisions: one revision, and the other refused by name.
    let (a, b) = (audit("and again"), audit("and again, elsewhere"));
    let (one, other) = tokio::join!(
        l.jobs().reissue(&first, &a, t0()),
        l.jobs().reissue(&second, &b, t0())
    );
    let (third, refused) = match (one, other) {
        (Ok(k), Err(e)) | (Err(e), Ok(k)) => (k, e),
        both => panic!("one reissue and one refusal: {both:?}"),
    };
    assert!(
        matches!(refused, LedgerError::WrongState { .. }),
        "{refused:?}"
    );
    assert_eq!(third, jk("w:2026-10-25.r3"));
    let job = l.jobs().get(&third).await.expect("get").expect("job");
    assert_eq!(
        job.supersedes,
        Some(second.clone()),
        "supersedes the newest"
    );
    let revisions: Vec<String> = (l
        .jobs()
        .revisions(&second)
        .await
        .expect("revisions")
        .into_iter())
    .map(|j| j.key.to_string())
    .collect();
    assert_eq!(
        revisions,
        ["w:2026-10-25", "w:2026-10-25.r2", "w:2026-10-25.r3"]
    );
    let missing = l
        .jobs()
        .reissue(&jk("w:2026-10-26"), &audit("none"), t0())
        .await;
    assert!(
        matches!(missing, Err(LedgerError::NotFound { .. })),
        "{missing:?}"
    );

    // Finished revisions are finished work, as retention sees it.
    let terminal = l
        .retention()
        .terminal_before(t0() + chrono::Duration::days(1), 10)
        .await
        .expect("terminal");
    assert!(terminal.iter().any(|j| j.key == second), "{terminal:?}");

    // While a node that does not know revisions is live: refused, saying so.
    let older = Node {
        id: "old-node:1".into(),
        version: "0.1.0".into(),
        schema_version: 10,
        formats: "1".into(),
        started_at: t0(),
        heartbeat_at: t0(),
    };
    l.nodes().heartbeat(&older).await.expect("heartbeat");
    l.nodes().follow_formats(t0()).await.expect("formats");
    let refused = l.jobs().reissue(&third, &audit("older node"), t0()).await;
    assert!(
        matches!(refused, Err(LedgerError::OlderNodes { .. })),
        "{refused:?}"
    );
}

/// A report to two addresses (file transport) and a webhook on `rx`.
fn project(rx: &Receiver) -> Project {
    Project::new(&format!(
        r#"
[[report]]
id = "fixed"
title = "Fixed numbers"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
email = ["ops@example.com", "lead@example.com"]
[[report.webhook]]
url = "{}"
"#,
        rx.url("hook")
    ))
}

/// The outbox's message to `to` of job `job`, parsed.
fn eml(p: &Project, job: &str, to: &str) -> Vec<u8> {
    let name = dawnpost::delivery::email::message::file_name(&format!("{job}/email:{to}"));
    std::fs::read(p.root().join("var/outbox").join(name)).expect("the .eml")
}

async fn a_reissue_goes_to_every_destination_as_a_threaded_correction(t: &TestLedger) {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&rx);
    let config = p.load();
    t.ledger
        .nodes()
        .follow_formats(chrono::Utc::now())
        .await
        .expect("formats");
    let first = common::run_date(&config, &t.ledger, "2026-11-30", Duration::from_secs(60)).await;
    assert_eq!(first.exit_code, 0, "{first:?}");
    let key = jk("fixed:2026-11-30");
    let next = t
        .ledger
        .jobs()
        .reissue(&key, &audit("wrong totals"), chrono::Utc::now())
        .await
        .expect("reissue");
    let second = common::run_date(&config, &t.ledger, "2026-11-30", Duration::from_secs(60)).await;
    assert_eq!(
        second.exit_code, 0,
        "run --once finishes the date's revision too: {second:?}"
    );
    assert_eq!(
        t.ledger
            .jobs()
            .get(&next)
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Done
    );

    for to in ["ops@example.com", "lead@example.com"] {
        let (a, b) = (
            eml(&p, "fixed:2026-11-30", to),
            eml(&p, "fixed:2026-11-30.r2", to),
        );
        let (a, b) = (
            MessageParser::default().parse(&a).expect("first"),
            MessageParser::default().parse(&b).expect("correction"),
        );
        let original = a.message_id().expect("a Message-ID").to_string();
        assert_ne!(
            b.message_id(),
            Some(original.as_str()),
            "a message of its own"
        );
        let subject = b.subject().expect("subject");
        assert!(
            subject.starts_with("Correction (revision 2): Fixed numbers"),
            "{subject}"
        );
        assert_eq!(
            b.in_reply_to().as_text(),
            Some(original.as_str()),
            "threaded to the first"
        );
        assert_eq!(b.references().as_text(), Some(original.as_str()));
    }
    let hooks = rx.hits_for("hook");
    assert_eq!(hooks.len(), 2, "once per revision");
    let body: serde_json::Value = serde_json::from_slice(&hooks[1].body).expect("json");
    assert_eq!(
        (body["revision"].as_u64(), body["supersedes"].as_str()),
        (Some(2), Some("fixed:2026-11-30"))
    );
    assert!(
        hooks[1]
            .header("webhook-id")
            .is_some_and(|id| id.starts_with("fixed:2026-11-30.r2/"))
    );
    let first_body: serde_json::Value = serde_json::from_slice(&hooks[0].body).expect("json");
    assert!(
        first_body.get("supersedes").is_none(),
        "revision 1 names none"
    );
}

async fn an_operator_reissues_from_the_console_and_a_viewer_cannot(t: &TestLedger) {
    use common::console::{hidden, location, page, post_form, sign_in};
    use common::ops_server::{TOKEN, VIEWER_TOKEN, start};
    let s = start(t).await;
    t.ledger
        .nodes()
        .follow_formats(t0())
        .await
        .expect("formats");
    let key = jk("warehouse-17:2026-11-29");
    ready_jobs(t, &["warehouse-17:2026-11-29"]).await;
    finish(t, &key).await;
    let path = format!("/ui/jobs/{key}");
    let action = format!("{path}/reissue");
    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, &path, &viewer).await;
    assert!(!html.contains(&action), "no form for a viewer");
    let form = [("csrf", "x"), ("by", "ops"), ("reason", "wrong totals")];
    let r = post_form(&s, &action, Some(&viewer), &form).await;
    assert_eq!(r.status(), reqwest::StatusCode::FORBIDDEN);

    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, &path, &operator).await;
    assert!(
        html.contains(&action) && html.contains("Reissue as a correction"),
        "{html}"
    );
    let csrf = hidden(&html, "csrf");
    let form = [
        ("csrf", csrf.as_str()),
        ("by", "ops"),
        ("reason", "wrong totals"),
    ];
    let r = post_form(&s, &action, Some(&operator), &form).await;
    assert_eq!(r.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/ui/jobs/warehouse-17:2026-11-29.r2");
    let html = page(&s, "/ui/jobs/warehouse-17:2026-11-29.r2", &operator).await;
    assert!(
        html.contains("Supersedes") && html.contains("(this one)"),
        "{html}"
    );
    let audited = t.ledger.deliveries().redrives(&key).await.expect("audit");
    assert!(
        audited
            .iter()
            .any(|a| a.action == "reissue" && a.via.as_deref() == Some("console:operator")),
        "{audited:?}"
    );
    // The new revision is not finished: a second reissue is refused, 409.
    let r = post_form(&s, &action, Some(&operator), &form).await;
    assert_eq!(r.status(), reqwest::StatusCode::CONFLICT);
}

on_both_backends!(
    an_operator_reissues_from_the_console_and_a_viewer_cannot,
    a_finished_job_is_reissued_as_its_next_revision_and_only_then,
    a_reissue_goes_to_every_destination_as_a_threaded_correction,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reissues_a_finished_job_audited_and_show_tells_every_revision() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&rx);
    let key = "fixed:2026-11-30";
    let unfinished = run_in(p.root(), &["enqueue", "fixed", "--date", "2026-11-30"]);
    assert!(unfinished.status.success(), "{}", text(&unfinished));
    let early = run_in(
        p.root(),
        &["reissue", key, "--by", "ops", "--reason", "wrong"],
    );
    assert!(
        !early.status.success() && text(&early).contains("not finished"),
        "{}",
        text(&early)
    );
    let once = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(once.status.code(), Some(0), "{}", text(&once));
    let blank = run_in(p.root(), &["reissue", key, "--by", "ops", "--reason", " "]);
    assert!(
        !blank.status.success() && text(&blank).contains("must not be empty"),
        "{}",
        text(&blank)
    );
    let unnamed = run_in(p.root(), &["reissue", key, "--reason", "wrong"]);
    assert!(
        !unnamed.status.success() && text(&unnamed).contains("--by"),
        "{}",
        text(&unnamed)
    );
    let done = run_in(
        p.root(),
        &["reissue", key, "--by", "ops", "--reason", "wrong totals"],
    );
    assert!(done.status.success(), "{}", text(&done));
    assert!(
        text(&done).contains("reissued fixed:2026-11-30 as fixed:2026-11-30.r2"),
        "{}",
        text(&done)
    );
    let show = text(&run_in(p.root(), &["show", "fixed:2026-11-30.r2"]));
    assert!(
        show.contains("revision 2: a correction that supersedes fixed:2026-11-30"),
        "{show}"
    );
    assert!(
        show.contains("fixed:2026-11-30  done") && show.contains("fixed:2026-11-30.r2  ready"),
        "{show}"
    );
    // Every revision's artifact: the first's sha256 and parts, the second not yet rendered.
    let first = show
        .lines()
        .find(|l| l.contains("fixed:2026-11-30  done"))
        .unwrap_or("");
    assert!(
        first.contains("artifact sha256 ") && first.contains("(.txt, .csv"),
        "{show}"
    );
    let second = show
        .lines()
        .find(|l| l.contains("fixed:2026-11-30.r2  ready"))
        .unwrap_or("");
    assert!(second.contains("not rendered"), "{show}");
    let json = run_in(p.root(), &["show", "fixed:2026-11-30.r2", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let revisions = json["revisions"].as_array().cloned().unwrap_or_default();
    assert_eq!(revisions.len(), 2, "{json}");
    assert!(
        revisions[0]["artifact"]["sha256"]
            .as_str()
            .is_some_and(|s| s.len() == 64),
        "{json}"
    );
    assert!(revisions[1].get("artifact").is_none(), "{json}");
    let original = text(&run_in(p.root(), &["show", key]));
    assert!(
        original.contains("reissue") && original.contains("by ops via cli: wrong totals"),
        "{original}"
    );
}
