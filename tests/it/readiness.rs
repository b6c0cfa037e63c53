//! Waiting for a report's data (`ready_when`, `wait_until`, `on_late`): a job whose data is not
//! ready waits in `waiting` without a lease, is probed again, renders once ready, and at its
//! deadline is sent stale, skipped or quarantined; every probe is recorded and shown. The
//! ledger's transitions on both backends; the pool for real against an HTTP readiness peer.

use crate::common;
use common::text;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use common::fixtures::{lease_of, params, ready_jobs, t0};
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger, jk, run_in};
use dawnpost::ledger::{AfterProbe, JobState, LedgerError, ProbeRow, Via};
use dawnpost::report::readiness::ProbeOutcome;

fn probe(outcome: ProbeOutcome, at: DateTime<Utc>) -> ProbeRow {
    ProbeRow {
        at,
        outcome,
        answer: format!("GET 127.0.0.1:9: {}", outcome.shown()),
    }
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

async fn a_job_not_ready_waits_without_a_lease_until_its_next_probe(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["w:2026-10-25"]).await;
    let key = jk("w:2026-10-25");
    let deadline = t0() + chrono::Duration::hours(3);
    let leased = l
        .leases()
        .jobs(&params("n1", t0(), 5))
        .await
        .expect("lease");
    let lease = &leased[0].lease;
    let next = t0() + secs(300);
    let first = probe(ProbeOutcome::NotReady, t0() + secs(1));
    l.waits()
        .probed(lease, &first, deadline, &AfterProbe::Wait { next })
        .await
        .expect("wait");
    let job = l.jobs().get(&key).await.expect("get").expect("job");
    assert_eq!(job.state, JobState::Waiting);
    assert_eq!((job.ready_at, job.wait_until), (next, Some(deadline)));
    assert_eq!(job.attempts, 0, "a probe is not a render attempt");
    assert_eq!(job.lease_owner, None, "no lease between probes");
    assert!(!job.state.is_terminal());
    assert_eq!(l.waits().oldest().await.expect("oldest"), Some(t0()));
    assert_eq!(l.waits().overdue(deadline).await.expect("overdue"), 0);
    assert_eq!(
        l.waits()
            .overdue(deadline + secs(1))
            .await
            .expect("overdue"),
        1
    );

    // Not due before its next probe; due then, like a ready job.
    let early = l
        .leases()
        .jobs(&params("n2", next - secs(1), 5))
        .await
        .expect("lease");
    assert!(early.is_empty(), "not due before its next probe");
    let again = l
        .leases()
        .jobs(&params("n2", next, 5))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job.state, JobState::Rendering);
    // The first lease is spent: its late probe is refused and records nothing.
    let late = l
        .waits()
        .probed(lease, &first, deadline, &AfterProbe::Wait { next })
        .await;
    assert!(
        matches!(late, Err(LedgerError::LeaseLost { .. })),
        "{late:?}"
    );

    let ready = probe(ProbeOutcome::Ready, next + secs(1));
    let render = AfterProbe::Render { late: false };
    l.waits()
        .probed(&again[0].lease, &ready, deadline, &render)
        .await
        .expect("ready");
    let job = l.jobs().get(&key).await.expect("get").expect("job");
    assert_eq!(
        job.state,
        JobState::Rendering,
        "renders under the same lease"
    );
    assert_eq!(job.late_at, None);
    let probes = l.waits().probes(&key).await.expect("probes");
    assert_eq!(probes, vec![first, ready], "each probe, in order");
    assert_eq!(l.waits().oldest().await.expect("oldest"), None);
}

