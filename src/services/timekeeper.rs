//! Keeps this node's clock on the shared ledger's (see [`crate::domain::clock::LedgerClock`]): reads
//! the ledger's clock when the ledger opens and every `services.clock_every` in the daemon, exports how far
//! the wall clock is off it (`dawnpost_clock_offset_seconds`), warns past [`WARN_PAST`], and
//! says so loudly past `pool.max_clock_offset`, where the pool and the rescuer stop
//! ([`crate::domain::clock::refusal`]). An injected clock (a test's) and SQLite follow nothing.
//!
//! The registry's heartbeat reads the ledger's clock in its own transaction and hands the
//! reading over ([`Timekeeper::take`]); while such readings arrive, the timekeeper reads none
//! of its own (each read is a commit on a shared server).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::domain::clock::{Clock, SharedClock, refusal, signed_seconds};
use crate::domain::duration::Span;
use crate::ledger::Ledger;
use crate::runtime::metrics::Metrics;

/// An offset past which the daemon warns (it keeps the ledger's time anyway).
pub(crate) const WARN_PAST: chrono::Duration = chrono::Duration::seconds(1);

/// A reading of the ledger's clock that takes longer is given up (the last one stands).
const READ_WITHIN: Duration = Duration::from_secs(5);

/// Has `clock` follow the ledger's, if it is a [`crate::domain::clock::LedgerClock`] and the ledger
/// has a clock of its own: the wall clock's offset from it, or `None`.
pub async fn follow(clock: &dyn Clock, ledger: &Ledger) -> Option<chrono::Duration> {
    let follower = clock.following()?;
    let read = tokio::time::timeout(READ_WITHIN, ledger.server_time()).await;
    match read {
        // Timed from when the connection was in hand: a wait for one would skew the reading
        // by half of it.
        Ok(Ok(Some(r))) => Some(follower.follow(r.at, r.sent, r.answered)),
        Ok(Ok(None)) => None,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not read the ledger's clock; keeping the last reading");
            None
        }
        Err(_) => {
            tracing::warn!(
                "the ledger's clock did not answer within 5 s; keeping the last reading"
            );
            None
        }
    }
}

/// The daemon's service that keeps following the ledger's clock.
#[derive(Debug)]
pub struct Timekeeper {
    ledger: Ledger,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    /// `pool.max_clock_offset`.
    bound: Span,
    /// `services.clock_every`.
    every: Duration,
    /// When the last reading was taken (its own or one handed over).
    last: std::sync::Mutex<Option<Instant>>,
}

impl Timekeeper {
    /// A timekeeper reading `ledger`'s clock every `every` (`services.clock_every`) for
    /// `clock`, warning past `bound` (`pool.max_clock_offset`).
    pub fn new(
        (ledger, clock): (Ledger, SharedClock),
        metrics: Arc<Metrics>,
        bound: Span,
        every: Duration,
    ) -> Timekeeper {
        Timekeeper {
            ledger,
            clock,
            metrics,
            bound,
            every,
            last: std::sync::Mutex::new(None),
        }
    }

    /// Reads the ledger's clock once, records the offset, and says what it means.
    pub async fn check(&self) {
        if let Some(offset) = follow(&*self.clock, &self.ledger).await {
            self.mark();
            self.report(offset);
        }
    }

    /// Takes a reading of the ledger's clock made elsewhere (the registry's heartbeat):
    /// `reference`, read between `sent` and `answered`.
    pub fn take(&self, reference: chrono::DateTime<chrono::Utc>, sent: Instant, answered: Instant) {
        let Some(follower) = self.clock.following() else {
            return;
        };
        self.mark();
        self.report(follower.follow(reference, sent, answered));
    }

    fn mark(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Whether a reading was taken recently enough that this round needs none: within one
    /// interval and a half (the heartbeat's round and this one are not in step).
    fn fresh(&self) -> bool {
        let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        let within = self.every.saturating_add(self.every / 2);
        last.is_some_and(|at| at.elapsed() < within)
    }

    /// At start: the offset read when the ledger opened, if the clock has one (one reading of
    /// the ledger's clock, not two), else a fresh reading.
    pub async fn start(&self) {
        match self.clock.following().and_then(|c| c.offset()) {
            Some(offset) => {
                self.mark();
                self.report(offset);
            }
            None => self.check().await,
        }
    }

    /// Records `offset` and says what it means.
    fn report(&self, offset: chrono::Duration) {
        self.metrics
            .clock_offset
            .set(offset.num_milliseconds() as f64 / 1000.0);
        let shown = signed_seconds(offset);
        if let Some(why) = refusal(&*self.clock, self.bound) {
            tracing::error!(offset = %shown, "{why}");
        } else if offset.abs() > WARN_PAST {
            tracing::warn!(
                offset = %shown,
                "this node's clock is off the ledger's: dawnpost keeps the ledger's time, but fix the clock (NTP)"
            );
        }
    }

    /// A reading every `every` until `cancel`, unless one was handed over since
    /// ([`Timekeeper::take`]); [`Timekeeper::start`] took the first.
    pub async fn run(&self, cancel: CancellationToken) {
        let start = crate::runtime::periodic::Start::AfterOne;
        crate::runtime::periodic::every(self.every, start, &cancel, || async {
            if !self.fresh() {
                self.check().await;
            }
        })
        .await;
    }
}
