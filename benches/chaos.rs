//! `cargo bench --bench chaos -- [--kills 20] [--deliveries 3000] [--backend sqlite|postgres]
//! [--seed 1] [--reply-ms 20]`: the release daemon (150 leases a second, so the run spans the
//! kills) against an SMTP sink and a webhook sink, SIGKILLed 0.3-3 s after each start (seeded) and restarted until every job is finished; the last run logs into a pipe
//! whose reader is gone and is stopped with SIGTERM; then `sweep --as-of` a year later. Prints
//! one JSON line per backend: kills, deliveries, lost, duplicates (and those without the same
//! key), artifacts per job, orphan files after the sweep, final states, seconds.
//!
//! Targets: lost 0; duplicates only for sends in flight at a kill, each with the same key;
//! exactly 1 artifact per job; 0 orphans; the last daemon exits 0 within `drain_timeout` + 5 s
//! of SIGTERM.
//!
//! `cargo bench --bench chaos -- --suite`: the chaos and pressure scenarios of the public
//! PostgreSQL job-queue benchmark against two nodes on one PostgreSQL ([`suite_main`]).

#[path = "support/faults.rs"]
mod faults;
#[path = "support/rig.rs"]
mod rig;
#[allow(dead_code)]
#[path = "support/sinks.rs"]
mod sinks;
#[path = "support/suite.rs"]
mod suite;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use dawnpost::Config;
use dawnpost::ledger::Ledger;
use rand::{RngExt, SeedableRng};

/// Destinations per job: two webhooks and one email.
const WEBHOOKS: usize = 2;
const EMAILS: usize = 1;
const DRAIN_TIMEOUT_S: u64 = 2;

#[derive(serde::Serialize)]
struct Line {
    backend: &'static str,
    seed: u64,
    kills: usize,
    jobs: usize,
    deliveries: usize,
    lost: usize,
    /// Sends a kill cut mid-flight: `unknown` attempts the rescuer recorded.
    sends_cut_by_kills: i64,
    duplicates: u64,
    duplicates_without_same_key: usize,
    artifacts_per_job: (usize, usize),
    orphan_files_after_sweep: usize,
    final_states: BTreeMap<String, i64>,
    last_exit_code: Option<i32>,
    last_stop_s: f64,
    seconds: f64,
}

fn settings(db_url: &str) -> String {
    format!(
        "[database]\nurl = \"{db_url}\"\n[pool]\nconcurrency = 16\nadmission_per_second = 150\nlease = \"3s\"\ndrain_timeout = \"{DRAIN_TIMEOUT_S}s\"\n[retry]\nbase = \"200ms\"\ncap = \"1s\"\nmax_attempts = 50\n[server]\nbind = \"127.0.0.1:0\"\n"
    )
}

fn daemon(dir: &Path, stderr: Stdio) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(dir.join("config"))
        .arg("run")
        .env_remove("DAWNPOST_DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("start dawnpost run")
}

/// A pipe whose reader has exited: every log write fails with EPIPE.
fn broken_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

async fn finished(ledger: &Ledger) -> (i64, BTreeMap<String, i64>) {
    let counts = ledger.jobs().count_by_state().await.expect("counts");
    let done = counts
        .iter()
        .filter(|(s, _)| s.is_terminal())
        .map(|(_, n)| n)
        .sum();
    let states = counts
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect();
    (done, states)
}

/// Every file under the artifact folder, staging files included.
fn files_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() { files_under(&p) } else { 1 }
        })
        .sum()
}

/// `.html` files per job folder (`<report>/<date>/`): one per artifact.
fn artifacts_per_job(root: &Path) -> (usize, usize) {
    let mut counts = Vec::new();
    for report in std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        for date in std::fs::read_dir(report.path())
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let html = std::fs::read_dir(date.path())
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter(|f| f.file_name().to_string_lossy().ends_with(".html"))
                .count();
            counts.push(html);
        }
    }
    (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    )
}