async fn a_deadline_skips_or_quarantines_with_the_reason_and_a_redrive_does_not_wait_again(
    t: &TestLedger,
) {
    let l = &t.ledger;
    ready_jobs(t, &["s:2026-10-25", "q:2026-10-25", "c:2026-10-25"]).await;
    let deadline = t0() + secs(60);
    let leased = l
        .leases()
        .jobs(&params("n1", t0(), 5))
        .await
        .expect("lease");
    let at = deadline + secs(1);
    let why = "its data was not ready by its deadline".to_string();
    let skip = AfterProbe::Skip { why: why.clone() };
    let quarantine = AfterProbe::Quarantine { why: why.clone() };
    let not_ready = probe(ProbeOutcome::Failed, at);
    l.waits()
        .probed(
            &lease_of(&leased, "s:2026-10-25"),
            &not_ready,
            deadline,
            &skip,
        )
        .await
        .expect("skip");
    l.waits()
        .probed(
            &lease_of(&leased, "q:2026-10-25"),
            &not_ready,
            deadline,
            &quarantine,
        )
        .await
        .expect("quarantine");
    let wait = AfterProbe::Wait { next: deadline };
    l.waits()
        .probed(
            &lease_of(&leased, "c:2026-10-25"),
            &probe(ProbeOutcome::NotReady, t0()),
            deadline,
            &wait,
        )
        .await
        .expect("wait");

    let skipped = l
        .jobs()
        .get(&jk("s:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(skipped.state, JobState::Skipped);
    assert_eq!(
        (skipped.last_error.as_deref(), skipped.late_at),
        (Some(why.as_str()), Some(at))
    );
    assert_eq!(skipped.terminal_at, Some(at));
    let held = l
        .jobs()
        .get(&jk("q:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (held.state, held.late_at),
        (JobState::Quarantined, Some(at))
    );

    // Redriven, it renders at once, still late: it will not wait for its deadline again.
    let audit = dawnpost::ledger::Audit::new("ops", "send what is there", Via::Cli).expect("audit");
    l.jobs()
        .redrive(&jk("q:2026-10-25"), &audit, at + secs(5))
        .await
        .expect("redrive");
    let redriven = l
        .jobs()
        .get(&jk("q:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (redriven.state, redriven.late_at),
        (JobState::Ready, Some(at))
    );

    // A waiting job can be cancelled, like a ready one.
    let audit = dawnpost::ledger::Audit::new("ops", "not needed", Via::Cli).expect("audit");
    l.jobs()
        .cancel(&jk("c:2026-10-25"), &audit, at)
        .await
        .expect("cancel");
    let cancelled = l
        .jobs()
        .get(&jk("c:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(cancelled.state, JobState::Cancelled);

    // Finished work: retention deletes its probes with its rows.
    let rows = l
        .retention()
        .delete(&jk("s:2026-10-25"))
        .await
        .expect("delete");
    assert!(rows.is_some(), "a skipped job is finished");
    assert!(
        l.waits()
            .probes(&jk("s:2026-10-25"))
            .await
            .expect("probes")
            .is_empty()
    );
}

/// A report that waits for `ready` on `rx` (probed every second) and sends to its `hook`.
/// It fires daily at `fire`'s time of day (UTC) and waits until `wait_until`.
fn project(rx: &Receiver, fire: DateTime<Utc>, wait_until: &str, on_late: &str) -> Project {
    let schedule = format!("{} {} {} * * *", fire.second(), fire.minute(), fire.hour());
    Project::new(&format!(
        r#"
[[report]]
id = "late-data"
title = "Late data"
schedule = "{schedule}"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
ready_when = {{ kind = "http", url = "{ready}", every = "1s", timeout = "2s" }}
wait_until = "{wait_until}"
on_late = "{on_late}"
[[report.webhook]]
url = "{hook}"
"#,
        ready = rx.url("ready?from={{window.start}}"),
        hook = rx.url("hook"),
    ))
}

/// Ready (200) from the `ready_from`th probe on, 503 before it; the hook takes everything.
fn peer(ready_from: usize) -> HttpRule {
    Arc::new(move |path: &str, nth, _| match path {
        "ready" if nth < ready_from => (503, None, Duration::ZERO),
        _ => (200, None, Duration::ZERO),
    })
}

fn today() -> String {
    Utc::now().date_naive().to_string()
}

/// Yesterday: a job whose deadline (an hour after a midnight fire) has long passed.
fn yesterday() -> String {
    (Utc::now().date_naive() - chrono::Days::new(1)).to_string()
}

fn midnight() -> DateTime<Utc> {
    common::utc("2026-01-01T00:00:00Z")
}

/// `run --once` for `date`, on a ledger that has seen the live nodes (none: every format is
/// written, as the binary does once it looked).
async fn run(p: &Project, t: &TestLedger, date: &str) -> dawnpost::node::runner::RunOnceSummary {
    t.ledger
        .nodes()
        .follow_formats(Utc::now())
        .await
        .expect("formats");
    common::run_date(&p.load(), &t.ledger, date, Duration::from_secs(60)).await
}

async fn a_report_waits_for_its_data_and_renders_once_it_is_ready(t: &TestLedger) {
    let rx = Receiver::start(peer(3)).await;
    let p = project(&rx, Utc::now(), "1d", "quarantine");
    let summary = run(&p, t, &today()).await;
    assert_eq!(summary.exit_code, 0, "delivered: {summary:?}");
    let probes = rx.hits_for("ready");
    assert_eq!(probes.len(), 3, "two answers of 503, then ready");
    let gap = probes[1].at - probes[0].at;
    assert!(
        gap >= Duration::from_millis(850),
        "probed every second (jittered): {gap:?}"
    );
    assert_eq!(rx.hits_for("hook").len(), 1, "sent once, when ready");
    let body = String::from_utf8_lossy(&rx.hits_for("hook")[0].body).to_string();
    assert!(!body.contains("The data may be incomplete"), "not stale");

    let key = jk(&format!("late-data:{}", today()));
    let outcomes: Vec<ProbeOutcome> = (t.ledger.waits().probes(&key).await.expect("probes"))
        .into_iter()
        .map(|p| p.outcome)
        .collect();
    use ProbeOutcome::{NotReady, Ready};
    assert_eq!(outcomes, [NotReady, NotReady, Ready]);
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    assert_eq!(
        (job.state, job.attempts, job.late_at),
        (JobState::Done, 1, None)
    );
}

async fn a_deadline_crossed_while_waiting_sends_what_is_there_marked_stale(t: &TestLedger) {
    let rx = Receiver::start(peer(usize::MAX)).await;
    // Fired now; the deadline is three seconds on, crossed after a few probes.
    let p = project(&rx, Utc::now(), "3s", "send");
    let summary = run(&p, t, &today()).await;
    assert_eq!(summary.exit_code, 0, "sent at the deadline: {summary:?}");
    assert!(rx.hits_for("ready").len() >= 2, "probed while it waited");
    let hooks = rx.hits_for("hook");
    assert_eq!(hooks.len(), 1);
    let body = String::from_utf8_lossy(&hooks[0].body).to_string();
    assert!(
        body.contains("The data may be incomplete"),
        "the template says it is stale"
    );
    let key = jk(&format!("late-data:{}", today()));
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    let (late, until) = (
        job.late_at.expect("late"),
        job.wait_until.expect("deadline"),
    );
    assert!(late >= until, "late from its deadline on: {late} {until}");
}

async fn a_deadline_quarantines_and_a_redrive_sends_without_waiting_again(t: &TestLedger) {
    let rx = Receiver::start(peer(usize::MAX)).await;
    let p = project(&rx, midnight(), "1h", "quarantine");
    let summary = run(&p, t, &yesterday()).await;
    assert_eq!(summary.exit_code, 3, "quarantined at once: {summary:?}");
    assert_eq!(
        rx.hits_for("ready").len(),
        1,
        "one probe: the deadline had passed"
    );
    assert!(rx.hits_for("hook").is_empty());
    let key = jk(&format!("late-data:{}", yesterday()));
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    let why = job.last_error.clone().expect("why");
    assert!(
        why.contains("not ready by its deadline")
            && why.contains("HTTP 503")
            && why.contains("quarantine"),
        "{why}"
    );
    let audit = dawnpost::ledger::Audit::new("ops", "send what is there", Via::Cli).expect("audit");
    t.ledger
        .jobs()
        .redrive(&key, &audit, Utc::now())
        .await
        .expect("redrive");
    let again = run(&p, t, &yesterday()).await;
    assert_eq!(again.exit_code, 0, "sent: {again:?}");
    assert_eq!(rx.hits_for("ready").len(), 2, "one more probe, no wait");
    let body = String::from_utf8_lossy(&rx.hits_for("hook")[0].body).to_string();
    assert!(body.contains("The data may be incomplete"), "still stale");
}

async fn a_deadline_skips_and_nothing_is_sent(t: &TestLedger) {
    let rx = Receiver::start(peer(usize::MAX)).await;
    let p = project(&rx, midnight(), "1h", "skip");
    let summary = run(&p, t, &yesterday()).await;
    assert_eq!(
        summary.exit_code, 0,
        "skipped counts as finished: {summary:?}"
    );
    assert!(rx.hits_for("hook").is_empty(), "nothing sent");
    let key = jk(&format!("late-data:{}", yesterday()));
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    assert_eq!(job.state, JobState::Skipped);
}

on_both_backends!(
    a_job_not_ready_waits_without_a_lease_until_its_next_probe,
    a_deadline_skips_or_quarantines_with_the_reason_and_a_redrive_does_not_wait_again,
    a_report_waits_for_its_data_and_renders_once_it_is_ready,
    a_deadline_crossed_while_waiting_sends_what_is_there_marked_stale,
    a_deadline_quarantines_and_a_redrive_sends_without_waiting_again,
    a_deadline_skips_and_nothing_is_sent,
    metrics_and_the_console_show_a_job_waiting_past_its_deadline,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_job_is_shown_listed_and_left_waiting_by_run_once_at_its_max_wait() {
    // A probe that hangs past its timeout is cut and counts as not ready.
    let rule: HttpRule = Arc::new(|path: &str, _, _| match path {
        "ready" => (200, None, Duration::from_secs(30)),
        _ => (200, None, Duration::ZERO),
    });
    let rx = Receiver::start(rule).await;
    let p = project(&rx, Utc::now(), "1d", "send");
    let run = run_in(p.root(), &["run", "--once", "--max-wait", "3s"]);
    assert_eq!(run.status.code(), Some(4), "still waiting: {}", text(&run));
    let key = format!("late-data:{}", today());
    let show = text(&run_in(p.root(), &["show", &key]));
    assert!(show.contains("state waiting"), "{show}");
    assert!(show.contains("waiting for its data until"), "{show}");
    assert!(show.contains("probes of its data: "), "{show}");
    assert!(
        show.contains("failed: GET http://127.0.0.1:"),
        "cut at its timeout: {show}"
    );
    assert!(
        !show.contains("/ready"),
        "a URL's path is never shown: {show}"
    );
    let listed = text(&run_in(p.root(), &["jobs", "--state", "waiting"]));
    assert!(listed.contains(&key), "{listed}");
    let json = run_in(p.root(), &["show", &key, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["state"], "waiting");
    assert_eq!(v["probes"][0]["outcome"], "failed");
    assert!(v["wait_until"].is_string(), "{v}");
    assert!(rx.hits_for("hook").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_an_older_node_is_live_a_job_not_ready_is_probed_again_from_ready() {
    let rx = Receiver::start(peer(usize::MAX)).await;
    let p = project(&rx, Utc::now(), "1d", "send");
    let url = format!("sqlite://{}", p.root().join("var/dawnpost.db").display());
    let l = dawnpost::Ledger::connect(&url, p.root())
        .await
        .expect("ledger");
    let now = Utc::now();
    let older = dawnpost::ledger::Node {
        id: "old-node:1".into(),
        version: "0.1.0".into(),
        schema_version: 10,
        formats: "1".into(),
        started_at: now,
        heartbeat_at: now,
    };
    l.nodes()
        .heartbeat(&older)
        .await
        .expect("an older node's heartbeat");
    l.close().await;
    let run = run_in(p.root(), &["run", "--once", "--max-wait", "2s"]);
    assert_eq!(run.status.code(), Some(4), "still pending: {}", text(&run));
    let show = text(&run_in(
        p.root(),
        &["show", &format!("late-data:{}", today())],
    ));
    assert!(
        show.contains("state ready"),
        "an older node would not know `waiting`: {show}"
    );
    assert!(show.contains("not ready: GET http://127.0.0.1:"), "{show}");
}

async fn metrics_and_the_console_show_a_job_waiting_past_its_deadline(t: &TestLedger) {
    let s = common::ops_server::start(t).await;
    let key = "warehouse-17:2026-11-30";
    ready_jobs(t, &[key]).await;
    let leased = t
        .ledger
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease");
    // The server's clock reads 2026-11-30 09:00; the deadline was 08:00.
    let deadline = common::utc("2026-11-30T08:00:00Z");
    let next = common::utc("2026-11-30T08:30:00Z");
    let answer = probe(ProbeOutcome::NotReady, t0());
    t.ledger
        .waits()
        .probed(
            &leased[0].lease,
            &answer,
            deadline,
            &AfterProbe::Wait { next },
        )
        .await
        .expect("wait");
    let metrics = reqwest::get(format!("{}/metrics", s.base))
        .await
        .expect("metrics");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("dawnpost_jobs{state=\"waiting\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dawnpost_jobs_waiting_past_deadline 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("dawnpost_oldest_waiting_job_age_seconds 0\n"),
        "{metrics}"
    );

    let cookie = common::console::sign_in(&s, common::ops_server::VIEWER_TOKEN).await;
    let html = common::console::page(&s, &format!("/ui/jobs/{key}"), &cookie).await;
    assert!(html.contains("Waits for its data until"), "{html}");
    assert!(
        html.contains("Probe of its data") && html.contains("GET 127.0.0.1:9: not ready"),
        "{html}"
    );
    let listed = common::console::page(&s, "/ui/jobs?state=waiting", &cookie).await;
    assert!(listed.contains(key), "{listed}");
}
