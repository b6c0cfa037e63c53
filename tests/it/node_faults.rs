//! Faults of one node beside another on a shared PostgreSQL ledger, with the real binary: a
//! node paused (SIGSTOP) past its leases starts no send on them once it resumes, and a pause
//! mid-transaction holds up the other node's rescue only until the server ends it; a node whose
//! wall clock is off (libfaketime, Debian's `faketime`) keeps the ledger's time — it steals no
//! live lease, signs with the right time, stalls nothing when its clock steps back — and past
//! `pool.max_clock_offset` leases and rescues nothing, saying why.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, get};
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger};
use dawnpost::domain::keys::JobKey;
use dawnpost::ledger::DeliveryState;

const SECRET_ENV: &str = "DAWNPOST_TEST_NODE_FAULTS_SECRET";
const WEBHOOKS: usize = 20;
/// Backfilled fires: Jan 1 of 2024, 2025 and 2026 (none today, so the tick adds nothing).
const DATES: [&str; 3] = ["2024-01-01", "2025-01-01", "2026-01-01"];
const REPORT: &str = "nodes";

/// libfaketime, for a node whose wall clock is off (the monotonic clock left alone, as a real
/// clock step leaves it).
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// A PostgreSQL URL whose connections use the test ledger's schema.
fn schema_url(t: &TestLedger) -> String {
    let base = std::env::var(common::POSTGRES_ENV).expect("url");
    let sep = if base.contains('?') { '&' } else { '?' };
    let schema = t.schema().expect("schema");
    format!("{base}{sep}options=-c%20search_path%3D{schema}")
}

/// Two nodes' projects on one ledger and one artifact folder: one report with [`WEBHOOKS`]
/// signed webhooks, backfilled for [`DATES`]; each node's `[pool]` and `[retry]` as given.
fn two_nodes(t: &TestLedger, rx: &Receiver, a: &str, b: &str) -> (Project, Project) {
    let (a, b) = two_projects(t, rx, a, b);
    backfill(&a, "2024-01-01", "2026-01-02");
    (a, b)
}

/// Two nodes' projects on one ledger and one artifact folder, with nothing enqueued.
fn two_projects(t: &TestLedger, rx: &Receiver, a: &str, b: &str) -> (Project, Project) {
    let (url, shared) = (
        schema_url(t),
        tempfile::tempdir().expect("artifacts").keep(),
    );
    let reports = common::hooked_report(REPORT, &rx.url(""), WEBHOOKS, Some(SECRET_ENV));
    let node = |settings: &str| {
        let p = Project::new(&reports);
        p.write(
            "config/dawnpost.toml",
            &format!(
                "[database]\nurl = \"{url}\"\nmax_connections = 4\n[artifacts]\nurl = \"file://{}\"\n{settings}\n[server]\nbind = \"127.0.0.1:0\"\n",
                shared.display()
            ),
        );
        p
    };
    (node(a), node(b))
}