async fn run(
    backend: &'static str,
    pg_url: Option<&str>,
    kills: usize,
    deliveries: usize,
    seed: u64,
) -> Line {
    let jobs = deliveries.div_ceil(WEBHOOKS + EMAILS).max(1);
    let (http, web_seen) = sinks::http_sink().await;
    let (smtp, mail_seen) = sinks::smtp_sink().await;
    web_seen.keep_destinations();
    mail_seen.keep_destinations();
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = format!("dp_chaos_{}", std::process::id());
    let (ledger, db_url) = match pg_url {
        Some(url) => {
            let ledger = Ledger::connect_postgres_schema(url, &schema)
                .await
                .expect("postgres");
            let sep = if url.contains('?') { '&' } else { '?' };
            (
                ledger,
                format!("{url}{sep}options=-c%20search_path%3D{schema}"),
            )
        }
        None => {
            let url = format!("sqlite://{}", dir.path().join("var/dawnpost.db").display());
            (
                Ledger::connect(&url, dir.path()).await.expect("sqlite"),
                url,
            )
        }
    };
    sinks::project(
        dir.path(),
        jobs,
        WEBHOOKS,
        EMAILS,
        http,
        smtp,
        &settings(&db_url),
    );
    let config = Config::load(&dir.path().join("config"), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let now = chrono::Utc::now();
    ledger
        .jobs()
        .insert_many(&sinks::jobs(&config, jobs, now), now)
        .await
        .expect("enqueue");
    let expected = jobs * (WEBHOOKS + EMAILS);

    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut done_kills = 0;
    while done_kills < kills {
        let mut child = daemon(dir.path(), Stdio::null());
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..3000))).await;
        let _ = child.start_kill();
        let _ = child.wait().await;
        done_kills += 1;
        if finished(&ledger).await.0 as usize >= jobs {
            break;
        }
    }
    // The last run: its log reader is gone from the start.
    let mut last = daemon(dir.path(), broken_pipe());
    loop {
        if finished(&ledger).await.0 as usize >= jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stop = Instant::now();
    if let Some(pid) = last.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let status = tokio::time::timeout(Duration::from_secs(DRAIN_TIMEOUT_S + 30), last.wait()).await;
    let last_stop_s = stop.elapsed().as_secs_f64();
    let last_exit_code = status.ok().and_then(Result::ok).and_then(|s| s.code());
    let seconds = started.elapsed().as_secs_f64();
    let (_, final_states) = finished(&ledger).await;
    // Read before the sweep, which deletes the attempts.
    let sends_cut_by_kills = ledger
        .deliveries()
        .attempts_by_class()
        .await
        .expect("attempts")
        .into_iter()
        .find(|(class, _)| class == "unknown")
        .map_or(0, |(_, n)| n);

    let artifacts = dir.path().join("var/artifacts");
    let artifacts_per_job = artifacts_per_job(&artifacts);
    let as_of = (chrono::Utc::now() + chrono::Duration::days(365))
        .format("%Y-%m-%d")
        .to_string();
    let swept = tokio::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(dir.path().join("config"))
        .args(["sweep", "--as-of", &as_of])
        .env_remove("DAWNPOST_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .expect("sweep");
    assert!(swept.success(), "sweep failed");
    let orphan_files_after_sweep = files_under(&artifacts);

    let mut received: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for seen in [&web_seen, &mail_seen] {
        for (dest, keys) in seen.by_destination.lock().expect("lock").iter() {
            received
                .entry(dest.clone())
                .or_default()
                .extend(keys.iter().cloned());
        }
    }
    let line = Line {
        backend,
        seed,
        kills: done_kills,
        jobs,
        deliveries: expected,
        lost: expected.saturating_sub(received.len()),
        sends_cut_by_kills,
        duplicates: web_seen.duplicates() + mail_seen.duplicates(),
        duplicates_without_same_key: received
            .values()
            .filter(|keys| keys.iter().any(|k| k != &keys[0]))
            .count(),
        artifacts_per_job,
        orphan_files_after_sweep,
        final_states,
        last_exit_code,
        last_stop_s: (last_stop_s * 100.0).round() / 100.0,
        seconds: (seconds * 10.0).round() / 10.0,
    };
    if pg_url.is_some() {
        let _ = ledger.drop_postgres_schema(&schema).await;
    }
    ledger.close().await;
    line
}

/// `--suite [--scenario NAME] [--rate DELIVERIES_PER_S | --full] [--phase SECONDS]`: the
/// public benchmark's chaos and pressure scenarios ([`suite`]), at a capped rate (150
/// deliveries/s unless `--rate` says) and at full speed unless one is chosen. Needs
/// `DAWNPOST_TEST_POSTGRES_URL`.
fn suite_main() {
    let Ok(url) = std::env::var("DAWNPOST_TEST_POSTGRES_URL") else {
        eprintln!("the chaos suite needs PostgreSQL: set DAWNPOST_TEST_POSTGRES_URL");
        std::process::exit(2);
    };
    let phase_s = sinks::arg("--phase")
        .and_then(|v| v.parse().ok())
        .unwrap_or(15.0);
    let capped = sinks::arg("--rate")
        .and_then(|v| v.parse::<f64>().ok())
        .map(|d| d / rig::PER_JOB as f64);
    let full = std::env::args().any(|a| a == "--full");
    let modes: Vec<suite::Mode> = match (capped, full) {
        (Some(r), false) => vec![suite::Mode {
            rate: Some(r),
            phase_s,
        }],
        (None, true) => vec![suite::Mode {
            rate: None,
            phase_s,
        }],
        (r, _) => vec![
            suite::Mode {
                rate: Some(r.unwrap_or(50.0)),
                phase_s,
            },
            suite::Mode {
                rate: None,
                phase_s,
            },
        ],
    };
    let only = sinks::arg("--scenario");
    let scenarios: Vec<suite::Scenario> = suite::Scenario::ALL
        .into_iter()
        .filter(|s| only.as_deref().is_none_or(|o| o == s.name()))
        .collect();
    if scenarios.is_empty() {
        eprintln!(
            "no scenario named {only:?}; the scenarios: pg_backend_kill, idle_in_tx, active_readers, pool_exhaustion, repeated_kills, sustained_high_load"
        );
        std::process::exit(2);
    }
    sinks::runtime().block_on(async move {
        let mut lines = Vec::new();
        for (m, mode) in modes.iter().enumerate() {
            for scenario in &scenarios {
                let line = suite::run(&url, *scenario, *mode, &format!("m{m}")).await;
                println!("{}", serde_json::to_string(&line).expect("json"));
                lines.push(line);
            }
        }
        println!("\n{}", suite::table(&lines));
        if lines.iter().any(|l| l.verdict != "pass") {
            std::process::exit(1);
        }
    });
}

fn main() {
    if std::env::args().any(|a| a == "--suite") {
        return suite_main();
    }
    let kills = sinks::arg("--kills")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let deliveries = sinks::arg("--deliveries")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed = sinks::arg("--seed")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let pg = std::env::var("DAWNPOST_TEST_POSTGRES_URL").ok();
    let backends: Vec<&'static str> = match sinks::arg("--backend").as_deref() {
        Some("sqlite") => vec!["sqlite"],
        Some("postgres") => vec!["postgres"],
        _ if pg.is_some() => vec!["sqlite", "postgres"],
        _ => vec!["sqlite"],
    };
    sinks::runtime().block_on(async move {
        for backend in backends {
            let url = match backend {
                "postgres" => match pg.as_deref() {
                    Some(u) => Some(u),
                    None => {
                        eprintln!("chaos postgres skipped: set DAWNPOST_TEST_POSTGRES_URL");
                        continue;
                    }
                },
                _ => None,
            };
            let line = run(backend, url, kills, deliveries, seed).await;
            println!("{}", serde_json::to_string(&line).expect("json"));
        }
    });
}
