//! The binary with its log sink broken or blocked: a reader that exited (EPIPE on every write)
//! or a pipe nobody reads. Logging must neither panic nor stall the pipeline, and SIGTERM must
//! still stop the daemon within `drain_timeout` plus a few seconds.

use crate::common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Project;
use common::peers::{HttpRule, Receiver};
use dawnpost::Ledger;
use dawnpost::ledger::DeliveryState;

const DATE: &str = "2026-11-30";

fn project(rx: &Receiver, hooks: usize, schedule: &str) -> Project {
    let mut reports = format!(
        r#"
[[report]]
id = "pipe"
title = "Pipe report"
schedule = "{schedule}"
timezone = "Europe/Berlin"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
"#
    );
    for i in 0..hooks {
        reports.push_str(&format!(
            "[[report.webhook]]\nurl = \"{}\"\n",
            rx.url(&format!("p{i}"))
        ));
    }
    let p = Project::new(&reports);
    p.write(
        "config/dawnpost.toml",
        "[pool]\nconcurrency = 4\nlease = \"2s\"\ndrain_timeout = \"1s\"\nadmission_per_second = 1000\n[server]\nbind = \"127.0.0.1:0\"\n",
    );
    p
}

/// Every hit arrived once, with the delivery key as its Idempotency-Key.
fn assert_each_once(rx: &Receiver, hooks: usize) {
    let mut by_path: BTreeMap<String, usize> = BTreeMap::new();
    for hit in rx.hits() {
        *by_path.entry(hit.path.clone()).or_default() += 1;
    }
    assert_eq!(
        by_path.len(),
        hooks,
        "every destination received its report"
    );
    for (path, n) in by_path {
        assert_eq!(n, 1, "{path} received {n} times");
    }
}

async fn all_sent(p: &Project, hooks: usize) {
    let url = format!("sqlite://{}", p.root().join("var/dawnpost.db").display());
    let l = Ledger::connect(&url, p.root()).await.expect("ledger");
    let deliveries = l
        .deliveries()
        .list(&common::jk(&format!("pipe:{DATE}")))
        .await
        .expect("deliveries");
    assert_eq!(deliveries.len(), hooks);
    for d in &deliveries {
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", d.key);
    }
    l.close().await;
}

fn command(p: &Project, args: &[&str], stderr: Stdio) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"));
    c.arg("--config")
        .arg(p.config_dir())
        .args(args)
        .env("RUST_LOG", "debug")
        .env_remove("DAWNPOST_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true);
    c
}

/// A pipe whose reader has exited: every write to it fails with EPIPE.
fn broken_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

/// The daemon with `stderr` as its log sink: it delivers today's job, then stops on SIGTERM
/// within `drain_timeout` (1 s) + 5 s, exit 0.
async fn daemon_delivers_and_stops(stderr: Stdio) {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let hooks = 20;
    // Fires every second: the first tick enqueues today's job.
    let p = project(&rx, hooks, "* * * * * *");
    let mut child = command(&p, &["run"], stderr)
        .spawn()
        .expect("start the daemon");
    rx.wait_for(hooks, Duration::from_secs(60)).await;
    let pid = child.id().expect("pid").to_string();
    let signalled = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the daemon stops on SIGTERM whatever its log sink does")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
    assert!(
        signalled.elapsed() < Duration::from_secs(6),
        "drain_timeout (1s) + 5s; took {:?}",
        signalled.elapsed()
    );
    assert_each_once(&rx, hooks);
    let url = format!("sqlite://{}", p.root().join("var/dawnpost.db").display());
    let l = Ledger::connect(&url, p.root()).await.expect("ledger");
    let jobs = l
        .jobs()
        .list(&dawnpost::ledger::JobFilter::default())
        .await
        .expect("jobs");
    assert_eq!(jobs.len(), 1);
    let deliveries = l.deliveries().list(&jobs[0].key).await.expect("deliveries");
    assert_eq!(deliveries.len(), hooks);
    assert!(deliveries.iter().all(|d| d.state == DeliveryState::Sent));
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_log_reader_neither_kills_work_nor_the_signal() {
    daemon_delivers_and_stops(broken_pipe()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_pipe_nobody_reads_does_not_hold_the_shutdown() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    daemon_delivers_and_stops(Stdio::from(writer)).await;
    drop(reader);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_pipe_nobody_reads_does_not_stall_the_pipeline() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let hooks = 60;
    let p = project(&rx, hooks, "0 30 6 * * *");
    // Debug logging fills the pipe's 64 KiB buffer within the first render; the reader stays
    // open and never reads, so every later write would block a thread if logging were blocking.
    let (reader, writer) = std::io::pipe().expect("pipe");
    let status = tokio::time::timeout(
        Duration::from_secs(60),
        command(
            &p,
            &["run", "--once", "--date", DATE, "--max-wait", "30s"],
            Stdio::from(writer),
        )
        .status(),
    )
    .await
    .expect("run --once finishes while its log pipe is full")
    .expect("status");
    drop(reader);
    assert_eq!(status.code(), Some(0));
    assert_each_once(&rx, hooks);
    all_sent(&p, hooks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_log_reader_does_not_fail_run_once() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let hooks = 20;
    let p = project(&rx, hooks, "0 30 6 * * *");
    let status = tokio::time::timeout(
        Duration::from_secs(60),
        command(
            &p,
            &["run", "--once", "--date", DATE, "--max-wait", "30s"],
            broken_pipe(),
        )
        .status(),
    )
    .await
    .expect("finishes")
    .expect("status");
    assert_eq!(status.code(), Some(0));
    assert_each_once(&rx, hooks);
    all_sent(&p, hooks).await;
}
