//! The worker pool: leases ready jobs and due deliveries and works them.
//!
//! Two separate limits: `concurrency` (in-flight work items, a semaphore over a `JoinSet`) and
//! admission (new leases per second, adaptive — see [`throttle`]). The pool claims at most what
//! it can admit, ahead of its free slots into a local queue ([`queue`], [`claim`]) from which
//! work starts as slots free. Each lease is extended while its work runs; a lease lost to the
//! rescuer stops the work. GroupCommit are recorded by one `completer` task in group commits; a
//! work item frees its slot when it hands its outcome over. On cancel (SIGTERM/SIGINT) the pool
//! stops claiming, gives back what it claimed and never started (uncounted), lets in-flight
//! work finish up to `drain_timeout`, lets the completer record what it was handed, and returns
//! the rest to the queue: a render without counting it, a send as an `unknown` attempt (it may
//! have reached the receiver; the retry keeps the same key).

mod claim;
mod completer;
mod decide;
mod failure;
mod file_render;
mod hold;
pub mod limits;
mod queue;
mod running;
mod send;
mod suppressions;
pub mod throttle;
mod wait;
mod work;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use hold::Hold;
use running::{Held, Running};
use throttle::{Admission, HostThrottle};

use crate::config::Config;
use crate::delivery::destination::{Build, Senders};
use crate::delivery::retry::RetryPolicy;
use crate::domain::clock::SharedClock;
use crate::ledger::{Ledger, LedgerError};
use crate::report::artifact::ArtifactStore;
use crate::runtime::metrics::Metrics;

/// Pool limits. Defaults as in `dawnpost.toml`'s `[pool]`.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// In-flight work items. Default 16.
    pub concurrency: u32,
    /// New leases per second. Default 50.
    pub admission_per_second: u32,
    /// Lease length; extended every third of it while work runs. Default 5m.
    pub lease: chrono::Duration,
    /// Time in-flight work gets to finish on shutdown. Default 30s.
    pub drain_timeout: Duration,
    /// How soon an idle pool looks for due work again, at the least. Default 200ms.
    pub idle_poll: Duration,
    /// How long an idle pool waits at most before it looks again when the ledger holds no work
    /// due sooner (work another process makes due is seen within it). Default 1s.
    pub idle_max: Duration,
    /// This worker's name in lease rows.
    pub owner: String,
    /// How far the node's clock may be off a shared ledger's before it leases nothing.
    pub max_clock_offset: crate::domain::duration::Span,
}

impl PoolConfig {
    pub fn from_config(config: &Config) -> PoolConfig {
        let p = &config.settings.pool;
        PoolConfig {
            concurrency: p.concurrency,
            admission_per_second: p.admission_per_second,
            lease: p.lease.as_chrono(),
            drain_timeout: p.drain_timeout.as_std(),
            idle_poll: Duration::from_millis(200),
            idle_max: Duration::from_secs(1),
            owner: default_owner(),
            max_clock_offset: p.max_clock_offset,
        }
    }
}

/// What a send may take beyond its transport's own timeout (the artifact read, the handshake)
/// before it is cut; a throttle probe that has not answered by then has expired too.
const SEND_GRACE: Duration = Duration::from_secs(5);

