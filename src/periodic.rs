//! The one shape of a periodic service (the rescuer, the runbook driver, the clock check):
//! a round every interval until cancelled, its interval from `[services]`.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

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
async fn sleep_or_cancel(interval: Duration, cancel: &CancellationToken) -> bool {
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

    #[tokio::test(start_paused = true)]
    async fn a_round_every_interval_until_cancelled() {
        // At 0, 2, 4 and 6 s; cancelled at 7 s.
        assert_eq!(rounds_in(Duration::from_secs(7), Start::Now).await, 4);
        // At 2, 4 and 6 s: the first round was taken before.
        assert_eq!(rounds_in(Duration::from_secs(7), Start::AfterOne).await, 3);
    }
}
