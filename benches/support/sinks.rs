//! Local sinks for the benchmarks, on 127.0.0.1: an HTTP receiver answering 204 with
//! keep-alive and an SMTP receiver answering 250. They count what they receive per key, so a
//! benchmark can report duplicates, and keep nothing else.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// How long the sinks wait before answering, in milliseconds (0 unless a benchmark sets it).
static REPLY_DELAY_MS: AtomicU64 = AtomicU64::new(0);

/// Makes both sinks answer `ms` milliseconds late, so sends are in flight long enough to be cut.
pub fn set_reply_delay_ms(ms: u64) {
    REPLY_DELAY_MS.store(ms, Ordering::Relaxed);
}

async fn reply_delay() {
    let ms = REPLY_DELAY_MS.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

#[derive(Default)]
pub struct Seen {
    pub total: AtomicU64,
    pub by_key: Mutex<HashMap<String, u32>>,
    /// The keys each destination (HTTP path, SMTP recipient) received, in order; kept only
    /// when [`Seen::keep_destinations`] was called.
    pub by_destination: Mutex<HashMap<String, Vec<String>>>,
    /// Count receipts without keeping their keys (no duplicate counts).
    only_count: AtomicBool,
    destinations: AtomicBool,
}

impl Seen {
    fn record(&self, destination: &str, key: Option<String>) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if let Some(k) = key.filter(|_| !self.only_count.load(Ordering::Relaxed)) {
            if self.destinations.load(Ordering::Relaxed) {
                self.by_destination
                    .lock()
                    .expect("lock")
                    .entry(destination.to_string())
                    .or_default()
                    .push(k.clone());
            }
            *self.by_key.lock().expect("lock").entry(k).or_default() += 1;
        }
    }

    /// Also keep which keys each destination received (for the chaos benchmark).
    pub fn keep_destinations(&self) {
        self.destinations.store(true, Ordering::Relaxed);
    }

    pub fn count_only(&self) {
        self.only_count.store(true, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Receipts beyond the first, over all keys.
    pub fn duplicates(&self) -> u64 {
        self.by_key
            .lock()
            .expect("lock")
            .values()
            .map(|n| u64::from(n.saturating_sub(1)))
            .sum()
    }

    pub fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.by_key.lock().expect("lock").clear();
    }
}

async fn accept(
    State(seen): State<Arc<Seen>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    _body: axum::body::Bytes,
) -> StatusCode {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    seen.record(uri.path(), key);
    reply_delay().await;
    StatusCode::NO_CONTENT
}

/// The sinks' own runtime, two threads named `sink`: a receiver's work is not the pipeline's,
/// and on threads of their own the sinks' CPU can be told apart ([`sink_cpu_seconds`]), as
/// a receiver in a process of its own would be.
fn sink_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sink")
            .enable_all()
            .build()
            .expect("sink runtime")
    })
}

/// CPU time (user + system) the sinks' threads have used so far, in seconds.
pub fn sink_cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("sink"))
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .map(|stat| stat_cpu_seconds(&stat))
        .sum()
}

/// utime + stime of a `/proc/…/stat` line, in seconds: the 12th and 13th fields after the
/// parenthesised command, in clock ticks (100 a second on Linux).
fn stat_cpu_seconds(stat: &str) -> f64 {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    if f.len() == 2 {
        (f[0] + f[1]) / 100.0
    } else {
        0.0
    }
}

/// An HTTP sink on loopback, served by the sinks' runtime.
pub async fn http_sink() -> (SocketAddr, Arc<Seen>) {
    sink_runtime()
        .spawn(http_sink_here())
        .await
        .expect("http sink")
}

async fn http_sink_here() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = axum::Router::new()
        .route("/{*path}", axum::routing::post(accept))
        .with_state(seen.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, seen)
}

/// An SMTP sink on loopback, served by the sinks' runtime.
pub async fn smtp_sink() -> (SocketAddr, Arc<Seen>) {
    sink_runtime()
        .spawn(smtp_sink_here())
        .await
        .expect("smtp sink")
}

