//! `send_when = "changed"` and `"alert"`: each job decided once, in the transaction that
//! records its render or its skip, from what the report's earlier jobs decided. An alert's whole
//! life and a report that sends only on a change, run for real (file source, emails as .eml
//! files) on both backends; two nodes racing on the same dates.

use crate::common;

use std::time::Duration;

use std::sync::Arc;

use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger, jk};
use dawnpost::ledger::JobState;
use dawnpost::runtime::metrics::Metrics;
use dawnpost::views::api::JobHistoryV1;
use dawnpost::views::history::JobHistory;
use mail_parser::MessageParser;

/// A report `id` on `config/sample/<id>.json`, emailed to ops@example.com, with `rule`'s keys.
fn project(id: &str, rule: &str) -> Project {
    let p = Project::new(&format!(
        r#"
[[report]]
id = "{id}"
title = "Late orders"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/{id}.json" }}
email = ["ops@example.com"]
{rule}
"#
    ));
    set_late(&p, id, 0);
    p
}

/// Writes the report's data: the shipped sample with `summary.orders_late = late`.
fn set_late(p: &Project, id: &str, late: i64) {
    let sample = std::fs::read_to_string(p.root().join("config/sample/warehouse-17.json"))
        .expect("the sample");
    let mut data: serde_json::Value = serde_json::from_str(&sample).expect("json");
    data["summary"]["orders_late"] = late.into();
    p.write(&format!("config/sample/{id}.json"), &data.to_string());
}

const ALERT: &str = r#"send_when = "alert"
[report.alert]
value = "data.summary.orders_late"
above = 20"#;

/// The subject of the email job `job` sent, if it sent one.
fn subject(p: &Project, job: &str) -> Option<String> {
    let name =
        dawnpost::delivery::email::message::file_name(&format!("{job}/email:ops@example.com"));
    let bytes = std::fs::read(p.root().join("var/outbox").join(name)).ok()?;
    let message = MessageParser::default().parse(&bytes).expect("an email");
    message.subject().map(str::to_string)
}

/// Runs date `date` of report `id` with its data at `late`, counting into `metrics`; the
/// job's state and decision.
async fn day(
    (p, t, metrics): (&Project, &TestLedger, &Arc<Metrics>),
    id: &str,
    date: &str,
    late: i64,
) -> (JobState, String) {
    set_late(p, id, late);
    let opts = dawnpost::node::runner::RunOnceOptions {
        date: Some(date.parse().expect("date")),
        max_wait: Duration::from_secs(60),
        progress: false,
        metrics: Some(metrics.clone()),
    };
    let clock = Arc::new(dawnpost::SystemClock);
    let run = dawnpost::node::runner::run_once(
        &p.load(),
        t.ledger.clone(),
        clock,
        &opts,
        Default::default(),
    )
    .await
    .expect("run once");
    assert_eq!(run.exit_code, 0, "{run:?}");
    decided(t, &format!("{id}:{date}")).await
}

async fn decided(t: &TestLedger, key: &str) -> (JobState, String) {
    let key = jk(key);
    let job = t.ledger.jobs().get(&key).await.expect("get").expect("job");
    let row = t.ledger.decisions().of(&key).await.expect("decision");
    let words = row.map(|r| format!("{}: {}", if r.sent { "sent" } else { "skipped" }, r.words));
    (job.state, words.unwrap_or_default())
}

async fn an_alert_triggers_holds_recovers_and_rests(t: &TestLedger) {
    let p = project("late", ALERT);
    let metrics = Arc::new(Metrics::default());
    let life = [
        (
            "2026-12-01",
            5,
            JobState::Skipped,
            "skipped: alert ok since late:2026-12-01, value 5",
        ),
        (
            "2026-12-02",
            23,
            JobState::Done,
            "sent: alert triggered, value 23 > 20",
        ),
        (
            "2026-12-03",
            23,
            JobState::Skipped,
            "skipped: alert still triggered since late:2026-12-02, value 23 > 20",
        ),
        (
            "2026-12-04",
            30,
            JobState::Skipped,
            "skipped: alert still triggered since late:2026-12-02, value 30 > 20 (was 23)",
        ),
        (
            "2026-12-05",
            12,
            JobState::Done,
            "sent: recovered, value 12",
        ),
        (
            "2026-12-06",
            11,
            JobState::Skipped,
            "skipped: alert ok since late:2026-12-05, value 11",
        ),
    ];
    for (date, late, state, words) in life {
        assert_eq!(
            day((&p, t, &metrics), "late", date, late).await,
            (state, words.to_string()),
            "{date}"
        );
    }
    let text = metrics.render();
    for series in [
        "dawnpost_alert_state{report=\"late\"} 0",
        "dawnpost_alert_transitions_total{report=\"late\",to=\"triggered\"} 1",
        "dawnpost_alert_transitions_total{report=\"late\",to=\"ok\"} 1",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} in\n{text}");
    }
    let shown = JobHistory::load(&t.ledger, &jk("late:2026-12-02"))
        .await
        .expect("load")
        .expect("job");
    assert!(
        shown
            .render_text()
            .contains("  sent: alert triggered, value 23 > 20 (send_when = \"alert\")"),
        "{}",
        shown.render_text()
    );
    let json = serde_json::to_value(JobHistoryV1::from(&shown)).expect("json");
    assert_eq!(
        json["decision"],
        serde_json::json!({"rule": "alert", "sent": true, "event": "triggered",
            "words": "alert triggered, value 23 > 20", "value": 23.0, "triggered": true})
    );
    let job = t
        .ledger
        .jobs()
        .get(&jk("late:2026-12-03"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        job.last_error.as_deref(),
        Some("alert still triggered since late:2026-12-02, value 23 > 20"),
        "a skip says why"
    );
    let sent: Vec<Option<String>> = ["01", "02", "03", "04", "05", "06"]
        .iter()
        .map(|d| subject(&p, &format!("late:2026-12-{d}")))
        .collect();
    assert_eq!(
        sent,
        [
            None,
            Some("Alert: orders_late 23 > 20 · Late orders — 2026-12-02".into()),
            None,
            None,
            Some("Recovered: orders_late 12 · Late orders — 2026-12-05".into()),
            None,
        ]
    );
}

