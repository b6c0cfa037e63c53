//! Faults of one node beside another on a shared PostgreSQL ledger, with the real binary: a
//! node paused (SIGSTOP) past its leases starts no send on them once it resumes, and a pause
//! mid-transaction holds up the other node's rescue only until the server ends it; a node whose
//! wall clock is off (libfaketime, Debian's `faketime`) keeps the ledger's time — it steals no
//! live lease, signs with the right time, stalls nothing when its clock steps back — and past
//! `pool.max_clock_offset` leases and rescues nothing, saying why.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger};
use dawnpost::keys::JobKey;
use dawnpost::ledger::DeliveryState;

const SECRET_ENV: &str = "DAWNPOST_TEST_NODE_FAULTS_SECRET";
const WEBHOOKS: usize = 20;
/// Backfilled fires: Jan 1 of 2024, 2025 and 2026 (none today, so the tick adds nothing).
const DATES: usize = 3;

/// A PostgreSQL URL whose connections use the test ledger's schema.
fn schema_url(t: &TestLedger) -> String {
    let base = std::env::var(common::POSTGRES_ENV).expect("url");
    let sep = if base.contains('?') { '&' } else { '?' };
    let schema = t.schema().expect("schema");
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

/// One node's project: one report with [`WEBHOOKS`] signed webhooks, on the shared ledger and
/// the shared artifact folder, with its own `[pool]`.
fn node(rx: &Receiver, db_url: &str, artifacts: &std::path::Path, pool: &str) -> Project {
    let mut reports = String::from(
        r#"
[[report]]
id = "paused"
title = "Paused node"
schedule = "0 30 6 1 1 *"
timezone = "UTC"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
"#,
    );
    for h in 0..WEBHOOKS {
        reports.push_str(&format!(
            "[[report.webhook]]\nurl = \"{}\"\nsecret_env = \"{SECRET_ENV}\"\n",
            rx.url(&format!("h{h}"))
        ));
    }
    let p = Project::new(&reports);
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[database]\nurl = \"{db_url}\"\nmax_connections = 4\n[artifacts]\nurl = \"file://{}\"\n[pool]\n{pool}\ndrain_timeout = \"10s\"\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\n[server]\nbind = \"127.0.0.1:0\"\n",
            artifacts.display()
        ),
    );
    p
}

/// libfaketime, for a node whose wall clock is off (the monotonic clock left alone, as a real
/// clock step leaves it).
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// `command` with its wall clock set by libfaketime's `FAKETIME` (`"+2h"`), or read from a
/// file a test rewrites (`@file`); `None` where libfaketime is not installed.
fn skewed(p: &Project, faketime: &str) -> Option<std::process::Command> {
    if !Path::new(FAKETIME_LIB).exists() {
        eprintln!("skipped: {FAKETIME_LIB} is missing (Debian's faketime package)");
        return None;
    }
    let mut c = command(p, &["run"]);
    c.env("LD_PRELOAD", FAKETIME_LIB)
        .env("DONT_FAKE_MONOTONIC", "1");
    match faketime.strip_prefix('@') {
        Some(file) => c
            .env("FAKETIME_TIMESTAMP_FILE", file)
            .env("FAKETIME_CACHE_DURATION", "1"),
        None => c.env("FAKETIME", faketime),
    };
    Some(c)
}

