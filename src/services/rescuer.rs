//! The lease rescuer: returns work whose lease expired (its worker died or hung) to the queue.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::delivery::retry::RetryPolicy;
use crate::domain::clock::SharedClock;
use crate::ledger::{Ledger, LedgerError, RescueBudget, RescueCounts};
use crate::runtime::metrics::Metrics;
use crate::runtime::periodic::Start;

/// Rescuer settings.
#[derive(Debug, Clone)]
pub struct RescuerConfig {
    /// How often to look for expired leases. Default 15s.
    pub every: Duration,
    /// What lost leases count against: `[retry]`'s `max_attempts` and `max_age`.
    pub budget: RescueBudget,
    /// Past this offset of the node's clock from a shared ledger's, it rescues nothing: every
    /// live lease could look expired to it.
    pub max_clock_offset: crate::domain::duration::Span,
    /// On SQLite, how far ahead a stored lease or retry may lie: each round brings back what
    /// a wall clock that ran ahead wrote.
    pub bounds: Option<crate::ledger::Bounds>,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            every: Duration::from_secs(15),
            budget: RescueBudget::default(),
            max_clock_offset: crate::domain::duration::Span::from_secs(30),
            bounds: None,
        }
    }
}

impl RescuerConfig {
    /// Every `services.rescue_every`, by default every quarter lease (between 250 ms and
    /// 15 s), with the `[retry]` budget.
    pub fn from_config(config: &Config) -> RescuerConfig {
        let lease = config.settings.pool.lease.as_std();
        let every = match config.settings.services.rescue_every {
            Some(every) => every.as_std(),
            None => (lease / 4).clamp(Duration::from_millis(250), Duration::from_secs(15)),
        };
        let policy = RetryPolicy::from(&config.settings.retry);
        RescuerConfig {
            every,
            budget: RescueBudget::from(&policy),
            max_clock_offset: config.settings.pool.max_clock_offset,
            bounds: Some(crate::ledger::Bounds::of(
                config.settings.pool.lease.as_chrono(),
                &policy,
            )),
        }
    }
}

/// The lease rescuer of `pipeline`'s node: its settings from `config`, recording into
/// `metrics`, nudging the pool when it returned work.
pub(crate) fn for_pool(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    pipeline: &crate::pool::Pipeline,
) -> Rescuer {
    Rescuer::new(ledger, clock, RescuerConfig::from_config(config))
        .with_metrics(metrics)
        .with_nudge(pipeline.nudge())
}

#[derive(Debug, Clone)]
pub struct Rescuer {
    ledger: Ledger,
    clock: SharedClock,
    config: RescuerConfig,
    metrics: Option<Arc<Metrics>>,
    /// The pool that takes up what was rescued, nudged when anything was.
    nudge: Option<crate::runtime::periodic::Nudge>,
    /// Whether this node leads: else it looks only every few rounds.
    leadership: crate::runtime::leadership::Leadership,
}

impl Rescuer {
    pub fn new(ledger: Ledger, clock: SharedClock, config: RescuerConfig) -> Rescuer {
        Rescuer {
            ledger,
            clock,
            config,
            metrics: None,
            nudge: None,
            leadership: Default::default(),
        }
    }

    /// Follows `leadership`: while another node leads, it looks only one round in
    /// [`crate::runtime::leadership::FOLLOWER_ROUNDS`] (a backstop should the leader stall).
    pub(crate) fn with_leadership(
        mut self,
        leadership: crate::runtime::leadership::Leadership,
    ) -> Rescuer {
        self.leadership = leadership;
        self
    }

    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Rescuer {
        self.metrics = Some(metrics);
        self
    }

    /// Nudges `nudge` (this node's pool) when it rescued anything, so the pool takes it up at
    /// once.
    pub fn with_nudge(mut self, nudge: crate::runtime::periodic::Nudge) -> Rescuer {
        self.nudge = Some(nudge);
        self
    }

    pub async fn run_once(&self) -> Result<RescueCounts, LedgerError> {
        if crate::domain::clock::refusal(&*self.clock, self.config.max_clock_offset).is_some() {
            return Ok(RescueCounts::default());
        }
        if let Some(bounds) = self.config.bounds {
            let moved = self.ledger.leases().bound(self.clock.now(), bounds).await?;
            if moved > 0 {
                tracing::warn!(
                    moved,
                    "brought back leases and retries written further ahead than they can be (the node that wrote them had a clock ahead)"
                );
            }
        }
        let counts = self
            .ledger
            .leases()
            .rescue(self.clock.now(), &self.config.budget)
            .await?;
        if let Some(m) = &self.metrics {
            m.rescued("job", counts.jobs);
            m.rescued("delivery", counts.deliveries);
            m.quarantined.inc_by(counts.quarantined);
        }
        if counts.quarantined > 0 {
            tracing::error!(
                quarantined = counts.quarantined,
                "quarantined work whose lost leases spent its budget (it kills or hangs its worker)"
            );
        }
        if counts.jobs > 0 || counts.deliveries > 0 {
            if let Some(nudge) = &self.nudge {
                nudge.now();
            }
            tracing::warn!(
                jobs = counts.jobs,
                deliveries = counts.deliveries,
                "rescued expired leases"
            );
        }
        if counts.settled > 0 {
            tracing::warn!(
                jobs = counts.settled,
                "settled jobs left delivering 30 s after their last delivery finished: the worker that recorded it stopped, or could not record the settle"
            );
        }
        Ok(counts)
    }

    /// Looks every `every` until `cancel`: each round while this node leads, else one in
    /// [`crate::runtime::leadership::FOLLOWER_ROUNDS`].
    pub async fn run(&self, cancel: CancellationToken) {
        let round = std::sync::atomic::AtomicU32::new(0);
        crate::runtime::periodic::every(self.config.every, Start::Now, &cancel, || async {
            let n = round.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if !self.leadership.takes(n) {
                return;
            }
            match self.run_once().await {
                Ok(_) => {}
                Err(e) if e.is_lock_timeout() => tracing::warn!(
                    "an expired lease is still locked by another node's transaction (that node is paused or stalled mid-write); the rescue tries again once the server ends it"
                ),
                Err(e) => tracing::error!(error = %e, "lease rescue failed; retrying"),
            }
        })
        .await;
    }
}