async fn changed_sends_the_first_and_each_change_and_a_reissue_is_decided_again(t: &TestLedger) {
    let p = project("moves", "send_when = \"changed\"");
    let metrics = Arc::new(Metrics::default());
    let days = [
        (
            "2026-12-01",
            5,
            JobState::Done,
            "sent: first run of the report",
        ),
        (
            "2026-12-02",
            5,
            JobState::Skipped,
            "skipped: unchanged since moves:2026-12-01",
        ),
        (
            "2026-12-03",
            7,
            JobState::Done,
            "sent: changed since moves:2026-12-01",
        ),
    ];
    for (date, late, state, words) in days {
        assert_eq!(
            day((&p, t, &metrics), "moves", date, late).await,
            (state, words.to_string()),
            "{date}"
        );
    }
    // A correction of the 2nd with the data of the 1st stays unchanged, and says what its
    // revision 1 decided; the 3rd is still compared with the 1st.
    let audit = dawnpost::ledger::Audit::new("ops", "late figures", dawnpost::ledger::Via::Cli)
        .expect("audited");
    let now = chrono::Utc::now();
    t.ledger.nodes().follow_formats(now).await.expect("formats");
    let r2 = t
        .ledger
        .jobs()
        .reissue(&jk("moves:2026-12-02"), &audit, now)
        .await
        .expect("reissue");
    set_late(&p, "moves", 6);
    let run = common::run_date(&p.load(), &t.ledger, "2026-12-02", Duration::from_secs(60)).await;
    assert_eq!(run.exit_code, 0, "{run:?}");
    assert_eq!(
        decided(t, &r2.to_string()).await,
        (
            JobState::Done,
            "sent: changed since moves:2026-12-01; revision 1 was skipped: unchanged since moves:2026-12-01".into()
        )
    );
    assert!(
        subject(&p, "moves:2026-12-02.r2").is_some(),
        "the correction went out"
    );
    assert!(subject(&p, "moves:2026-12-02").is_none());
}

async fn nodes_racing_over_a_backlog_send_one_alert_for_one_transition(t: &TestLedger) {
    let p = project("race", ALERT);
    set_late(&p, "race", 23);
    let config = p.load();
    // A backlog of four dates (as a backfill makes), rendered by four nodes at once, each
    // running one date: the decisions follow the dates whatever the order the renders finish in.
    let now = chrono::Utc::now();
    let dates = ["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"];
    let backlog: Vec<_> = (dates.iter())
        .map(|d| common::fixtures::new_job("race", d, now))
        .collect();
    t.ledger
        .jobs()
        .insert_many(&backlog, now)
        .await
        .expect("backlog");
    let run = |date| common::run_date(&config, &t.ledger, date, Duration::from_secs(60));
    let (a, b, c, d) = tokio::join!(
        run("2026-12-04"),
        run("2026-12-03"),
        run("2026-12-02"),
        run("2026-12-01")
    );
    for r in [a, b, c, d] {
        assert_eq!(r.exit_code, 0, "{r:?}");
    }
    let mut sent = Vec::new();
    for d in 1..=4 {
        let key = format!("race:2026-12-0{d}");
        if subject(&p, &key).is_some() {
            sent.push(key);
        }
    }
    assert_eq!(sent, ["race:2026-12-01"], "one alert for one transition");
    let (_, words) = decided(t, "race:2026-12-04").await;
    assert_eq!(
        words,
        "skipped: alert still triggered since race:2026-12-01, value 23 > 20"
    );
}