/// The report's jobs of the fires in `[from, to)`, through `p`'s binary.
fn backfill(p: &Project, from: &str, to: &str) {
    let out = command(p, &["backfill", "--from", from, "--to", to])
        .output()
        .expect("backfill");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `[pool]` and `[retry]` of a node: `pool` lines, a 10 s drain, quick retries.
fn settings(pool: &str) -> String {
    format!("[pool]\n{pool}\ndrain_timeout = \"10s\"\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"")
}

/// The webhooks' signing secret, and node B's in the pause test (so that the receiver tells
/// which node signed a request).
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SECRET_B: &str = "whsec_QmVydGhhIGJlc2lkZSBBbmEgb24gb25lIGxlZGdlcg==";

/// The binary on a node's project, with the webhooks' signing secret.
fn command(p: &Project, args: &[&str]) -> Command {
    let mut c = common::daemon::command(p, args);
    c.env(SECRET_ENV, SECRET);
    c
}

/// Whether `hit` was signed with `secret`.
fn signed_with(hit: &common::peers::Hit, secret: &str) -> bool {
    let secret = dawnpost::delivery::signing::Secret::parse(secret).expect("secret");
    let (Some(id), Some(ts), Some(sig)) = (
        hit.header("webhook-id"),
        hit.header("webhook-timestamp").and_then(|t| t.parse().ok()),
        hit.header("webhook-signature"),
    ) else {
        return false;
    };
    secret.verify(&id, ts, &hit.body, &sig).is_ok()
}

/// `run` with its wall clock set by libfaketime's `FAKETIME` (`"+2h"`), or read from a file a
/// test rewrites (`@file`); `None` where libfaketime is not installed.
fn skewed(p: &Project, faketime: &str) -> Option<Command> {
    if !Path::new(FAKETIME_LIB).exists() {
        common::skip(&format!(
            "{FAKETIME_LIB} is missing (Debian's faketime package)"
        ));
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

/// The value of an unlabelled gauge in `/metrics`.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The deliveries leased by the process `pid` that the receiver has not seen.
async fn unsent_leases_of(t: &TestLedger, pid: u32, seen: &BTreeSet<String>) -> Vec<String> {
    let keys: Vec<JobKey> = DATES
        .iter()
        .map(|d| common::jk(&format!("{REPORT}:{d}")))
        .collect();
    let owner = format!(":{pid}");
    t.ledger
        .deliveries()
        .list_many(&keys.iter().collect::<Vec<_>>())
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

/// Node A leases slowly (2 a second, so it always holds leases it waits to admit), is stopped
/// with SIGSTOP for far longer than its 2 s lease, and node B rescues and delivers everything.
/// Once A resumes, it sends nothing: every send it still meant to start is on a lease it no
/// longer holds, and it says so. If A was paused inside a transaction (an outcome write), the
/// rows it locked are rescued once the server ends that idle transaction: B still delivers
/// everything, well within the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_starts_no_send_on_the_leases_it_lost() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let slow = settings("concurrency = 8\nlease = \"2s\"\nadmission_per_second = 2");
    let fast = settings("concurrency = 8\nlease = \"2s\"\nadmission_per_second = 100");
    let (a, b) = two_nodes(&t, &rx, &slow, &fast);
    let total = WEBHOOKS * DATES.len();

    let node_a = Daemon::start(command(&a, &["run"]));
    rx.wait_for(4, Duration::from_secs(60)).await;
    // Stopped where it holds a lease whose send has not reached the receiver: A leases two at
    // a time and waits a second to admit them, so nearly always at once.
    let mut tries = 0;
    let held = loop {
        node_a.signal("STOP");
        let held = unsent_leases_of(&t, node_a.pid(), &rx.delivered()).await;
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
    let mut b_command = command(&b, &["run"]);
    b_command.env(SECRET_ENV, SECRET_B);
    let node_b = Daemon::start(b_command);
    let all = rx.keys_reached(total, 1, Duration::from_secs(120)).await;
    let resumed = Instant::now();
    node_a.signal("CONT");
    // SIGTERM at once: A drains what it resumed with (its sends end or are cut within
    // `drain_timeout`) before it exits.
    let (code_a, log_a) = node_a.stop();
    let (code_b, log_b) = node_b.stop();
    assert!(
        all,
        "{} of {total} delivered\nA:\n{log_a}\nB:\n{log_b}",
        rx.delivered().len()
    );
    assert_eq!(
        (code_a, code_b),
        (Some(0), Some(0)),
        "A:\n{log_a}\nB:\n{log_b}"
    );
    // What A sent (signed with its secret) after it resumed. B may still resend a key whose
    // outcome it could not record in time (A's paused transaction held the row): that is B's
    // at-least-once delivery, with the same key, not A's lost lease.
    let late: Vec<String> = rx
        .hits()
        .iter()
        .filter(|h| h.at >= resumed && signed_with(h, SECRET))
        .filter_map(|h| h.header("webhook-id"))
        .collect();
    let by_b = rx
        .hits()
        .iter()
        .filter(|h| signed_with(h, SECRET_B))
        .count();
    assert!(by_b > 0, "B delivered what A could not");
    assert!(
        late.is_empty(),
        "sent after A resumed: {late:?}\nA:\n{log_a}"
    );
    // Dropped by the check before the transport call, or (a send already spawned whose
    // extender woke first) by the extender finding the lease rescued: either way unsent.
    let dropped = log_a
        .lines()
        .filter(|l| {
            l.contains("not sent: the lease ran out before the send started")
                || l.contains("lease lost to the rescuer: dropping this work item")
        })
        .count();
    assert!(
        dropped >= 1,
        "A held {held:?} unsent when it was stopped, and says what it did with them:\n{log_a}"
    );
    t.cleanup().await;
}

/// What two nodes did: node A two hours ahead (`a_pool` may raise its bound), node B on
/// time, a 3 s lease, a receiver that takes 200 ms a request.
struct Beside {
    rx: Receiver,
    all: bool,
    total: usize,
    /// A's `/readyz` and `/metrics` once the work was done.
    ready: (u16, String),
    metrics: String,
    log_a: String,
    log_b: String,
}

async fn two_hours_ahead_beside_another(t: &TestLedger, a_pool: &str) -> Option<Beside> {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(500)));
    let rx = Receiver::start(rule).await;
    let pool = "concurrency = 4\nlease = \"3s\"";
    let (a, b) = two_projects(
        t,
        &rx,
        &settings(&format!("{pool}\n{a_pool}")),
        &settings(pool),
    );
    let total = WEBHOOKS * DATES.len();
    // B renders the first date and holds its sends' leases (20 sends of half a second, four
    // at a time) while A, started then, takes the other dates: each node's leases are live
    // while the other's rescuer looks.
    let skewed_a = skewed(&a, "+2h")?;
    backfill(&b, "2024-01-01", "2024-01-02");
    let node_b = Daemon::start(command(&b, &["run"]));
    rx.wait_for(1, Duration::from_secs(60)).await;
    backfill(&a, "2025-01-01", "2026-01-02");
    let node_a = Daemon::start(skewed_a);
    let all = rx.keys_reached(total, 1, Duration::from_secs(120)).await;
    let ready = get(&node_a.addr, "/readyz").await;
    let metrics = get(&node_a.addr, "/metrics").await.1;
    let (_, log_a) = node_a.stop();
    let (_, log_b) = node_b.stop();
    Some(Beside {
        rx,
        all,
        total,
        ready,
        metrics,
        log_a,
        log_b,
    })
}

impl Beside {
    /// Everything delivered, each delivery once (no live lease rescued and sent again), and no
    /// node rescued anything.
    fn delivered_once(&self) {
        let (log_a, log_b) = (&self.log_a, &self.log_b);
        let got = self.rx.delivered().len();
        assert!(
            self.all,
            "{got} of {}\nA:\n{log_a}\nB:\n{log_b}",
            self.total
        );
        let twice: Vec<_> = self
            .rx
            .arrivals()
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect();
        assert!(
            twice.is_empty(),
            "delivered more than once: {twice:?}\nA:\n{log_a}\nB:\n{log_b}"
        );
        for l in [log_a, log_b] {
            assert!(
                !l.contains("rescued expired leases"),
                "no lease was rescued:\n{l}"
            );
        }
    }
}

/// A node two hours ahead, beside a correct one: it leases and rescues nothing (every live
/// lease of the other would look expired to it), `/readyz` and its log say why, and
/// `/metrics` shows the offset; the other node delivers everything, each delivery once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_hours_ahead_leases_and_rescues_nothing_and_says_why() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let Some(run) = two_hours_ahead_beside_another(&t, "").await else {
        return;
    };
    run.delivered_once();
    let (status, why) = &run.ready;
    assert_eq!(*status, 503, "{why}");
    assert!(
        why.contains("s off the ledger's, more than pool.max_clock_offset (30s)"),
        "{why}"
    );
    let offset = gauge(&run.metrics, "dawnpost_clock_offset_seconds").expect("the offset");
    assert!((offset - 7200.0).abs() < 5.0, "offset {offset}");
    let log_a = &run.log_a;
    assert!(
        log_a.contains("leases and rescues nothing until its clock is fixed"),
        "{log_a}"
    );
    assert!(!log_a.contains("sent delivery"), "A sent nothing:\n{log_a}");
    t.cleanup().await;
}

/// A node two hours ahead whose bound allows it works beside a correct one on the ledger's
/// time: no live lease of the other is rescued (each delivery arrives once), both nodes send,
/// and every signature's timestamp is the real time, not its clock's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_ahead_within_its_bound_keeps_the_ledgers_time() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let Some(run) = two_hours_ahead_beside_another(&t, "max_clock_offset = \"3h\"").await else {
        return;
    };
    run.delivered_once();
    assert_eq!(run.ready.0, 200, "{}", run.ready.1);
    for l in [&run.log_a, &run.log_b] {
        assert!(l.contains("sent delivery"), "both nodes send:\n{l}");
    }
    assert!(
        run.log_a.contains("this node's clock is off the ledger's"),
        "{}",
        run.log_a
    );
    let now = chrono::Utc::now().timestamp();
    for h in run.rx.hits() {
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
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    // Each delivery's first attempt fails (a webhook's first request for each of the dates);
    // its retry is due up to 3 s later.
    let rule: HttpRule = Arc::new(|_: &str, nth, _| {
        (
            if nth <= DATES.len() { 503 } else { 204 },
            None,
            Duration::ZERO,
        )
    });
    let rx = Receiver::start(rule).await;
    let a_settings = "[pool]\nconcurrency = 4\nlease = \"3s\"\nmax_clock_offset = \"3h\"\n[retry]\nbase = \"3s\"\ncap = \"3s\"";
    let (a, _) = two_nodes(&t, &rx, a_settings, &settings(""));
    let total = WEBHOOKS * DATES.len();
    let clock_file = a.root().join("faketime");
    std::fs::write(&clock_file, "+0\n").expect("clock");
    let Some(stepping) = skewed(&a, &format!("@{}", clock_file.display())) else {
        return;
    };
    let node_a = Daemon::start(stepping);
    // Every delivery failed once, so each has a retry scheduled.
    rx.wait_for(total, Duration::from_secs(60)).await;
    std::fs::write(&clock_file, "-2h\n").expect("step back");
    let all = rx.keys_reached(total, 2, Duration::from_secs(60)).await;
    // The timekeeper's next reading (within 10 s) sees the step.
    let until = Instant::now() + Duration::from_secs(30);
    let offset = loop {
        let metrics = get(&node_a.addr, "/metrics").await.1;
        let offset = gauge(&metrics, "dawnpost_clock_offset_seconds").expect("the offset");
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
