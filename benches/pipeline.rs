//! `cargo bench --bench pipeline [-- --reports N --destinations K]`: the whole pipeline —
//! enqueue, lease, render, artifact write, delivery, ledger — against local sinks, and the bare
//! baseline (the same number of POSTs from one keep-alive client at the same concurrency).
//! Prints one JSON line per backend: SQLite always, PostgreSQL when DAWNPOST_TEST_POSTGRES_URL
//! is set. Jobs are `reports` report definitions (at most 100) times as many dates as needed.
//! `--enqueue-only` measures the enqueue alone (e.g. `-- --reports 100000 --enqueue-only`);
//! `--backend sqlite|postgres` runs one backend only; `--webhooks-only` makes every destination
//! a webhook (default: one email and the rest webhooks); `--concurrency N` (default 16) the
//! pool's and the baseline's work in flight; `--artifacts URL` another artifact
//! store (e.g. `memory://`, to see the pipeline without the file system's share).
//! `--graphile` runs graphile-worker's POST job first on the same PostgreSQL and sink (as many
//! jobs as deliveries, the same concurrency; `benches/support/graphile.rs`), prints its line
//! (`jobs_per_s`, `cpu_us_per_job`, `commits_per_job`, `wal_bytes_per_job`) and adds
//! `ratio_to_graphile` to PostgreSQL's. PostgreSQL's line adds what the server did: `commits`, `commits_per_delivery`, `wal_bytes`
//! and `wal_bytes_per_delivery` (`pg_stat_database.xact_commit` and `pg_current_wal_lsn()`
//! before and after, enqueue and drain together). `cpu_us_per_delivery` is the whole process's
//! CPU; `pipeline_cpu_us_per_delivery` leaves out the sinks, which run on threads of their own.

#[allow(dead_code)]
#[path = "support/sinks.rs"]
mod sinks;

#[path = "support/graphile.rs"]
mod graphile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dawnpost::ledger::{JobState, Ledger};
use dawnpost::pool::{Pipeline, PoolConfig};
use dawnpost::report::artifact::ArtifactStore;
use dawnpost::{Config, SystemClock};
use tokio_util::sync::CancellationToken;

