//! The chaos suite's rig: one PostgreSQL schema, two `dawnpost run` nodes on it (release
//! binary, loopback sinks), a producer that offers work at a set rate or keeps a set depth,
//! and a sampler of what the sinks received.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dawnpost::Config;
use dawnpost::ledger::{JobOrigin, Ledger, NewJob};
use tokio_util::sync::CancellationToken;

use crate::sinks::{self, Seen};

/// Destinations per report: two webhooks and one email.
pub const WEBHOOKS: usize = 2;
pub const EMAILS: usize = 1;
pub const PER_JOB: usize = WEBHOOKS + EMAILS;
const REPORTS: usize = 50;
/// The nodes' `pool.drain_timeout`, in seconds.
pub const DRAIN_TIMEOUT_S: u64 = 5;

/// What the producer offers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Offer {
    /// This many jobs a second.
    Rate(f64),
    /// New jobs whenever fewer than this many are unfinished.
    Depth(u64),
    Off,
}

/// A node: the `dawnpost run` process and its log.
pub struct Node {
    pub name: &'static str,
    child: tokio::process::Child,
    starts: u32,
}

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub schema: String,
    pub admin_url: String,
    pub application_name: String,
    pub ledger: Ledger,
    pub web: Arc<Seen>,
    pub mail: Arc<Seen>,
    pub config: Config,
    pub inserted: Arc<AtomicU64>,
    pub offer: Arc<Mutex<Offer>>,
    pub samples: Arc<Mutex<Vec<(f64, u64)>>>,
    pub started: Instant,
    pub stop: CancellationToken,
}

fn settings(db_url: &str) -> String {
    format!(
        "[database]\nurl = \"{db_url}\"\n[pool]\nconcurrency = 16\nadmission_per_second = 1000\nlease = \"10s\"\ndrain_timeout = \"{DRAIN_TIMEOUT_S}s\"\n[retry]\nbase = \"200ms\"\ncap = \"2s\"\nmax_attempts = 50\n[server]\nbind = \"127.0.0.1:0\"\n"
    )
}

impl Rig {
    pub async fn new(admin_url: &str, label: &str) -> Rig {
        let (http, web) = sinks::http_sink().await;
        let (smtp, mail) = sinks::smtp_sink().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let schema = format!("dp_chaos_{}_{label}", std::process::id());
        let application_name = format!("dpchaos{}", std::process::id());
        let ledger = Ledger::connect_postgres_schema(admin_url, &schema)
            .await
            .expect("postgres");
        let sep = if admin_url.contains('?') { '&' } else { '?' };
        let node_url = format!(
            "{admin_url}{sep}options=-c%20search_path%3D{schema}&application_name={application_name}"
        );
        sinks::project(
            dir.path(),
            REPORTS,
            WEBHOOKS,
            EMAILS,
            http,
            smtp,
            &settings(&node_url),
        );
        let config = Config::load(&dir.path().join("config"), &dawnpost::delivery::readers())
            .unwrap_or_else(|e| panic!("{e}"));
        Rig {
            dir,
            schema,
            admin_url: admin_url.to_string(),
            application_name,
            ledger,
            web,
            mail,
            config,
            inserted: Arc::new(AtomicU64::new(0)),
            offer: Arc::new(Mutex::new(Offer::Off)),
            samples: Arc::new(Mutex::new(Vec::new())),
            started: Instant::now(),
            stop: CancellationToken::new(),
        }
    }

    /// Seconds since the rig was made.
    pub fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Deliveries received so far, repeats included.
    pub fn received(&self) -> u64 {
        self.web.count() + self.mail.count()
    }

    /// Distinct deliveries received (by delivery key).
    pub fn distinct(&self) -> usize {
        self.web.by_key.lock().expect("lock").len() + self.mail.by_key.lock().expect("lock").len()
    }

    pub fn set_offer(&self, offer: Offer) {
        *self.offer.lock().expect("lock") = offer;
    }