fn command(p: &Project, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"));
    c.arg("--config")
        .arg(p.config_dir())
        .args(args)
        .env(SECRET_ENV, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .env_remove("DAWNPOST_DATABASE_URL");
    c
}

/// The distinct delivery keys the receiver saw.
fn delivered(rx: &Receiver) -> BTreeSet<String> {
    rx.hits()
        .iter()
        .filter_map(|h| h.header("webhook-id"))
        .collect()
}

/// The deliveries leased by the process `pid` that the receiver has not seen.
async fn unsent_leases_of(t: &TestLedger, pid: u32, seen: &BTreeSet<String>) -> Vec<String> {
    let keys: Vec<JobKey> = ["2024-01-01", "2025-01-01", "2026-01-01"]
        .iter()
        .map(|d| common::jk(&format!("paused:{d}")))
        .collect();
    let owner = format!(":{pid}");
    t.ledger
        .delivery_list_many(&keys.iter().collect::<Vec<_>>())
        .await
        .expect("deliveries")
        .into_iter()
        .filter(|d| d.state == DeliveryState::Sending)
        .filter(|d| {
            d.lease_owner
                .as_deref()
                .is_some_and(|o| o.ends_with(&owner))
        })
        .map(|d| d.key.to_string())
        .filter(|k| !seen.contains(k))
        .collect()
}

/// Waits until the receiver saw `n` distinct deliveries; false if not within `limit`.
async fn distinct_reached(rx: &Receiver, n: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        // Counted before the check: a hit arriving between the two is not waited for again.
        let seen = rx.hits().len();
        if delivered(rx).len() >= n {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || !rx.reached(seen + 1, left).await {
            return delivered(rx).len() >= n;
        }
    }
}

/// Node A leases slowly (2 a second, so it always holds leases it waits to admit), is stopped
/// with SIGSTOP for far longer than its 2 s lease, and node B rescues and delivers everything.
/// Once A resumes, it sends nothing: every send it still meant to start is on a lease it no
/// longer holds, and it says so. If A was paused inside a transaction (an outcome write), the
/// rows it locked are rescued once the server ends that idle transaction: B still delivers
/// everything, well within the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_starts_no_send_on_the_leases_it_lost() {
    let Some(t) = TestLedger::postgres().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let url = schema_url(&t);
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let shared = tempfile::tempdir().expect("artifacts");
    let slow = "concurrency = 8\nlease = \"2s\"\nadmission_per_second = 2";
    let fast = "concurrency = 8\nlease = \"2s\"\nadmission_per_second = 100";
    let a = node(&rx, &url, shared.path(), slow);
    let b = node(&rx, &url, shared.path(), fast);
    let out = command(
        &a,
        &["backfill", "--from", "2024-01-01", "--to", "2026-01-02"],
    )
    .output()
    .expect("backfill");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let total = WEBHOOKS * DATES;

    let node_a = Daemon::start(command(&a, &["run"]));
    rx.wait_for(4, Duration::from_secs(60)).await;
    // Stopped where it holds a lease whose send has not reached the receiver: A leases two at
    // a time and waits a second to admit them, so nearly always at once.
    let mut tries = 0;
    let held = loop {
        node_a.signal("STOP");
        let held = unsent_leases_of(&t, node_a.pid(), &delivered(&rx)).await;
        tries += 1;
        if !held.is_empty() || tries == 10 {
            break held;
        }
        node_a.signal("CONT");
        rx.wait_for(rx.hits().len() + 1, Duration::from_secs(30))
            .await;
    };
    assert!(
        !held.is_empty(),
        "A never held a lease it had not sent on in {tries} stops"
    );
    let node_b = Daemon::start(command(&b, &["run"]));
    let all = distinct_reached(&rx, total, Duration::from_secs(120)).await;
    let resumed = Instant::now();
    node_a.signal("CONT");
    // SIGTERM at once: A drains what it resumed with (its sends end or are cut within
    // `drain_timeout`) before it exits.
    let (code_a, log_a) = node_a.stop();
    let (code_b, log_b) = node_b.stop();
    assert!(
        all,
        "{} of {total} delivered\nA:\n{log_a}\nB:\n{log_b}",
        delivered(&rx).len()
    );
    assert_eq!(
        (code_a, code_b),
        (Some(0), Some(0)),
        "A:\n{log_a}\nB:\n{log_b}"
    );
    let late: Vec<String> = rx
        .hits()
        .iter()
        .filter(|h| h.at >= resumed)
        .filter_map(|h| h.header("webhook-id"))
        .collect();
    assert!(
        late.is_empty(),
        "sent after A resumed: {late:?}\nA:\n{log_a}"
    );
    let dropped = log_a
        .lines()
        .filter(|l| l.contains("not sent: the lease ran out before the send started"))
        .count();
    assert!(
        dropped >= 1,
        "A held {held:?} unsent when it was stopped, and says what it did with them:\n{log_a}"
    );
    t.cleanup().await;
}

