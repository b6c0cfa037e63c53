//! Faults of one node beside another on a shared PostgreSQL ledger, with the real binary: a
//! node paused (SIGSTOP) past its leases starts no send on them once it resumes, and a pause
//! mid-transaction holds up the other node's rescue only until the server ends it.

mod common;

use std::collections::BTreeSet;
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
