//! `cargo bench --bench scale [-- --reports N] [--backend sqlite|postgres] [--layout
//! family|reports]`: what a large configuration (default 10,000 reports, each daily in one of
//! five timezones, one webhook) costs a start, a tick and a command. The reports are the rows
//! of one `[[family]]` over a CSV file (`--layout family`, the default) or as many `[[report]]`
//! tables (`--layout reports`). Prints one JSON line per backend (PostgreSQL when
//! DAWNPOST_TEST_POSTGRES_URL is set):
//!
//! - `load_ms`: `Config::load` of the whole configuration (the best of three); `check_ms`: the
//!   release binary's `check` (which renders a family's first rows only), output discarded;
//! - `tick_first_ms`: the first tick ever, which enqueues every report (all fired in the last
//!   24 hours); `tick_ms`: a tick a minute later (the few reports due in that minute,
//!   `tick_inserted`, and every report's tick recorded);
//! - `jobs_ms`, `show_ms`, `dlq_ms`: the release binary's `jobs --limit 1`, `show KEY` and
//!   `dlq` against that ledger, wall time from spawn to exit (the best of three);
//! - `daemon_start_ms`: `dawnpost run` from spawn to "dawnpost running"; `daemon_rss_mb` its
//!   RSS then; `daemon_peak_rss_mb` its peak after enqueueing and delivering every report's job
//!   (`jobs_done`) into a local HTTP sink, and its RSS then split into `daemon_end_rss_anon_mb`
//!   (heap, stacks) and `daemon_end_rss_file_mb` (mapped files: the binary, SQLite's mapped
//!   ledger).

#[allow(dead_code)]
#[path = "support/sinks.rs"]
mod sinks;

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dawnpost::ledger::Ledger;
use dawnpost::services::tick::SchedulerTick;
use dawnpost::{Config, ManualClock, Span};

const TIMEZONES: [&str; 5] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kolkata",
    "UTC",
];

fn main() {
    let reports: usize = sinks::arg("--reports")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let only = sinks::arg("--backend");
    let wanted = |b: &str| only.as_deref().is_none_or(|o| o == b);
    sinks::runtime().block_on(async move {
        let (http, seen) = sinks::http_sink().await;
        seen.count_only();
        if wanted("sqlite") {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut ledgers = Vec::new();
            for name in ["ticks", "daemon"] {
                let url = format!(
                    "sqlite://{}",
                    dir.path().join(format!("{name}.db")).display()
                );
                let ledger = Ledger::connect(&url, dir.path()).await.expect("sqlite");
                ledgers.push((ledger, url));
            }
            let line = measure("sqlite", dir.path(), reports, http, &ledgers).await;
            println!("{line}");
            for (l, _) in ledgers {
                l.close().await;
            }
        }
        if let Ok(base) = std::env::var("DAWNPOST_TEST_POSTGRES_URL")
            && wanted("postgres")
        {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut ledgers = Vec::new();
            for name in ["ticks", "daemon"] {
                let schema = format!("dp_scale_{name}_{}", std::process::id());
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
                let ledger = Ledger::connect_postgres_schema(&base, &schema)
                    .await
                    .expect("postgres");
                ledgers.push((ledger, url));
            }
            let line = measure("postgres", dir.path(), reports, http, &ledgers).await;
            println!("{line}");
            for (i, (l, _)) in ledgers.into_iter().enumerate() {
                let name = ["ticks", "daemon"][i];
                let _ = l
                    .drop_postgres_schema(&format!("dp_scale_{name}_{}", std::process::id()))
                    .await;
                l.close().await;
            }
        }
    });
}

/// The measurements on one backend, with two empty ledgers (the ticks' and the commands',
/// then the daemon's), each with the URL the binary is given (a schema's search path on
/// PostgreSQL).
async fn measure(
    backend: &str,
    dir: &Path,
    reports: usize,
    http: std::net::SocketAddr,
    ledgers: &[(Ledger, String)],
) -> serde_json::Value {
    let [(ledger, url), (daemon_ledger, daemon_url)] = ledgers else {
        panic!("two ledgers");
    };
    write_project(dir, reports, http);
    let config_dir = dir.join("config");
    let load_ms = best_of(3, || {
        let started = Instant::now();
        Config::load(&config_dir, &dawnpost::delivery::readers()).unwrap_or_else(|e| panic!("{e}"));
        started.elapsed()
    });
    let config =
        Config::load(&config_dir, &dawnpost::delivery::readers()).unwrap_or_else(|e| panic!("{e}"));

    // Ticks on a ledger of their own: the daemon below starts on an empty one.
    let clock = ManualClock::new(chrono::Utc::now());
    let tick = SchedulerTick::new(
        ledger.clone(),
        dawnpost::report::catalog::Catalog::of_reports(config.reports.clone()),
        Arc::new(clock.clone()),
        Span::from_secs(24 * 3600),
    );
    let started = Instant::now();
    let first = tick.run_once().await.expect("tick");
    let tick_first_ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(
        first.inserted, reports,
        "every report fired in the last day"
    );
    clock.advance(chrono::Duration::minutes(1));
    let started = Instant::now();
    let quiet = tick.run_once().await.expect("tick");
    let tick_ms = started.elapsed().as_secs_f64() * 1e3;

    let key = format!("r0:{}", first_key_date(ledger).await);
    let command = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let dir = config_dir.clone();
        move || {
            let started = Instant::now();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
                .arg("--config")
                .arg(&dir)
                .args(&args)
                .env("DAWNPOST_DATABASE_URL", url)
                .stderr(std::process::Stdio::null())
                .output()
                .expect("run dawnpost");
            assert!(out.status.success(), "{args:?}: {out:?}");
            started.elapsed()
        }
    };
    let check_ms = best_of(3, command(&["check"]));
    let jobs_ms = best_of(3, command(&["jobs", "--limit", "1"]));
    let show_ms = best_of(3, command(&["show", &key]));
    let dlq_ms = best_of(3, command(&["dlq"]));
    let daemon = run_daemon(&config_dir, daemon_url, daemon_ledger, reports).await;
    serde_json::json!({
        "backend": backend,
        "reports": reports,
        "layout": if family_layout() { "family" } else { "reports" },
        "load_ms": round1(load_ms),
        "check_ms": round1(check_ms),
        "tick_first_ms": round1(tick_first_ms),
        "tick_ms": round1(tick_ms),
        "tick_inserted": quiet.inserted,
        "jobs_ms": round1(jobs_ms),
        "show_ms": round1(show_ms),
        "dlq_ms": round1(dlq_ms),
        "daemon_start_ms": round1(daemon.start_ms),
        "daemon_rss_mb": round1(daemon.rss_mb),
        "daemon_peak_rss_mb": round1(daemon.peak_rss_mb),
        "daemon_end_rss_anon_mb": round1(daemon.end_anon_mb),
        "daemon_end_rss_file_mb": round1(daemon.end_file_mb),
        "jobs_done": daemon.done,
    })
}