/// A GET of the daemon's `path`: status and body.
async fn get(addr: &str, path: &str) -> (u16, String) {
    match reqwest::get(format!("http://{addr}{path}")).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// The value of an unlabelled gauge in `/metrics`.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// How many times each delivery key arrived.
fn arrivals(rx: &Receiver) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for key in rx.hits().iter().filter_map(|h| h.header("webhook-id")) {
        *n.entry(key).or_insert(0) += 1;
    }
    n
}

/// Two nodes, backfilled work on a 3 s lease, and a receiver that takes 200 ms a request; `a`'s
/// `[pool]` may add keys. The project of each node and the total of deliveries.
async fn two_nodes(t: &TestLedger, rx: &Receiver, a_pool: &str) -> (Project, Project, usize) {
    let url = schema_url(t);
    let shared = tempfile::tempdir().expect("artifacts").keep();
    let pool = "concurrency = 4\nlease = \"3s\"";
    let a = node(rx, &url, &shared, &format!("{pool}\n{a_pool}"));
    let b = node(rx, &url, &shared, pool);
    let out = command(
        &a,
        &["backfill", "--from", "2024-01-01", "--to", "2026-01-02"],
    )
    .output()
    .expect("backfill");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (a, b, WEBHOOKS * DATES)
}

/// A node two hours ahead, beside a correct one: it leases and rescues nothing (every live
/// lease of the other would look expired to it), `/readyz` and its log say why, and
/// `/metrics` shows the offset; the other node delivers everything, each delivery once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_hours_ahead_leases_and_rescues_nothing_and_says_why() {
    let Some(t) = TestLedger::postgres().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(200)));
    let rx = Receiver::start(rule).await;
    let (a, b, total) = two_nodes(&t, &rx, "").await;
    let Some(ahead) = skewed(&a, "+2h") else {
        return;
    };
    let node_a = Daemon::start(ahead);
    let node_b = Daemon::start(command(&b, &["run"]));
    let all = distinct_reached(&rx, total, Duration::from_secs(120)).await;
    let ready = get(&node_a.addr, "/readyz").await;
    let metrics = get(&node_a.addr, "/metrics").await.1;
    let (_, log_a) = node_a.stop();
    let (_, log_b) = node_b.stop();
    assert!(
        all,
        "{} of {total}\nA:\n{log_a}\nB:\n{log_b}",
        delivered(&rx).len()
    );
    let twice: Vec<_> = arrivals(&rx).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(
        twice.is_empty(),
        "delivered more than once: {twice:?}\nA:\n{log_a}"
    );
    assert_eq!(ready.0, 503, "{}", ready.1);
    assert!(
        ready
            .1
            .contains("s off the ledger's, more than pool.max_clock_offset (30s)"),
        "{}",
        ready.1
    );
    let offset = gauge(&metrics, "dawnpost_clock_offset_seconds").expect("the offset gauge");
    assert!((offset - 7200.0).abs() < 5.0, "offset {offset}");
    assert!(
        log_a.contains("leases and rescues nothing until its clock is fixed"),
        "{log_a}"
    );
    assert!(!log_a.contains("sent delivery"), "A sent nothing:\n{log_a}");
    for l in [&log_a, &log_b] {
        assert!(
            !l.contains("rescued expired leases"),
            "no lease was rescued:\n{l}"
        );
    }
    t.cleanup().await;
}

