//! The binary under real signals: SIGKILL mid-run loses nothing and sends in-flight work at most
//! twice with the same key; SIGTERM drains, and a send cut at `drain_timeout` is recorded as an
//! `unknown` attempt whose retry keeps the key.

use crate::common;
use common::jk;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Project;
use common::peers::{HttpRule, Receiver};
use dawnpost::Ledger;
use dawnpost::ledger::DeliveryState;

const SECRET_ENV: &str = "DAWNPOST_TEST_CRASH_SECRET";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn project(rx: &Receiver, paths: &[String], pool: &str) -> Project {
    let mut reports = String::from(
        r#"
[[report]]
id = "crash"
title = "Crash report"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
"#,
    );
    for path in paths {
        reports.push_str(&format!(
            "[[report.webhook]]\nurl = \"{}\"\nsecret_env = \"{SECRET_ENV}\"\n",
            rx.url(path)
        ));
    }
    let p = Project::new(&reports);
    p.write(
        "config/dawnpost.toml",
        &format!("{pool}\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\nmax_attempts = 5\n[webhook]\ntimeout = \"10s\"\n[server]\nbind = \"127.0.0.1:0\"\n"),
    );
    p
}

fn start(p: &Project) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(p.config_dir())
        .args(["run", "--once", "--date", "2026-11-30", "--max-wait", "60s"])
        .env(SECRET_ENV, SECRET)
        .env_remove("DAWNPOST_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start dawnpost")
}