async fn smtp_sink_here() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let seen = s.clone();
            tokio::spawn(async move {
                let (r, mut w) = sock.into_split();
                let mut r = BufReader::new(r);
                let _ = w.write_all(b"220 sink ESMTP\r\n").await;
                let mut line = String::new();
                let mut rcpt = String::new();
                loop {
                    line.clear();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let upper = line.trim_end().to_ascii_uppercase();
                    if upper.starts_with("RCPT TO:") {
                        rcpt = line.trim_end()[8..].trim().to_string();
                    }
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-sink\r\n250 8BITMIME\r\n"
                    } else if upper == "DATA" {
                        let _ = w.write_all(b"354 go\r\n").await;
                        let mut key = None;
                        loop {
                            line.clear();
                            if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == ".\r\n" {
                                break;
                            }
                            if let Some(k) = line.strip_prefix("X-Dawnpost-Delivery: ") {
                                key = Some(k.trim().to_string());
                            }
                        }
                        seen.record(&rcpt, key);
                        reply_delay().await;
                        b"250 2.0.0 queued\r\n"
                    } else if upper == "QUIT" {
                        let _ = w.write_all(b"221 bye\r\n").await;
                        return;
                    } else {
                        b"250 ok\r\n"
                    };
                    if w.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// CPU time (user + system) this process has used so far, in seconds.
pub fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map_or(0.0, |s| stat_cpu_seconds(&s))
}

/// Context switches of every thread of this process so far, voluntary or not, those of ended
/// threads included (`getrusage`): how often work changed hands between threads, which CPU
/// time measured on a shared machine hides in its noise.
pub fn context_switches() -> i64 {
    // SAFETY: getrusage writes only the struct it is handed, which lives on this stack.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is a valid target.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_nvcsw + usage.ru_nivcsw
}

/// Peak resident set size of this process, in MiB (VmHWM).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// `--reports N --destinations K` from the command line: 10,000 and 3 unless given.
pub fn size() -> (usize, usize) {
    let jobs = arg("--reports")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let destinations = arg("--destinations")
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    (jobs, destinations)
}

/// The benchmarks' runtime: multi-threaded, with I/O and timers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `--name value` from the command line (cargo bench adds its own flags; they are ignored).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A project folder: config with `reports` reports, each with `webhooks` webhook destinations
/// on the HTTP sink and `emails` addresses on the SMTP sink, and the shipped template.
pub fn project(
    dir: &std::path::Path,
    reports: usize,
    webhooks: usize,
    emails: usize,
    http: SocketAddr,
    smtp: SocketAddr,
    settings: &str,
) {
    template_and_sample(dir);
    let mut toml = String::new();
    for r in 0..reports {
        toml.push_str(&format!(
            "[[report]]\nid = \"bench-{r}\"\ntitle = \"Bench {r}\"\nschedule = \"0 0 0 29 2 *\"\ntimezone = \"Europe/Berlin\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"config/sample/data.json\" }}\nemail = [{}]\n",
            (0..emails).map(|e| format!("\"r{r}-{e}@bench.test\"")).collect::<Vec<_>>().join(", ")
        ));
        for w in 0..webhooks {
            toml.push_str(&format!(
                "[[report.webhook]]\nurl = \"http://{http}/r{r}/w{w}\"\n"
            ));
        }
    }
    std::fs::write(dir.join("config/reports.toml"), toml).expect("write");
    std::fs::write(
        dir.join("config/dawnpost.toml"),
        format!("[email]\nfrom = \"Bench <bench@bench.test>\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://{smtp}\"\n{settings}"),
    )
    .expect("write");
}

/// The shipped `daily_ops` template into `dir/templates` and one sample file as
/// `dir/config/sample/data.json`.
pub fn template_and_sample(dir: &std::path::Path) {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.join("config/sample")).expect("mkdir");
    std::fs::create_dir_all(dir.join("templates")).expect("mkdir");
    for part in ["daily_ops.html.hbs", "daily_ops.txt.hbs"] {
        std::fs::copy(
            shipped.join("templates").join(part),
            dir.join("templates").join(part),
        )
        .expect("copy");
    }
    std::fs::copy(
        shipped.join("config/sample/warehouse-17.json"),
        dir.join("config/sample/data.json"),
    )
    .expect("copy");
}

/// Jobs in a terminal state.
pub async fn finished(ledger: &dawnpost::Ledger) -> usize {
    let counts = ledger.jobs().count_by_state().await.expect("counts");
    counts
        .iter()
        .filter(|(s, _)| s.is_terminal())
        .map(|(_, n)| *n)
        .sum::<i64>() as usize
}

/// `n` jobs, ready at `now`: every report of `config` for 2026-01-01, then the next day, and so on.
pub fn jobs(
    config: &dawnpost::Config,
    n: usize,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<dawnpost::ledger::NewJob> {
    let first = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date");
    jobs_from(config, n, now, first)
}

/// [`jobs`] with its dates counted from `first`.
pub fn jobs_from(
    config: &dawnpost::Config,
    n: usize,
    now: chrono::DateTime<chrono::Utc>,
    first: chrono::NaiveDate,
) -> Vec<dawnpost::ledger::NewJob> {
    (0..n.div_ceil(config.reports.len()))
        .flat_map(|d| config.reports.iter().map(move |r| (r, d)))
        .take(n)
        .map(|(r, d)| {
            let date = first + chrono::Duration::days(d as i64);
            let fire = dawnpost::report::schedule::Fire::for_date(r, date).expect("fire");
            dawnpost::ledger::NewJob {
                key: fire.key,
                fire_at: fire.fire_at,
                window: fire.window,
                ready_at: now,
                origin: dawnpost::ledger::JobOrigin::Backfill,
            }
        })
        .collect()
}

/// What the PostgreSQL server did for a run: the database's commits (`pg_stat_database`) and
/// the WAL it wrote (`pg_current_wal_lsn()`), read before and after through a connection of
/// its own.
#[derive(Debug, Clone, Copy)]
pub struct PgMark {
    pub commits: i64,
    pub wal_bytes: i64,
}

/// A checkpoint before a run's first mark: one that fell inside a run would add to its WAL a
/// full-page image of each page the run touched again after it. Needs a superuser or the
/// `pg_checkpoint` role; without either the run goes on as it is.
pub async fn pg_checkpoint(url: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(url).await {
        let _ = sqlx::query("CHECKPOINT").execute(&mut conn).await;
        let _ = conn.close().await;
    }
}

/// Reads the marks; `None` if the server cannot be asked. Call it after the measured work's
/// connections have closed: a backend reports its commits to `pg_stat_database` at most once a
/// second while busy, and at once when it exits.
pub async fn pg_mark(url: &str) -> Option<PgMark> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
    let _ = sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut conn)
        .await;
    let (commits,): (i64,) = sqlx::query_as(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .ok()?;
    let (wal_bytes,): (i64,) =
        sqlx::query_as("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
            .fetch_one(&mut conn)
            .await
            .ok()?;
    let _ = conn.close().await;
    Some(PgMark { commits, wal_bytes })
}