struct Daemon {
    start_ms: f64,
    rss_mb: f64,
    peak_rss_mb: f64,
    /// Its resident memory once every job is done, split: the heap and stacks (`RssAnon`) and
    /// mapped files (`RssFile`: the binary, and SQLite's memory-mapped ledger).
    end_anon_mb: f64,
    end_file_mb: f64,
    done: usize,
}

/// Starts the daemon on an empty ledger; it enqueues every report at its first tick and
/// delivers them all. Measured from outside, through /proc.
async fn run_daemon(config_dir: &Path, url: &str, ledger: &Ledger, reports: usize) -> Daemon {
    let started = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(config_dir)
        .arg("run")
        .env("DAWNPOST_DATABASE_URL", url)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the daemon");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("dawnpost running") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the daemon starts");
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss_mb = proc_status_mb(child.id(), "VmRSS:");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut done = 0;
    while Instant::now() < deadline {
        done = sinks::finished(ledger).await;
        if done >= reports {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let peak_rss_mb = proc_status_mb(child.id(), "VmHWM:");
    let end_anon_mb = proc_status_mb(child.id(), "RssAnon:");
    let end_file_mb = proc_status_mb(child.id(), "RssFile:");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    Daemon {
        start_ms,
        rss_mb,
        peak_rss_mb,
        end_anon_mb,
        end_file_mb,
        done,
    }
}

async fn first_key_date(ledger: &Ledger) -> String {
    let filter = dawnpost::ledger::JobFilter {
        report: Some("r0".into()),
        ..Default::default()
    };
    let jobs = ledger.jobs().list(&filter).await.expect("jobs");
    jobs.first()
        .map(|j| j.key.date().format("%Y-%m-%d").to_string())
        .expect("r0 has a job")
}

fn proc_status_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// `--layout family` (the default) or `--layout reports`.
fn family_layout() -> bool {
    sinks::arg("--layout").is_none_or(|l| l != "reports")
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> f64 {
    (0..n)
        .map(|_| f().as_secs_f64() * 1e3)
        .fold(f64::INFINITY, f64::min)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// `reports` daily reports spread over the day and five timezones, one webhook each on the
/// sink, the shipped template and one sample file.
fn write_project(dir: &Path, reports: usize, http: std::net::SocketAddr) {
    sinks::template_and_sample(dir);
    if family_layout() {
        let mut csv = String::from("id,minute,hour,timezone\n");
        for r in 0..reports {
            let tz = TIMEZONES[r % TIMEZONES.len()];
            csv.push_str(&format!("{r},{},{},{tz}\n", r % 60, (r / 60) % 24));
        }
        std::fs::write(dir.join("config/rows.csv"), csv).expect("write");
        let family = format!(
            "[[family]]\nid = \"r{{{{row.id}}}}\"\nrows = {{ kind = \"csv\", path = \"config/rows.csv\" }}\ntitle = \"Report {{{{row.id}}}}\"\nschedule = \"0 {{{{row.minute}}}} {{{{row.hour}}}} * * *\"\ntimezone = \"{{{{row.timezone}}}}\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"config/sample/data.json\" }}\n[[family.webhook]]\nurl = \"http://{http}/r{{{{row.id}}}}\"\n"
        );
        std::fs::write(dir.join("config/reports.toml"), family).expect("write");
        write_settings(dir);
        return;
    }
    let mut toml = String::new();
    for r in 0..reports {
        toml.push_str(&format!(
            "[[report]]\nid = \"r{r}\"\ntitle = \"Report {r}\"\nschedule = \"0 {} {} * * *\"\ntimezone = \"{}\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"config/sample/data.json\" }}\n[[report.webhook]]\nurl = \"http://{http}/r{r}\"\n",
            r % 60,
            (r / 60) % 24,
            TIMEZONES[r % TIMEZONES.len()],
        ));
    }
    std::fs::write(dir.join("config/reports.toml"), toml).expect("write");
    write_settings(dir);
}

fn write_settings(dir: &Path) {
    std::fs::write(
        dir.join("config/dawnpost.toml"),
        "[pool]\nconcurrency = 16\nadmission_per_second = 100000\n[server]\nbind = \"127.0.0.1:0\"\n",
    )
    .expect("write");
}