    /// Starts the producer and the sampler; both end with the rig's token.
    pub fn start_load(&self) {
        let (ledger, config, inserted, offer, stop) = (
            self.ledger.clone(),
            self.config.clone(),
            self.inserted.clone(),
            self.offer.clone(),
            self.stop.clone(),
        );
        let (web, mail) = (self.web.clone(), self.mail.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(100));
            let mut owed = 0.0f64;
            while !stop.is_cancelled() {
                every.tick().await;
                let offer = *offer.lock().expect("lock");
                let made = inserted.load(Ordering::Relaxed);
                let want = match offer {
                    Offer::Off => 0,
                    Offer::Rate(per_s) => {
                        owed += per_s / 10.0;
                        owed.floor() as u64
                    }
                    Offer::Depth(depth) => {
                        let finished = (web.count() + mail.count()) / PER_JOB as u64;
                        depth.saturating_sub(made.saturating_sub(finished))
                    }
                };
                if want == 0 {
                    continue;
                }
                let jobs = jobs(&config, made, want);
                // A refused insert (the server busy with a fault) is offered again next tick;
                // new work is signalled to the nodes, as `POST /v1/runs` does.
                if ledger
                    .jobs()
                    .insert_many(&jobs, chrono::Utc::now())
                    .await
                    .is_ok()
                {
                    let _ = ledger.signal_work().await;
                    inserted.fetch_add(want, Ordering::Relaxed);
                    if matches!(offer, Offer::Rate(_)) {
                        owed -= want as f64;
                    }
                }
            }
        });
        let (samples, stop, started) = (self.samples.clone(), self.stop.clone(), self.started);
        let (web, mail) = (self.web.clone(), self.mail.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            while !stop.is_cancelled() {
                every.tick().await;
                let t = started.elapsed().as_secs_f64();
                samples
                    .lock()
                    .expect("lock")
                    .push((t, web.count() + mail.count()));
            }
        });
    }

    /// Deliveries per second between two moments, from the samples.
    pub fn rate(&self, from: f64, to: f64) -> f64 {
        let samples = self.samples.lock().expect("lock");
        let at = |t: f64| {
            samples
                .iter()
                .rev()
                .find(|(s, _)| *s <= t)
                .map_or(0, |(_, n)| *n)
        };
        if to <= from {
            return 0.0;
        }
        (at(to) - at(from)) as f64 / (to - from)
    }

    /// The longest stretch between `from` and `to` in which nothing was delivered, in seconds
    /// (to the sampler's quarter second).
    pub fn longest_gap(&self, from: f64, to: f64) -> f64 {
        let samples = self.samples.lock().expect("lock");
        let mut longest = 0.0f64;
        let mut since = from;
        let mut last = None;
        for &(t, n) in samples.iter().filter(|(t, _)| *t >= from && *t <= to) {
            if last.is_some_and(|l| n > l) {
                since = t;
            }
            longest = longest.max(t - since);
            last = Some(n);
        }
        longest
    }

    /// Seconds from `from` until a one-second window delivers at least `pace` (bounded by the
    /// samples taken).
    pub fn back_to_pace(&self, from: f64, pace: f64) -> Option<f64> {
        let last = self
            .samples
            .lock()
            .expect("lock")
            .last()
            .map_or(0.0, |s| s.0);
        let mut t = from;
        while t + 1.0 <= last {
            if self.rate(t, t + 1.0) >= pace {
                return Some(t - from);
            }
            t += 0.25;
        }
        None
    }

    pub fn start_node(&self, name: &'static str) -> Node {
        Node {
            name,
            child: spawn(self.dir.path(), &self.log(name, 0)),
            starts: 1,
        }
    }

    fn log(&self, name: &str, start: u32) -> PathBuf {
        self.dir.path().join(format!("node-{name}-{start}.log"))
    }

    pub fn restart(&self, node: &mut Node) {
        node.child = spawn(self.dir.path(), &self.log(node.name, node.starts));
        node.starts += 1;
    }

    /// Every warning and error the nodes logged, in all their runs.
    pub fn logged(&self) -> String {
        let mut all = String::new();
        for entry in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.file_name().to_string_lossy().starts_with("node-") {
                all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        all
    }

    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.ledger.drop_postgres_schema(&self.schema).await;
        self.ledger.close().await;
    }
}

fn spawn(dir: &Path, log: &Path) -> tokio::process::Child {
    let log = std::fs::File::create(log).expect("log file");
    // `DAWNPOST_CHAOS_BIN`: the suite run against another build (a previous release, say).
    let bin = std::env::var_os("DAWNPOST_CHAOS_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_dawnpost").into());
    tokio::process::Command::new(bin)
        .arg("--config")
        .arg(dir.join("config"))
        .arg("run")
        .env_remove("DAWNPOST_DATABASE_URL")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("start dawnpost run")
}

impl Node {
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM; seconds until the process ended and its exit code (`None` if it had not ended
    /// `DRAIN_TIMEOUT_S` + 30 s later, when it is killed).
    pub async fn terminate(&mut self) -> (f64, Option<i32>) {
        let sent = Instant::now();
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) with a pid this process spawned and has not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        let limit = Duration::from_secs(DRAIN_TIMEOUT_S + 30);
        let exit = tokio::time::timeout(limit, self.child.wait()).await;
        let seconds = sent.elapsed().as_secs_f64();
        match exit {
            Ok(Ok(status)) => (seconds, status.code()),
            _ => {
                self.kill().await;
                (seconds, None)
            }
        }
    }
}

/// `n` jobs after the first `made`: report `i % REPORTS`, day `i / REPORTS` from 2026-01-01.
fn jobs(config: &Config, made: u64, n: u64) -> Vec<NewJob> {
    let first = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date");
    let now = chrono::Utc::now();
    (made..made + n)
        .filter_map(|i| {
            let report = &config.reports[(i % REPORTS as u64) as usize];
            let date = first + chrono::Duration::days((i / REPORTS as u64) as i64);
            let fire = dawnpost::report::schedule::Fire::for_date(report, date)?;
            Some(NewJob {
                key: fire.key,
                fire_at: fire.fire_at,
                window: fire.window,
                ready_at: now,
                origin: JobOrigin::Backfill,
            })
        })
        .collect()
}