/// Why the pool could not be built, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("report {report}: {source}")]
    Template {
        report: String,
        source: crate::report::render::RenderError,
    },
    #[error(transparent)]
    Artifacts(#[from] crate::report::artifact::ArtifactError),
    #[error("[server] link_secret_env: {0}")]
    Links(#[from] crate::delivery::links::LinkError),
    #[error(transparent)]
    Transport(#[from] crate::delivery::DeliverError),
    #[error("the HTTP source client: {0}")]
    Http(#[from] crate::runtime::tls::TlsError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("the completer stopped: no outcome can be recorded")]
    CompleterStopped,
    #[error("no free slot for leased work")]
    NoSlot(#[from] tokio::sync::TryAcquireError),
}

/// A uniform draw in `[0, 1)`: the jitter of retries and readiness probes.
pub(crate) fn jitter() -> f64 {
    use rand::RngExt;
    rand::rng().random()
}

/// The pool for a configuration, recording into `metrics`: what the daemon and `run --once`
/// both work with (each adds the lease rescuer, `services::rescuer::for_pool`).
pub fn build(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    artifacts: ArtifactStore,
) -> Result<Arc<Pipeline>, PoolError> {
    let pipeline = Pipeline::new(
        config,
        ledger,
        clock,
        PoolConfig::from_config(config),
        artifacts,
    )?
    .with_metrics(metrics);
    Ok(Arc::new(pipeline))
}

/// What the server may see of this node's pool: whether its clock refuses work, and which
/// hosts a rate-limited reply paused. Nothing else: the server cannot lease, send or reach the
/// pool's configuration through it; it may nudge the pool to look for work it just made due.
#[derive(Debug, Clone)]
pub struct PoolView(Arc<Pipeline>);

impl PoolView {
    pub fn of(pipeline: &Arc<Pipeline>) -> PoolView {
        PoolView(pipeline.clone())
    }

    /// Why this node's clock refuses work, if it does (see [`Pipeline::clock_refusal`]).
    pub(crate) fn clock_refusal(&self) -> Option<String> {
        self.0.clock_refusal()
    }

    /// Tells the pool that work is due now (a redrive, a reissue, an ingested run).
    pub fn nudge(&self) {
        self.0.nudge.now();
    }

    /// Every paused host with the end of its pause, soonest first.
    pub fn paused(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(String, chrono::DateTime<chrono::Utc>)> {
        self.0.throttle.paused(now)
    }
}

/// The answer to the claim in flight; never, when none is.
async fn answer_to(
    asked: &mut Option<oneshot::Receiver<completer::ClaimAnswer>>,
) -> Result<completer::ClaimAnswer, oneshot::error::RecvError> {
    match asked {
        Some(answer) => answer.await,
        None => std::future::pending().await,
    }
}

/// `hostname:pid`: who holds a lease.
pub(crate) fn default_owner() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "dawnpost".into());
    format!("{host}:{}", std::process::id())
}

/// Counters for progress displays and summaries.
#[derive(Debug, Default)]
pub struct Stats {
    pub rendered: AtomicU64,
    pub artifacts_written: AtomicU64,
    pub sent: AtomicU64,
    pub retrying: AtomicU64,
    pub quarantined: AtomicU64,
    pub rate_limited: AtomicU64,
    pub deferred: AtomicU64,
}

/// A snapshot of [`Stats`].
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub rendered: u64,
    pub artifacts_written: u64,
    pub sent: u64,
    pub retrying: u64,
    pub quarantined: u64,
    pub rate_limited: u64,
    pub deferred: u64,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatsSnapshot {
            rendered: g(&self.rendered),
            artifacts_written: g(&self.artifacts_written),
            sent: g(&self.sent),
            retrying: g(&self.retrying),
            quarantined: g(&self.quarantined),
            rate_limited: g(&self.rate_limited),
            deferred: g(&self.deferred),
        }
    }

    fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything a work item needs, shared by all of them.
#[derive(Debug)]
pub struct Pipeline {
    pub ledger: Ledger,
    /// The reports in force and their templates (replaced at a reload).
    pub catalog: crate::report::catalog::Catalog,
    pub artifacts: ArtifactStore,
    /// Each destination kind's sender.
    pub senders: Senders,
    /// Links to a job's report (`[server] public_url`), which a render puts in its context.
    pub(crate) links: Option<crate::delivery::links::Links>,
    pub http: reqwest::Client,
    pub policy: RetryPolicy,
    pub clock: SharedClock,
    /// Hosts paused by a rate-limited reply (shared with the owners' notifier in the daemon:
    /// a 429 to either holds both).
    pub throttle: Arc<HostThrottle>,
    /// `[[rate_limit]]`: the send rate each destination host accepts (shared with the
    /// owners' notifier in the daemon, so both count against one budget per host).
    pub limits: Arc<limits::RateLimits>,
    pub admission: Admission,
    pub stats: Stats,
    pub config: PoolConfig,
    pub metrics: Arc<Metrics>,
    /// Each destination kind's send timeout.
    send_timeouts: Vec<(crate::domain::keys::DestinationKind, Duration)>,
    /// Wakes the pool's loop: work due sooner than it would look, or arrivals to queue.
    nudge: crate::runtime::periodic::Nudge,
    /// Deliveries created leased to this node, waiting to be queued.
    arrivals: queue::Arrivals,
    /// Whether this node hears other processes' work signals (`services::wake`): an idle pool then
    /// looks for work they made due only every [`HEARING_IDLE_MAX`], not every `idle_max`.
    hearing: std::sync::atomic::AtomicBool,
    /// How many live nodes share the ledger, as the registry's heartbeats see it: the
    /// completer gathers longer on a node that shares the load (see `completer::gathering`).
    leadership: crate::runtime::leadership::Leadership,
    /// The suppressions in force, which each email's send is checked against.
    suppressions: suppressions::Suppressions,
}

/// How long an idle pool that hears other processes' work signals waits at most before it
/// looks again: a signal lost (the listening connection dropped and came back) costs this.
pub(crate) const HEARING_IDLE_MAX: Duration = Duration::from_secs(5);

impl Pipeline {
    /// Wires the pipeline from validated configuration: the pool over `artifacts`, the daemon's one store (shared with the sweeper and the
    /// server, so one client and one cache of recent artifacts, which the sweeper's purges
    /// reach).
    pub fn new(
        config: &Config,
        ledger: Ledger,
        clock: SharedClock,
        pool: PoolConfig,
        artifacts: ArtifactStore,
    ) -> Result<Pipeline, PoolError> {
        let catalog =
            crate::report::catalog::Catalog::load(config).map_err(|e| PoolError::Template {
                report: e.report,
                source: e.source,
            })?;
        let ca = config.settings.tls.ca.as_deref();
        let build = Build::new(config, ca, pool.concurrency)?;
        let senders = Senders::build(&build)?;
        let send_timeouts: Vec<_> = (crate::delivery::kinds().iter())
            .map(|d| (d.kind(), d.timeout(&config.settings)))
            .collect();
        let longest_send = crate::delivery::longest_timeout(&config.settings);
        let limits = Arc::new(limits::RateLimits::new(
            &config.settings.rate_limits,
            &config.settings.email.smtp_url,
            clock.clone(),
        ));
        Ok(Pipeline {
            ledger,
            catalog,
            artifacts,
            senders,
            links: build.links,
            http: crate::report::source::http_client(ca)?,
            policy: RetryPolicy::from(&config.settings.retry),
            clock,
            // A probe that never answers expires after the longest a send may take.
            throttle: Arc::new(HostThrottle::new(
                chrono::Duration::from_std(longest_send.saturating_add(SEND_GRACE))
                    .unwrap_or(throttle::DEFAULT_PROBE_TTL),
            )),
            limits,
            admission: Admission::new(pool.admission_per_second),
            stats: Stats::default(),
            config: pool,
            metrics: Arc::default(),
            send_timeouts,
            nudge: crate::runtime::periodic::Nudge::default(),
            hearing: std::sync::atomic::AtomicBool::new(false),
            leadership: crate::runtime::leadership::Leadership::default(),
            arrivals: queue::Arrivals::default(),
            suppressions: suppressions::Suppressions::default(),
        }
        .publishing_limits())
    }

    /// Why this node may not lease now: its clock is off a shared ledger's past
    /// `pool.max_clock_offset`.
    pub(crate) fn clock_refusal(&self) -> Option<String> {
        crate::domain::clock::refusal(&*self.clock, self.config.max_clock_offset)
    }

    /// Records into shared metrics (the HTTP server's) instead of private ones.
    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Pipeline {
        self.metrics = metrics;
        self.publishing_limits()
    }

    /// Shows the rate limits in force in the metrics, and makes the attempts' series of every
    /// kind it sends exist.
    fn publishing_limits(self) -> Pipeline {
        let kinds: Vec<String> = (crate::delivery::kinds().iter())
            .map(|d| d.kind().to_string())
            .collect();
        self.metrics.kinds_sent(&kinds);
        for spec in self.limits.specs() {
            self.metrics
                .set_rate_limit(&spec.host, spec.per_second, spec.burst);
        }
        self
    }

    /// The longest one work item may run: never past its lease (the lease is extended while
    /// it runs, but a hung item must still end and be recorded).
    pub(crate) fn work_deadline(&self) -> Duration {
        self.lease_std()
    }

    /// The longest one send may take: its transport's own timeout plus [`SEND_GRACE`], and
    /// never past [`Pipeline::work_deadline`].
    pub(crate) fn send_deadline(&self, kind: crate::domain::keys::DestinationKind) -> Duration {
        let own = (self.send_timeouts.iter())
            .find(|(k, _)| *k == kind)
            .map_or(Duration::ZERO, |(_, t)| *t);
        own.saturating_add(SEND_GRACE).min(self.work_deadline())
    }

    /// The nudge that makes an idle pool look for work at once (or at an instant): for whoever
    /// makes work due in this process.
    pub fn nudge(&self) -> crate::runtime::periodic::Nudge {
        self.nudge.clone()
    }

    /// Whether this node hears other processes' work signals now: while it does, an idle pool
    /// waits up to [`HEARING_IDLE_MAX`] instead of `idle_max` before it looks again.
    pub(crate) fn hearing(&self, on: bool) {
        (self.hearing).store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// What the registry's heartbeats tell this pool of the cluster: hand it to
    /// `Registry::with_leadership`. Without a registry (`run --once`) the node counts as alone.
    pub fn leadership(&self) -> crate::runtime::leadership::Leadership {
        self.leadership.clone()
    }

    /// Whether this node hears other processes' work signals now (see [`Pipeline::hearing`]).
    pub fn is_hearing(&self) -> bool {
        self.hearing.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs the pool until `cancel`, then drains.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) -> Result<(), PoolError> {
        let concurrency = self.config.concurrency.max(1) as usize;
        // Room for a whole batch: work that finishes while the completer commits the last
        // batch hands its outcome over and frees its slot instead of waiting for the commit.
        let (completions, completed) = mpsc::channel(completer::MAX_BATCH);
        let abandon = CancellationToken::new();
        let completer = tokio::spawn(completer::run(
            self.ledger.clone(),
            self.clock.clone(),
            (self.config.owner.clone(), self.config.lease),
            self.leadership.clone(),
            completed,
            abandon.clone(),
        ));
        let mut running = Running {
            slots: Arc::new(Semaphore::new(concurrency)),
            freed: Arc::new(Notify::new()),
            inflight: Arc::default(),
            tasks: JoinSet::new(),
            completions,
        };
        let mut queue = queue::Queue::new(concurrency);
        let mut quiet_until: Option<tokio::time::Instant> = None;
        // The claim the completer carries in its next commit: one at a time.
        let mut asked: Option<oneshot::Receiver<completer::ClaimAnswer>> = None;
        while !cancel.is_cancelled() {
            if completer.is_finished() {
                // Nothing could be recorded any more: work leased now would be sent and then
                // rescued and sent again. Stop, and let the leases held be rescued.
                self.drain(running, queue, completer, abandon).await;
                return Err(PoolError::CompleterStopped);
            }
            running.reap();
            self.queue_arrivals(&mut queue);
            // A node whose clock is far off the ledger's claims nothing and starts nothing of
            // what it claimed before (the timekeeper says why): that goes back.
            let refused = self.clock_refusal().is_some();
            self.give_back_stale(&mut queue, refused).await;
            if let Err(e) = self.start_queued(&mut queue, &mut running).await {
                tracing::error!(error = %e, "could not start claimed work");
            }
            // A round that found nothing due is not repeated for every slot that frees or
            // render that lands (each would be a commit that claims nothing): the ledger is
            // asked again when it said work falls due (see `idle_wait`), or when a nudge says
            // work is due sooner.
            let quiet = quiet_until.is_some_and(|t| tokio::time::Instant::now() < t)
                && !self.nudge.due_by(self.clock.now());
            let wanted = match refused || quiet {
                true => 0,
                false => (queue.wanted() as u32).min(self.admission.rate()),
            };
            if wanted > 0 && asked.is_none() {
                self.nudge.looked(self.clock.now());
                let urgent = queue.is_empty();
                asked = self.ask_claim((wanted, urgent), &running.completions).await;
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.nudge.notified() => {}
                _ = running.freed.notified() => {}
                Some(done) = running.tasks.join_next(), if !running.tasks.is_empty() => {
                    Running::report(done);
                }
                answer = answer_to(&mut asked), if asked.is_some() => {
                    asked = None;
                    quiet_until = self.claim_answered(answer, &mut queue).await;
                }
                _ = tokio::time::sleep(self.config.idle_poll) => {}
            }
        }
        // A claim still in flight goes back: the completer returns what it took to the queue.
        drop(asked);
        self.drain(running, queue, completer, abandon).await;
        Ok(())
    }

    /// What was claimed but may not start now goes back unstarted: all of it while the clock
    /// is refused, else what waited a third of its lease.
    async fn give_back_stale(&self, queue: &mut queue::Queue, refused: bool) {
        let stale = match refused {
            true => queue.take_all(),
            false => queue.stale(self.lease_std()),
        };
        if !stale.is_empty() {
            self.give_back(stale, "waited a third of its lease, or the clock is off")
                .await;
        }
    }

    /// Queues what the claim in flight took. Returns until when the next claim waits: a claim
    /// that took nothing waits until the ledger said work falls due (see `idle_wait`); one that
    /// failed, `idle_poll`.
    async fn claim_answered(
        &self,
        answer: Result<completer::ClaimAnswer, oneshot::error::RecvError>,
        queue: &mut queue::Queue,
    ) -> Option<tokio::time::Instant> {
        match answer {
            Ok(Ok((claimed, at))) => {
                let quiet = claimed
                    .is_empty()
                    .then(|| tokio::time::Instant::now() + self.idle_wait(claimed.next_due));
                queue.extend(self.queue_claimed(claimed, at).await);
                quiet
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "claiming failed; retrying shortly");
                Some(tokio::time::Instant::now() + self.config.idle_poll)
            }
            // The completer is gone: the loop's next turn stops the pool.
            Err(_) => None,
        }
    }

    async fn drain(
        &self,
        running: Running,
        mut queue: queue::Queue,
        completer: tokio::task::JoinHandle<()>,
        abandon: CancellationToken,
    ) {
        let Running {
            mut tasks,
            inflight,
            completions,
            ..
        } = running;
        // Claimed work that never started goes back first: nothing of it reached anyone.
        self.give_back(queue.take_all(), "shutting down").await;
        if !tasks.is_empty() {
            tracing::info!(in_flight = tasks.len(), timeout = ?self.config.drain_timeout, "draining");
        }
        let deadline = tokio::time::sleep(self.config.drain_timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                next = tasks.join_next() => if next.is_none() { break },
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        // Every sender is gone now: the completer records what was handed to it and stops. If
        // the ledger is down it keeps trying only until the drain's deadline; what it could
        // not record is left to the rescuer.
        drop(completions);
        tokio::pin!(completer);
        let recorded = tokio::select! {
            done = &mut completer => done,
            _ = &mut deadline => {
                abandon.cancel();
                completer.await
            }
        };
        if let Err(e) = recorded {
            tracing::error!(error = %e, "the completer panicked; unrecorded leases will be rescued");
        }
        // Deliveries that renders finished during the drain created, leased to this node.
        self.give_back(self.arrivals.take(), "shutting down").await;
        let left: Vec<Held> = inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, v)| v)
            .collect();
        let now = self.clock.now();
        for held in left {
            // A render cut short has sent nothing: it goes back without counting. A send cut
            // short may have reached its receiver: it counts, as `unknown`, and its retry
            // keeps the same key.
            let r = match &held {
                Held::Render(lease) => self.ledger.jobs().release(lease, now).await,
                Held::Send(lease) => self.ledger.leases().abandon(lease, now).await,
            };
            match r {
                Ok(()) => {
                    tracing::info!(key = %held.shown(), "cut at shutdown: returned to the queue")
                }
                Err(e) => tracing::debug!(error = %e, "return at shutdown: already settled"),
            }
        }
    }
}