/// The pool's `concurrency` and the baseline's requests in flight: 16, or `--concurrency N`.
fn concurrency() -> u32 {
    sinks::arg("--concurrency")
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

fn main() {
    // `RUST_LOG=sqlx=debug` shows every statement with its time, for profiling the ledger.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let (jobs, destinations) = sinks::size();
    sinks::runtime().block_on(async move {
        let (http, http_seen) = sinks::http_sink().await;
        let (smtp, smtp_seen) = sinks::smtp_sink().await;
        // Nothing here reports duplicates (the workers bench does): the sinks only count, so
        // their memory does not grow with the number of deliveries.
        http_seen.count_only();
        smtp_seen.count_only();
        let enqueue_only = std::env::args().any(|a| a == "--enqueue-only");
        let baseline =
            if enqueue_only { (0.0, 0.0) } else { baseline(http, jobs * destinations).await };
        http_seen.reset();
        let report_defs = jobs.clamp(1, 100);
        // One email and the rest webhooks, so both sinks are exercised; `--webhooks-only` for
        // the figures of docs/performance.md (10,000 × 3 webhooks).
        let webhooks_only = std::env::args().any(|a| a == "--webhooks-only");
        let (webhooks, emails) = match destinations {
            d if webhooks_only => (d.max(1), 0),
            d if d >= 2 => (d - 1, 1),
            _ => (1, 0),
        };
        // A project folder per backend, all kept until the end: deleting the first backend's
        // artifacts before the second runs would make the second pay for the file system
        // reclaiming them.
        let setup = |dir: &std::path::Path| {
            sinks::project(
                dir,
                report_defs,
                webhooks,
                emails,
                http,
                smtp,
                &format!(
                    "[artifacts]\nurl = \"{}\"\n[pool]\nconcurrency = {}\nadmission_per_second = 1000000\nlease = \"5m\"\n",
                    sinks::arg("--artifacts").unwrap_or_else(|| "file://var/artifacts".into()),
                    concurrency()
                ),
            );
            Config::load(&dir.join("config"), &dawnpost::delivery::readers()).unwrap_or_else(|e| panic!("{e}"))
        };

        let only = sinks::arg("--backend");
        let wanted = |b: &str| only.as_deref().is_none_or(|o| o == b);
        let dir = tempfile::tempdir().expect("tempdir");
        if wanted("sqlite") {
            let config = setup(dir.path());
            let sqlite_url = format!("sqlite://{}", dir.path().join("bench.db").display());
            let ledger = Ledger::connect(&sqlite_url, dir.path()).await.expect("sqlite");
            let artifacts = dir.path().join("var/artifacts");
            let line = run("sqlite", &config, ledger.clone(), jobs, baseline, &artifacts).await;
            println!("{}", serde_json::to_string(&line).expect("json"));
            ledger.close().await;
            http_seen.reset();
            smtp_seen.reset();
        }

        if let Ok(url) = std::env::var("DAWNPOST_TEST_POSTGRES_URL")
            && wanted("postgres")
        {
            // graphile-worker's POST job first, on the same server and sink (`--graphile`).
            let beside = match std::env::args().any(|a| a == "--graphile") {
                true => graphile::run(&url, http, jobs * destinations, concurrency()).await,
                false => None,
            };
            if let Some(g) = &beside {
                println!("{}", serde_json::to_string(g).expect("json"));
            }
            http_seen.reset();
            let pg_dir = tempfile::tempdir().expect("tempdir");
            let config = setup(pg_dir.path());
            let schema = format!("dp_bench_{}", std::process::id());
            let ledger = Ledger::connect_postgres_schema(&url, &schema).await.expect("postgres");
            let artifacts = pg_dir.path().join("var/artifacts");
            sinks::pg_checkpoint(&url).await;
            let before = sinks::pg_mark(&url).await;
            let line = run("postgres", &config, ledger.clone(), jobs, baseline, &artifacts).await;
            // Closed first, so every backend has reported its commits (it does on exit).
            ledger.close().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = sinks::pg_mark(&url).await;
            let mut line = line.with_server_work(before.zip(after));
            if let Some(g) = &beside {
                line.ratio_to_graphile = Some(round3(line.deliveries_per_s / g.jobs_per_s));
            }
            println!("{}", serde_json::to_string(&line).expect("json"));
            let cleanup = Ledger::connect_postgres_schema(&url, &schema).await.expect("postgres");
            let _ = cleanup.drop_postgres_schema(&schema).await;
            cleanup.close().await;
        }
    });
}

/// The same number of POSTs from one keep-alive client at the same concurrency, no queue:
/// POSTs a second and µs of CPU per POST (this process: client and sink).
async fn baseline(http: std::net::SocketAddr, posts: usize) -> (f64, f64) {
    let client = reqwest::Client::new();
    let body = bytes::Bytes::from(vec![b'x'; 6 * 1024]);
    let cpu = sinks::cpu_seconds();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    let mut ok = 0usize;
    for i in 0..posts {
        // At most `concurrency()` in flight, and finished ones collected as we go: memory stays
        // flat however many POSTs.
        if set.len() >= concurrency() as usize
            && let Some(r) = set.join_next().await
        {
            ok += usize::from(r.unwrap_or(false));
        }
        let (client, body) = (client.clone(), body.clone());
        let url = format!("http://{http}/baseline/{}", i % 100);
        set.spawn(async move {
            let resp = client
                .post(url)
                .header("idempotency-key", i.to_string())
                .body(body)
                .send()
                .await;
            resp.map(|r| r.status().is_success()).unwrap_or(false)
        });
    }
    while let Some(r) = set.join_next().await {
        ok += usize::from(r.unwrap_or(false));
    }
    assert_eq!(ok, posts, "the baseline sink answered every POST");
    let rate = posts as f64 / started.elapsed().as_secs_f64();
    let cpu_us = (sinks::cpu_seconds() - cpu) / posts as f64 * 1e6;
    eprintln!("# baseline: {cpu_us:.0} µs of CPU per POST (this process: client and sink)");
    (rate, cpu_us)
}

async fn run(
    backend: &'static str,
    config: &Config,
    ledger: Ledger,
    jobs: usize,
    baseline: (f64, f64),
    artifacts: &std::path::Path,
) -> Line<'static> {
    let now = chrono::Utc::now();
    let new_jobs = sinks::jobs(config, jobs, now);
    let started = Instant::now();
    let inserted = ledger
        .jobs()
        .insert_many(&new_jobs, now)
        .await
        .expect("enqueue");
    let enqueue_s = started.elapsed().as_secs_f64();
    assert_eq!(inserted.len(), jobs);
    // The bench's own copies go before the drain: peak RSS is the pipeline's and the sinks'.
    drop((new_jobs, inserted));
    if std::env::args().any(|a| a == "--enqueue-only") {
        return Line {
            backend,
            reports: jobs,
            enqueue_s: round3(enqueue_s),
            ..Line::default()
        };
    }

    let pool = PoolConfig::from_config(config);
    let pipeline = Arc::new(
        Pipeline::new(
            config,
            ledger.clone(),
            Arc::new(SystemClock),
            pool,
            ArtifactStore::from_settings(&config.settings.artifacts, &config.root)
                .expect("artifacts"),
        )
        .expect("pipeline"),
    );
    let cancel = CancellationToken::new();
    let cpu = sinks::cpu_seconds();
    let sink_cpu = sinks::sink_cpu_seconds();
    let switches = sinks::context_switches();
    let started = Instant::now();
    let worker = tokio::spawn(pipeline.clone().run(cancel.clone()));
    // Wait on the pool's own counters first: counting the jobs table every few milliseconds
    // would load the ledger being measured (a full scan each time, on a table full of dead
    // rows on PostgreSQL). Then confirm in the ledger that every job has finished.
    // Every report of the bench has the same destinations.
    let per_job = config
        .reports
        .first()
        .map_or(0, |r| dawnpost::delivery::of_report(r).len());
    let expected = (jobs * per_job) as u64;
    // Sampled every 10 ms: when the first delivery was sent and when the last job rendered.
    let (mut first_sent, mut all_rendered) = (None, None);
    for tick in 0u64.. {
        let s = pipeline.stats.snapshot();
        if first_sent.is_none() && s.sent > 0 {
            first_sent = Some(started.elapsed());
        }
        if all_rendered.is_none() && s.rendered >= jobs as u64 {
            all_rendered = Some(started.elapsed());
        }
        // Once a second the ledger too, in case work ends some other way (a job quarantined).
        if s.sent + s.quarantined >= expected
            || (tick % 100 == 99 && sinks::finished(&ledger).await >= jobs)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while sinks::finished(&ledger).await < jobs {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain_s = started.elapsed().as_secs_f64();
    let cpu = sinks::cpu_seconds() - cpu;
    let sink_cpu = sinks::sink_cpu_seconds() - sink_cpu;
    let switches = sinks::context_switches() - switches;
    let render_s = all_rendered.unwrap_or(started.elapsed()).as_secs_f64();
    let first_delivery_ms = first_sent.unwrap_or(started.elapsed()).as_millis();
    cancel.cancel();
    worker.await.expect("join").expect("pool");
    let counts = ledger.jobs().count_by_state().await.expect("counts");
    let done = counts
        .iter()
        .find(|(s, _)| *s == JobState::Done)
        .map_or(0, |(_, n)| *n);
    assert_eq!(done as usize, jobs, "every job delivered: {counts:?}");

    let deliveries = ledger
        .deliveries()
        .count_by_state()
        .await
        .expect("counts")
        .iter()
        .map(|(_, n)| n)
        .sum::<i64>();
    let mut latencies = ledger.deliveries().latencies_ms().await.expect("latencies");
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let objects = walk(artifacts);
    let rate = deliveries as f64 / drain_s;
    let cpu_us = cpu / deliveries as f64 * 1e6;
    let pipeline_cpu_us = (cpu - sink_cpu).max(0.0) / deliveries as f64 * 1e6;
    eprintln!(
        "# {backend}: {:.0} µs of CPU per delivery (this process: pipeline and sinks; {:.0} µs without the sinks' threads{}), {:.0}% of one core while draining",
        cpu_us,
        pipeline_cpu_us,
        if backend == "postgres" {
            "; the PostgreSQL server's own CPU is not counted"
        } else {
            ""
        },
        cpu / drain_s * 100.0
    );
    Line {
        backend,
        reports: jobs,
        deliveries,
        enqueue_s: round3(enqueue_s),
        drain_s: round3(drain_s),
        deliveries_per_s: rate.round(),
        first_delivery_ms,
        renders_per_s: (jobs as f64 / render_s).round(),
        cpu_us_per_delivery: cpu_us.round(),
        pipeline_cpu_us_per_delivery: pipeline_cpu_us.round(),
        baseline_per_s: baseline.0.round(),
        baseline_cpu_us_per_post: baseline.1.round(),
        ratio: round3(rate / baseline.0),
        cpu_ratio: round3(cpu_us / baseline.1),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        peak_rss_mb: sinks::peak_rss_mb().round(),
        artifacts_written: objects / 2,
        context_switches_per_delivery: round3(switches as f64 / deliveries.max(1) as f64),
        ..Line::default()
    }
}

/// One result line, fields in the documented order.
#[derive(serde::Serialize, Default)]
struct Line<'a> {
    backend: &'a str,
    reports: usize,
    deliveries: i64,
    enqueue_s: f64,
    drain_s: f64,
    deliveries_per_s: f64,
    first_delivery_ms: u128,
    renders_per_s: f64,
    cpu_us_per_delivery: f64,
    /// The same without the sinks' threads (they run on a runtime of their own): the
    /// pipeline's CPU, as graphile-worker's `cpu_us_per_job` is its own process's.
    pipeline_cpu_us_per_delivery: f64,
    baseline_per_s: f64,
    baseline_cpu_us_per_post: f64,
    ratio: f64,
    cpu_ratio: f64,
    p50_ms: i64,
    p99_ms: i64,
    peak_rss_mb: f64,
    artifacts_written: usize,
    /// The drain's context switches in this process (sinks included), per delivery.
    context_switches_per_delivery: f64,
    /// PostgreSQL only: the database's commits and the WAL written, enqueue and drain together.
    #[serde(skip_serializing_if = "Option::is_none")]
    commits: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commits_per_delivery: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wal_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wal_bytes_per_delivery: Option<f64>,
    /// With `--graphile`: deliveries/s over graphile-worker's POST jobs/s, in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_graphile: Option<f64>,
}

impl Line<'_> {
    /// With what the PostgreSQL server did between the two marks, per delivery (the bench's
    /// fresh schema's migrations are among them, a few dozen commits).
    fn with_server_work(mut self, marks: Option<(sinks::PgMark, sinks::PgMark)>) -> Self {
        if let Some((before, after)) = marks {
            let per = |n: i64| n as f64 / self.deliveries.max(1) as f64;
            let (commits, wal) = (
                after.commits - before.commits,
                after.wal_bytes - before.wal_bytes,
            );
            self.commits = Some(commits);
            self.commits_per_delivery = Some(round3(per(commits)));
            self.wal_bytes = Some(wal);
            self.wal_bytes_per_delivery = Some(per(wal).round());
        }
        self
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        walk(&p)
                    } else {
                        usize::from(p.extension().is_some_and(|x| x == "html" || x == "txt"))
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