/// A redrive delivers what was decided: the alert's quarantined webhook, redriven after its
/// value fell back, still gets the alert it was decided with, and nothing is decided again.
async fn a_redrive_delivers_what_was_decided_and_decides_nothing(t: &TestLedger) {
    // The webhook refuses its first request (400: permanent) and takes the next.
    let rule: HttpRule =
        Arc::new(|_: &str, nth, _| (if nth == 1 { 400 } else { 204 }, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let hook = format!(
        "{ALERT}\n[[report.webhook]]\nurl = \"{}\"\n",
        rx.url("hook")
    );
    let p = project("held", &hook);
    set_late(&p, "held", 23);
    let run = common::run_date(&p.load(), &t.ledger, "2026-12-01", Duration::from_secs(60)).await;
    assert_eq!(run.exit_code, 3, "quarantined: {run:?}");
    let key = jk("held:2026-12-01");
    let audit = dawnpost::ledger::Audit::new("ops", "receiver fixed", dawnpost::ledger::Via::Cli)
        .expect("audited");
    set_late(&p, "held", 5);
    t.ledger
        .jobs()
        .redrive(&key, &audit, chrono::Utc::now())
        .await
        .expect("redrive");
    let run = common::run_date(&p.load(), &t.ledger, "2026-12-01", Duration::from_secs(60)).await;
    assert_eq!(run.exit_code, 0, "{run:?}");
    let hits = rx.hits_for("hook");
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].body, hits[1].body, "the same artifact, as decided");
    assert_eq!(
        decided(t, "held:2026-12-01").await,
        (
            JobState::Done,
            "sent: alert triggered, value 23 > 20".to_string()
        )
    );
}

/// The binary, killed with SIGKILL once its alert's first webhook arrived (the decision and
/// the deliveries committed together), then run again: every webhook gets the alert, at most
/// twice and with one key, and the decision stands as made.
async fn a_sigkill_between_the_decision_and_the_sends_loses_neither(t: &TestLedger) {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(400)));
    let rx = Receiver::start(rule).await;
    let hooks: String = (1..=6)
        .map(|i| {
            format!(
                "[[report.webhook]]\nurl = \"{}\"\n",
                rx.url(&format!("h{i}"))
            )
        })
        .collect();
    let p = project("killed", &format!("{ALERT}\n{hooks}"));
    set_late(&p, "killed", 23);
    p.write(
        "config/dawnpost.toml",
        "[pool]\nconcurrency = 2\nlease = \"1s\"\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\n[server]\nbind = \"127.0.0.1:0\"\n",
    );
    let start = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
            .arg("--config")
            .arg(p.config_dir())
            .args(["run", "--once", "--date", "2026-11-30", "--max-wait", "60s"])
            .env("DAWNPOST_DATABASE_URL", t.url())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start dawnpost")
    };
    let mut first = start();
    rx.wait_for(1, Duration::from_secs(60)).await;
    first.start_kill().expect("SIGKILL");
    let _ = first.wait().await;
    assert!(rx.hits().len() < 6, "killed before every send");
    let again = tokio::time::timeout(Duration::from_secs(90), start().wait()).await;
    let status = again.expect("the second run finishes").expect("wait");
    assert_eq!(
        status.code(),
        Some(0),
        "everything delivered after the restart"
    );
    let mut keys: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for hit in rx.hits() {
        let key = hit.header("idempotency-key").expect("key");
        keys.entry(hit.path.clone()).or_default().push(key);
    }
    assert_eq!(keys.len(), 6, "every webhook got the alert: {keys:?}");
    for (path, got) in &keys {
        assert!(
            got.len() <= 2 && got.iter().all(|k| k == &got[0]),
            "{path}: {got:?}"
        );
    }
    assert_eq!(
        decided(t, "killed:2026-11-30").await,
        (
            JobState::Done,
            "sent: alert triggered, value 23 > 20".to_string()
        )
    );
}

/// An alert whose value is not a number in the data fails its job permanently, naming the
/// report, the path and what stood there: "not a number" is not "ok".
async fn an_alert_value_that_is_no_number_fails_the_job_naming_what_was_found(t: &TestLedger) {
    let p = project("odd", ALERT);
    let sample = std::fs::read_to_string(p.root().join("config/sample/odd.json")).expect("data");
    let mut data: serde_json::Value = serde_json::from_str(&sample).expect("json");
    data["summary"]["orders_late"] = "12".into();
    p.write("config/sample/odd.json", &data.to_string());
    let run = common::run_date(&p.load(), &t.ledger, "2026-12-01", Duration::from_secs(60)).await;
    assert_ne!(
        run.exit_code, 0,
        "a quarantined job is not a clean run: {run:?}"
    );
    let job = t
        .ledger
        .jobs()
        .get(&jk("odd:2026-12-01"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Quarantined);
    assert_eq!(
        job.last_error.as_deref(),
        Some(
            "report odd: the alert's value data.summary.orders_late is not a number: found the string \"12\""
        )
    );
    assert_eq!(
        job.attempts, 1,
        "not retried: the data says the same next time"
    );
    assert!(subject(&p, "odd:2026-12-01").is_none());
}

on_both_backends!(
    a_redrive_delivers_what_was_decided_and_decides_nothing,
    an_alert_value_that_is_no_number_fails_the_job_naming_what_was_found,
    a_sigkill_between_the_decision_and_the_sends_loses_neither,
    an_alert_triggers_holds_recovers_and_rests,
    changed_sends_the_first_and_each_change_and_a_reissue_is_decided_again,
    nodes_racing_over_a_backlog_send_one_alert_for_one_transition,
);
