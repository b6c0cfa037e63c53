//! Keeps this node's clock on the shared ledger's (see [`crate::clock::LedgerClock`]): reads
//! the ledger's clock when the ledger opens and every `services.clock_every` in the daemon, exports how far
//! the wall clock is off it (`dawnpost_clock_offset_seconds`), warns past [`WARN_PAST`], and
//! says so loudly past `pool.max_clock_offset`, where the pool and the rescuer stop
//! ([`crate::clock::refusal`]). An injected clock (a test's) and SQLite follow nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SharedClock, refusal, signed_seconds};
use crate::duration::Span;
use crate::ledger::Ledger;
use crate::metrics::Metrics;

/// An offset past which the daemon warns (it keeps the ledger's time anyway).
pub const WARN_PAST: chrono::Duration = chrono::Duration::seconds(1);

/// A reading of the ledger's clock that takes longer is given up (the last one stands).
const READ_WITHIN: Duration = Duration::from_secs(5);

/// Has `clock` follow the ledger's, if it is a [`crate::clock::LedgerClock`] and the ledger
/// has a clock of its own: the wall clock's offset from it, or `None`.
pub async fn follow(clock: &dyn Clock, ledger: &Ledger) -> Option<chrono::Duration> {
    let follower = clock.following()?;
    let sent = Instant::now();
    let read = tokio::time::timeout(READ_WITHIN, ledger.server_time()).await;
    let answered = Instant::now();
    match read {
        Ok(Ok(Some(reference))) => Some(follower.follow(reference, sent, answered)),
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
    pub ledger: Ledger,
    pub clock: SharedClock,
    pub metrics: Arc<Metrics>,
    /// `pool.max_clock_offset`.
    pub bound: Span,
    /// `services.clock_every`.
    pub every: Duration,
}

impl Timekeeper {
    /// Reads the ledger's clock once, records the offset, and says what it means.
    pub async fn check(&self) {
        if let Some(offset) = follow(&*self.clock, &self.ledger).await {
            self.report(offset);
        }
    }

    /// At start: the offset read when the ledger opened, if the clock has one (one reading of
    /// the ledger's clock, not two), else a fresh reading.
    pub async fn start(&self) {
        match self.clock.following().and_then(|c| c.offset()) {
            Some(offset) => self.report(offset),
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

    /// A reading every `every` until `cancel`; [`Timekeeper::start`] took the first.
    pub async fn run(&self, cancel: CancellationToken) {
        let start = crate::periodic::Start::AfterOne;
        crate::periodic::every(self.every, start, &cancel, || self.check()).await;
    }
}
