//! `cargo bench --bench workers [-- --reports N --destinations K --processes P --history]`: scale-out on one PostgreSQL
//! database. For 1, 2 and 3 `dawnpost run` processes (or P only) sharing one artifact folder, enqueue N jobs
//! with K webhook destinations each, time the drain, and count the duplicate deliveries the sink
//! saw (must be 0: nothing crashes here). Each line adds what the server did for it, enqueue
//! and drain together (`pg_stat_database.xact_commit` and `pg_current_wal_lsn()` before and
//! after, every process gone first, the bench's own reads taken off): `commits_per_delivery`
//! and `wal_bytes_per_delivery`. Before that the same nodes are started on the empty queue and
//! stopped once registered: what a node's start and stop cost whatever it delivers
//! (`start_stop_*_per_process`). Net of it, `commits_per_delivery_net` and
//! `wal_bytes_per_delivery_net` are what more nodes must not make worse. Registered, the nodes
//! sit on the empty queue for ten seconds first, after eleven to settle (a PostgreSQL backend
//! reports its commits up to ten seconds late, so the start's would fall in the window):
//! `idle_commits_per_s_per_process` is what an idle node costs the server. Needs
//! DAWNPOST_TEST_POSTGRES_URL. `--history`: each run's ledger first holds as many finished jobs
//! of the same reports on earlier dates (drained by one node, not measured), so the measured
//! run's rows go among older keys, as in a ledger in service.

#[allow(dead_code)]
#[path = "support/sinks.rs"]
mod sinks;

use std::process::Stdio;
use std::time::{Duration, Instant};

use dawnpost::Config;
use dawnpost::ledger::Ledger;

#[derive(serde::Serialize)]
struct Line {
    backend: &'static str,
    processes: usize,
    reports: usize,
    /// Finished jobs the ledger held before the measured ones (`--history`).
    earlier_jobs: usize,
    deliveries: i64,
    drain_s: f64,
    deliveries_per_s: f64,
    deliveries_per_s_per_process: f64,
    commits_per_delivery: Option<f64>,
    wal_bytes_per_delivery: Option<f64>,
    /// What one node's start and stop cost, measured apart on the empty queue.
    start_stop_commits_per_process: Option<f64>,
    start_stop_wal_bytes_per_process: Option<f64>,
    /// Per delivery without what the nodes' starts and stops cost: what more nodes must not
    /// make worse.
    commits_per_delivery_net: Option<f64>,
    wal_bytes_per_delivery_net: Option<f64>,
    /// The drain's commits in all, net of the starts and stops (the per-delivery figure's
    /// thousandths hide differences of a few dozen commits).
    commits_net: Option<i64>,
    /// What a registered node costs the server while the queue is empty: commits a second
    /// (its empty claims, heartbeat, runbook and clock reads), over [`IDLE_SPAN`].
    idle_commits_per_s_per_process: Option<f64>,
    duplicates: u64,
}

/// Starts `processes` `dawnpost run` nodes on the bench's project.
fn start_nodes(config: &std::path::Path, processes: usize) -> Vec<tokio::process::Child> {
    (0..processes)
        .map(|_| {
            tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
                .arg("--config")
                .arg(config)
                .arg("run")
                .env_remove("DAWNPOST_DATABASE_URL")
                .env("RUST_LOG", "error")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("start dawnpost run")
        })
        .collect()
}