async fn ledger(p: &Project) -> Ledger {
    let url = format!("sqlite://{}", p.root().join("var/dawnpost.db").display());
    Ledger::connect(&url, p.root()).await.expect("ledger")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_run_loses_nothing_and_resends_at_most_once() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(400)));
    let rx = Receiver::start(rule).await;
    let paths: Vec<String> = (1..=12).map(|i| format!("h{i}")).collect();
    let p = project(
        &rx,
        &paths,
        "[pool]\nconcurrency = 3\nlease = \"1s\"\nadmission_per_second = 100",
    );

    let mut first = start(&p);
    rx.wait_for(5, Duration::from_secs(60)).await;
    first.start_kill().expect("SIGKILL");
    let _ = first.wait().await;
    let before_restart = rx.hits().len();
    assert!(
        before_restart < 12,
        "killed mid-run ({before_restart} requests so far)"
    );

    let status = tokio::time::timeout(Duration::from_secs(90), start(&p).wait())
        .await
        .expect("the second run finishes")
        .expect("wait");
    assert_eq!(
        status.code(),
        Some(0),
        "everything delivered after the restart"
    );

    let mut by_path: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for hit in rx.hits() {
        by_path
            .entry(hit.path.clone())
            .or_default()
            .push(hit.header("idempotency-key").expect("key"));
    }
    assert_eq!(by_path.len(), 12, "every destination received its report");
    for (path, keys) in &by_path {
        assert!(keys.len() <= 2, "{path} received {} times", keys.len());
        assert!(
            keys.iter().all(|k| k == &keys[0]),
            "{path}: the same Idempotency-Key on every try"
        );
        assert_eq!(
            keys[0],
            format!("crash:2026-11-30/webhook:{}", rx.url(path))
        );
    }
    let l = ledger(&p).await;
    let deliveries = l
        .deliveries()
        .list(&jk("crash:2026-11-30"))
        .await
        .expect("list");
    assert_eq!(deliveries.len(), 12);
    assert!(deliveries.iter().all(|d| d.state == DeliveryState::Sent));
    let store = dawnpost::report::artifact::ArtifactStore::open("file://var/artifacts", p.root())
        .expect("store");
    assert_eq!(
        store.count("crash", "2026-11-30").await.expect("count"),
        3,
        "one artifact: its HTML, text and CSV parts"
    );
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_within_its_bound_and_records_cut_sends_as_unknown() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_secs(20)));
    let rx = Receiver::start(rule).await;
    let paths: Vec<String> = (1..=4).map(|i| format!("s{i}")).collect();
    let p = project(
        &rx,
        &paths,
        "[pool]\nconcurrency = 2\nlease = \"30s\"\ndrain_timeout = \"500ms\"\nadmission_per_second = 100",
    );
    let mut child = start(&p);
    rx.wait_for(2, Duration::from_secs(60)).await;
    let pid = child.id().expect("pid");
    let signalled = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits within drain_timeout plus a few seconds")
        .expect("wait");
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "took {:?}",
        signalled.elapsed()
    );
    assert_eq!(status.code(), Some(4), "work is still pending");

    let l = ledger(&p).await;
    let deliveries = l
        .deliveries()
        .list(&jk("crash:2026-11-30"))
        .await
        .expect("list");
    assert_eq!(deliveries.len(), 4);
    // Two sends were cut at drain_timeout: they may have reached the receiver, so each counts
    // as an `unknown` attempt and its retry keeps the key. The two never leased are untouched.
    let mut cut = 0;
    for d in &deliveries {
        assert_eq!(d.state, DeliveryState::Pending, "{}", d.key);
        let attempts = l.deliveries().attempts(&d.key).await.expect("attempts");
        match d.attempts {
            0 => assert!(attempts.is_empty(), "{}", d.key),
            1 => {
                cut += 1;
                assert_eq!(attempts.len(), 1, "{}", d.key);
                assert_eq!(
                    attempts[0].class,
                    dawnpost::domain::outcome::ResponseClass::Unknown,
                    "{:?}",
                    attempts[0]
                );
                let reason = attempts[0].reason.as_deref().unwrap_or_default();
                assert!(reason.contains("shutdown"), "{reason}");
            }
            n => panic!("{}: {n} attempts", d.key),
        }
    }
    assert_eq!(cut, rx.hits().len(), "every send that started is recorded");
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_enqueues_delivers_and_stops_on_sigterm() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&rx, &["daemon".to_string()], "[pool]\nlease = \"5s\"");
    // Every second: the date's first fire (local midnight) is within catch_up, so the first
    // tick enqueues today's job at start.
    let reports = std::fs::read_to_string(p.root().join("config/reports.toml")).expect("read");
    p.write(
        "config/reports.toml",
        &reports.replace("\"0 30 6 * * *\"", "\"* * * * * *\""),
    );
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(p.config_dir())
        .arg("run")
        .env(SECRET_ENV, SECRET)
        .env_remove("DAWNPOST_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the daemon");
    rx.wait_for(1, Duration::from_secs(60)).await;
    let hit = &rx.hits()[0];
    let key = hit.header("idempotency-key").expect("key");
    assert!(
        key.starts_with("crash:") && key.contains("/webhook:"),
        "{key}"
    );
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().expect("pid").to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let signalled = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(40), child.wait())
        .await
        .expect("the daemon stops")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "stopped in {:?}",
        signalled.elapsed()
    );
    let l = ledger(&p).await;
    let jobs = l
        .jobs()
        .list(&dawnpost::ledger::JobFilter::default())
        .await
        .expect("jobs");
    assert_eq!(
        jobs.len(),
        1,
        "one job per local date, however often the schedule fires"
    );
    assert_eq!(jobs[0].origin.as_str(), "schedule");
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_outliving_its_lease_is_cut_recorded_and_retried_with_its_key() {
    // The first request hangs for 2.5 s against a 1 s lease: the send is cut at the lease (a
    // work item never runs past it), recorded by its own worker as ambiguous — the lease
    // extension keeps the rescuer away until then — and retried with the same key.
    let rule: HttpRule = Arc::new(|_: &str, nth, _| {
        let delay = if nth == 1 { 2500 } else { 0 };
        (204, None, Duration::from_millis(delay))
    });
    let rx = Receiver::start(rule).await;
    let p = project(&rx, &["long".to_string()], "[pool]\nlease = \"1s\"");
    let status = tokio::time::timeout(Duration::from_secs(60), start(&p).wait())
        .await
        .expect("finishes")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
    let keys: Vec<String> = rx
        .hits()
        .iter()
        .map(|h| h.header("idempotency-key").expect("key"))
        .collect();
    assert_eq!(keys.len(), 2, "cut once, then sent");
    assert_eq!(keys[0], keys[1], "the retry keeps the key");
    let l = ledger(&p).await;
    let d = &l
        .deliveries()
        .list(&jk("crash:2026-11-30"))
        .await
        .expect("list")[0];
    assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 2));
    let attempts = l.deliveries().attempts(&d.key).await.expect("attempts");
    assert_eq!(
        attempts[0].class,
        dawnpost::domain::outcome::ResponseClass::Ambiguous,
        "recorded by its worker, not rescued: {attempts:?}"
    );
    assert!(
        attempts[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("deadline")),
        "{attempts:?}"
    );
    l.close().await;
}
