//! The one shape of a periodic service (the rescuer, the clock check):
//! a round every interval until cancelled, its interval from `[services]`; and the [`Nudge`]
//! that tells a polling service (the pool) that work falls due sooner than it would look.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::domain::clock::to_millis;

/// Tells a polling service that work falls due at an instant, or now: whoever makes work due
/// (the scheduler's tick, a redrive, the rescuer, a retry this node scheduled) nudges, and the
/// service, which otherwise looks only when it expects work, looks then. Clones share one
/// nudge. Only an early look rides on it: a nudge lost (another process made the work) costs
/// the service's longest pause, never the work.
#[derive(Debug, Clone)]
pub struct Nudge(Arc<NudgeState>);

#[derive(Debug)]
struct NudgeState {
    /// The earliest instant nudged for and not yet looked at (ms); `i64::MAX` when none.
    due: AtomicI64,
    woken: Notify,
}

impl Default for Nudge {
    fn default() -> Nudge {
        Nudge(Arc::new(NudgeState {
            due: AtomicI64::new(i64::MAX),
            woken: Notify::new(),
        }))
    }
}

impl Nudge {
    /// Work is due now.
    pub fn now(&self) {
        self.mark(i64::MIN);
    }

    /// Work falls due at `at`.
    pub fn at(&self, at: DateTime<Utc>) {
        self.mark(to_millis(at));
    }

    fn mark(&self, due_ms: i64) {
        self.0.due.fetch_min(due_ms, Ordering::AcqRel);
        self.0.woken.notify_one();
    }

    /// Wakes the service without work falling due (it has something else to take up).
    pub fn wake(&self) {
        self.0.woken.notify_one();
    }

    /// Whether work nudged for is due by `now`.
    pub fn due_by(&self, now: DateTime<Utc>) -> bool {
        self.0.due.load(Ordering::Acquire) <= to_millis(now)
    }

    /// The service looks for work at `now`: what was nudged for by then is taken up; a nudge
    /// for later stays.
    pub fn looked(&self, now: DateTime<Utc>) {
        let now = to_millis(now);
        let _ = (self.0.due).fetch_update(Ordering::AcqRel, Ordering::Acquire, |due| {
            (due <= now).then_some(i64::MAX)
        });
    }

    /// Resolves at the next nudge or wake (one given while nobody waited counts).
    pub async fn notified(&self) {
        self.0.woken.notified().await
    }
}

/// When a periodic service takes its first round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At once.
    Now,
    /// One interval from now (the service took its first round before it was started).
    AfterOne,
}

/// The one shape of a periodic service: `round` every `interval` (from its start to the next
/// start's sleep), until `cancel`. A round reports its own failures; the next round is the
/// retry.
pub async fn every<F, Fut>(
    interval: Duration,
    start: Start,
    cancel: &CancellationToken,
    mut round: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if start == Start::AfterOne && sleep_or_cancel(interval, cancel).await {
        return;
    }
    loop {
        round().await;
        if sleep_or_cancel(interval, cancel).await {
            return;
        }
    }
}

/// Sleeps `interval`; true when `cancel` came first.
pub(crate) async fn sleep_or_cancel(interval: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => true,
        _ = tokio::time::sleep(interval) => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Rounds taken in `span` of paused time, the service started as `start`.
    async fn rounds_in(span: Duration, start: Start) -> u32 {
        let n = AtomicU32::new(0);
        let cancel = CancellationToken::new();
        let stop = async {
            tokio::time::sleep(span).await;
            cancel.cancel();
        };
        let service = every(Duration::from_secs(2), start, &cancel, || async {
            n.fetch_add(1, Ordering::SeqCst);
        });
        tokio::join!(service, stop);
        n.load(Ordering::SeqCst)
    }

    #[test]
    fn a_nudge_is_due_from_its_instant_until_looked_at() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let nudge = Nudge::default();
        assert!(!nudge.due_by(t(0)));
        nudge.at(t(10));
        nudge.clone().at(t(20));
        assert!(!nudge.due_by(t(9)) && nudge.due_by(t(10)));
        // A look before the instant leaves it; one at it takes it up.
        nudge.looked(t(9));
        assert!(nudge.due_by(t(10)));
        nudge.looked(t(10));
        assert!(
            !nudge.due_by(t(30)),
            "the later nudge was folded into the earlier"
        );
        nudge.now();
        assert!(nudge.due_by(DateTime::<Utc>::MIN_UTC));
    }

    #[tokio::test(start_paused = true)]
    async fn a_nudge_given_before_anyone_waits_still_wakes() {
        let nudge = Nudge::default();
        nudge.now();
        tokio::time::timeout(Duration::from_secs(1), nudge.notified())
            .await
            .expect("the nudge was kept for the next wait");
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_every_interval_until_cancelled() {
        // At 0, 2, 4 and 6 s; cancelled at 7 s.
        assert_eq!(rounds_in(Duration::from_secs(7), Start::Now).await, 4);
        // At 2, 4 and 6 s: the first round was taken before.
        assert_eq!(rounds_in(Duration::from_secs(7), Start::AfterOne).await, 3);
    }
}