/// Stops the nodes as an operator does (SIGTERM) and waits for them to leave.
async fn stop_nodes(children: Vec<tokio::process::Child>) {
    for child in &children {
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
    for mut child in children {
        let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    }
}

/// How long the nodes sit on the empty queue while their idle commits are counted.
const IDLE_SPAN: Duration = Duration::from_secs(10);
/// Registered nodes wait this long before [`IDLE_SPAN`] is measured: an idle backend reports
/// the commits it holds within ten seconds (PostgreSQL's `PGSTAT_IDLE_INTERVAL`).
const IDLE_SETTLE: Duration = Duration::from_secs(11);

/// Waits until `processes` nodes have registered; how many reads it took (each a commit).
async fn wait_registered(ledger: &Ledger, processes: usize) -> i64 {
    let since = chrono::Utc::now() - chrono::Duration::minutes(1);
    let mut polls = 0;
    loop {
        polls += 1;
        if ledger.nodes().list(since).await.expect("nodes").len() >= processes {
            return polls;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every delivery in the ledger, whatever its state.
async fn delivery_count(ledger: &Ledger) -> i64 {
    let counts = ledger.deliveries().count_by_state().await.expect("counts");
    counts.iter().map(|(_, n)| n).sum()
}

/// Enqueues `jobs` jobs of the bench's reports a year before the measured ones and has one
/// node drain them: the measured run then inserts among finished work's keys, as every night
/// after the first does, instead of at the end of empty indexes.
async fn drain_history(
    ledger: &Ledger,
    config: &Config,
    config_dir: &std::path::Path,
    jobs: usize,
    seen: &sinks::Seen,
) {
    let now = chrono::Utc::now();
    let first = chrono::NaiveDate::from_ymd_opt(2025, 1, 1).expect("date");
    let earlier = sinks::jobs_from(config, jobs, now, first);
    ledger
        .jobs()
        .insert_many(&earlier, now)
        .await
        .expect("enqueue history");
    let node = start_nodes(config_dir, 1);
    loop {
        let counts = ledger.jobs().count_by_state().await.expect("counts");
        let finished: i64 = counts
            .iter()
            .filter(|(s, _)| s.is_terminal())
            .map(|(_, n)| n)
            .sum();
        if finished as usize >= jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_nodes(node).await;
    seen.reset();
}

fn main() {
    let Ok(url) = std::env::var("DAWNPOST_TEST_POSTGRES_URL") else {
        eprintln!("workers benchmark skipped: set DAWNPOST_TEST_POSTGRES_URL");
        return;
    };
    let (jobs, destinations) = sinks::size();
    sinks::runtime().block_on(async move {
        let (http, seen) = sinks::http_sink().await;
        let (smtp, _) = sinks::smtp_sink().await;
        // Every run's folder is kept to the end: deleting one run's artifacts just before the
        // next would make the next pay for the file system reclaiming them.
        let mut dirs = Vec::new();
        // `--processes N` runs that count only (one figure to profile with pg_stat_statements).
        let counts = match sinks::arg("--processes").and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => n.max(1)..=n.max(1),
            None => 1..=3,
        };
        // `--history`: the ledger first holds as many finished jobs of the same reports on
        // earlier dates, drained by one node and not measured, as a ledger in service does.
        let history = std::env::args().any(|a| a == "--history");
        for processes in counts {
            seen.reset();
            let schema = format!("dp_workers_{}_{processes}", std::process::id());
            let ledger = Ledger::connect_postgres_schema(&url, &schema).await.expect("postgres");
            let dir = tempfile::tempdir().expect("tempdir");
            let sep = if url.contains('?') { '&' } else { '?' };
            let db_url = format!("{url}{sep}options=-c%20search_path%3D{schema}");
            sinks::project(
                dir.path(),
                jobs.clamp(1, 100),
                destinations,
                0,
                http,
                smtp,
                &format!(
                    "[database]\nurl = \"{db_url}\"\n[pool]\nconcurrency = 16\nadmission_per_second = 1000000\nlease = \"30s\"\n[server]\nbind = \"127.0.0.1:0\"\n"
                ),
            );
            let config = Config::load(&dir.path().join("config"), &dawnpost::delivery::readers()).unwrap_or_else(|e| panic!("{e}"));
            let now = chrono::Utc::now();
            let new_jobs = sinks::jobs(&config, jobs, now);
            let (earlier_jobs, earlier_deliveries) = if history {
                drain_history(&ledger, &config, &dir.path().join("config"), jobs, &seen).await;
                (jobs, delivery_count(&ledger).await)
            } else {
                (0, 0)
            };
            // What the nodes cost whatever they deliver: started on the empty queue, stopped
            // once each has registered (its start, its first rounds of every service, its stop).
            sinks::pg_checkpoint(&url).await;
            let idle_before = sinks::pg_mark(&url).await;
            let idle = start_nodes(&dir.path().join("config"), processes);
            let idle_polls = wait_registered(&ledger, processes).await;
            // Then left idle for a while: what they cost the server while nothing is due (a
            // mark is three statements, each a commit).
            tokio::time::sleep(IDLE_SETTLE).await;
            let idle_from = sinks::pg_mark(&url).await;
            tokio::time::sleep(IDLE_SPAN).await;
            let idle_to = sinks::pg_mark(&url).await;
            let idle_cost = (idle_from.zip(idle_to))
                .map(|(a, b)| (b.commits - a.commits - 3, b.wal_bytes - a.wal_bytes));
            stop_nodes(idle).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let idle_after = sinks::pg_mark(&url).await;
            let fixed = idle_before.zip(idle_after).zip(idle_cost).map(|((b, a), i)| {
                // The settle's share, at the window's rate.
                let settle = |n: i64| (n as f64 * IDLE_SETTLE.as_secs_f64() / IDLE_SPAN.as_secs_f64()).round() as i64;
                let commits = a.commits - b.commits - idle_polls - 1 - i.0 - settle(i.0) - 3;
                (commits, a.wal_bytes - b.wal_bytes - i.1 - settle(i.1))
            });

            sinks::pg_checkpoint(&url).await;
            let before = sinks::pg_mark(&url).await;
            ledger.jobs().insert_many(&new_jobs, now).await.expect("enqueue");

            let started = Instant::now();
            let children = start_nodes(&dir.path().join("config"), processes);
            // The bench's own polls are commits too (one each): counted, and taken off.
            let mut polls = 0i64;
            loop {
                polls += 1;
                let counts = ledger.jobs().count_by_state().await.expect("counts");
                let finished: i64 = counts.iter().filter(|(s, _)| s.is_terminal()).map(|(_, n)| n).sum();
                if finished as usize >= jobs + earlier_jobs {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let drain_s = started.elapsed().as_secs_f64();
            stop_nodes(children).await;
            let deliveries = delivery_count(&ledger).await - earlier_deliveries;
            // The processes' connections are closed with them: every backend has reported.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = sinks::pg_mark(&url).await;
            if let Some((b, a)) = before.zip(after) {
                // Where to point `pg_waldump --stats=record --start … --end …`.
                let lsn = |n: i64| format!("{:X}/{:X}", n >> 32, n & 0xFFFF_FFFF);
                eprintln!("# {processes} processes: WAL {} to {}", lsn(b.wal_bytes), lsn(a.wal_bytes));
            }
            let per = |n: i64| n as f64 / deliveries.max(1) as f64;
            let thousandths = |x: f64| (x * 1000.0).round() / 1000.0;
            let server = before.zip(after).map(|(b, a)| (a.commits - b.commits - polls - 1, a.wal_bytes - b.wal_bytes));
            let net = server.zip(fixed).map(|(s, f)| (thousandths(per(s.0 - f.0)), per(s.1 - f.1).round()));
            let rate = deliveries as f64 / drain_s;
            let line = Line {
                backend: "postgres",
                processes,
                reports: jobs,
                earlier_jobs,
                deliveries,
                drain_s: (drain_s * 1000.0).round() / 1000.0,
                deliveries_per_s: rate.round(),
                deliveries_per_s_per_process: (rate / processes as f64).round(),
                commits_per_delivery: server.map(|s| thousandths(per(s.0))),
                wal_bytes_per_delivery: server.map(|s| per(s.1).round()),
                start_stop_commits_per_process: fixed.map(|f| (f.0 as f64 / processes as f64).round()),
                start_stop_wal_bytes_per_process: fixed.map(|f| (f.1 as f64 / processes as f64).round()),
                commits_per_delivery_net: net.map(|n| n.0),
                wal_bytes_per_delivery_net: net.map(|n| n.1),
                commits_net: server.zip(fixed).map(|(s, f)| s.0 - f.0),
                idle_commits_per_s_per_process: idle_cost.map(|i| {
                    let per_s = i.0 as f64 / IDLE_SPAN.as_secs_f64() / processes as f64;
                    (per_s * 10.0).round() / 10.0
                }),
                duplicates: seen.duplicates(),
            };
            println!("{}", serde_json::to_string(&line).expect("json"));
            let _ = ledger.drop_postgres_schema(&schema).await;
            ledger.close().await;
            dirs.push(dir);
        }
    });
}