/// A node two hours ahead whose bound allows it works beside a correct one on the ledger's
/// time: no live lease of the other is rescued (each delivery arrives once), both nodes send,
/// and every signature's timestamp is the real time, not its clock's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_ahead_within_its_bound_keeps_the_ledgers_time() {
    let Some(t) = TestLedger::postgres().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(200)));
    let rx = Receiver::start(rule).await;
    let (a, b, total) = two_nodes(&t, &rx, "max_clock_offset = \"3h\"").await;
    let Some(ahead) = skewed(&a, "+2h") else {
        return;
    };
    let node_a = Daemon::start(ahead);
    let node_b = Daemon::start(command(&b, &["run"]));
    let all = distinct_reached(&rx, total, Duration::from_secs(120)).await;
    let (_, log_a) = node_a.stop();
    let (_, log_b) = node_b.stop();
    assert!(
        all,
        "{} of {total}\nA:\n{log_a}\nB:\n{log_b}",
        delivered(&rx).len()
    );
    let twice: Vec<_> = arrivals(&rx).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(
        twice.is_empty(),
        "delivered more than once: {twice:?}\nA:\n{log_a}\nB:\n{log_b}"
    );
    for l in [&log_a, &log_b] {
        assert!(l.contains("sent delivery"), "both nodes send:\n{l}");
        assert!(
            !l.contains("rescued expired leases"),
            "no live lease rescued:\n{l}"
        );
    }
    assert!(
        log_a.contains("this node's clock is off the ledger's"),
        "A warns:\n{log_a}"
    );
    let now = chrono::Utc::now().timestamp();
    for h in rx.hits() {
        let ts: i64 = h
            .header("webhook-timestamp")
            .and_then(|v| v.parse().ok())
            .expect("ts");
        assert!((now - ts).abs() < 120, "signed {ts}, the time is {now}");
    }
    t.cleanup().await;
}

/// A node whose wall clock steps back two hours mid-run (its bound allows it): the retries it
/// scheduled before the step are made when due, not two hours later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_stepped_back_stalls_nothing() {
    let Some(t) = TestLedger::postgres().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    // Each delivery's first attempt fails (a webhook's first request for each of the dates);
    // its retry is due up to 3 s later.
    let rule: HttpRule =
        Arc::new(|_: &str, nth, _| (if nth <= DATES { 503 } else { 204 }, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let (a, _, total) = two_nodes(&t, &rx, "max_clock_offset = \"3h\"").await;
    a.write(
        "config/dawnpost.toml",
        &std::fs::read_to_string(a.root().join("config/dawnpost.toml"))
            .expect("config")
            .replace(
                "base = \"100ms\"\ncap = \"500ms\"",
                "base = \"3s\"\ncap = \"3s\"",
            ),
    );
    let clock_file = a.root().join("faketime");
    std::fs::write(&clock_file, "+0\n").expect("clock");
    let Some(stepping) = skewed(&a, &format!("@{}", clock_file.display())) else {
        return;
    };
    let node_a = Daemon::start(stepping);
    // Every delivery failed once, so each has a retry scheduled.
    rx.wait_for(total, Duration::from_secs(60)).await;
    std::fs::write(&clock_file, "-2h\n").expect("step back");
    let all = distinct_reached_twice(&rx, total, Duration::from_secs(60)).await;
    // The timekeeper's next reading (within 10 s) sees the step.
    let until = Instant::now() + Duration::from_secs(30);
    let offset = loop {
        let metrics = get(&node_a.addr, "/metrics").await.1;
        let offset = gauge(&metrics, "dawnpost_clock_offset_seconds").expect("the offset gauge");
        if offset < -7000.0 || Instant::now() >= until {
            break offset;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (_, log_a) = node_a.stop();
    assert!(all, "every retry made after the step:\n{log_a}");
    assert!(
        offset < -7000.0,
        "the step shows in the offset: {offset}\n{log_a}"
    );
    t.cleanup().await;
}

/// Waits until every one of `n` deliveries arrived twice (a failed attempt and its retry).
async fn distinct_reached_twice(rx: &Receiver, n: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        let seen = rx.hits().len();
        let done = arrivals(rx).values().filter(|c| **c >= 2).count();
        if done >= n {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || !rx.reached(seen + 1, left).await {
            return arrivals(rx).values().filter(|c| **c >= 2).count() >= n;
        }
    }
}
