//! How long this node knows it still holds a lease, by its monotonic clock: from the instant
//! before the claim (or the last extension) was asked for, plus the lease length. The ledger's
//! deadline is at least that late, so a send started while [`Hold::left`] is ample cannot be
//! on a lease that has run out — even after the process was paused (SIGSTOP, a stalled VM) or
//! its wall clock stepped, since the monotonic clock counts the pause and ignores the step.
//! The extender beside each work item keeps it, and a send confirms it before it starts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::Pipeline;
use super::running::Held;
use crate::ledger::{DeliveryLease, LedgerError};

#[derive(Debug)]
pub(super) struct Hold {
    until: Mutex<Instant>,
    lease: Duration,
}

impl Hold {
    /// A lease of length `lease` claimed by a statement sent at `asked`.
    pub(super) fn new(asked: Instant, lease: Duration) -> Hold {
        Hold {
            until: Mutex::new(asked + lease),
            lease,
        }
    }

    /// An extension asked for at `asked` was granted.
    pub(super) fn extended(&self, asked: Instant) {
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        *until = (*until).max(asked + self.lease);
    }

    /// What is left of the lease as far as this node knows (zero once it ran out).
    pub(super) fn left(&self) -> Duration {
        let until = *self.until.lock().unwrap_or_else(|e| e.into_inner());
        until.saturating_duration_since(Instant::now())
    }
}

impl Pipeline {
    /// How this node tracks a lease claimed by a statement sent at `claimed`.
    pub(super) fn hold_from(&self, claimed: Instant) -> Arc<Hold> {
        Arc::new(Hold::new(claimed, self.lease_std()))
    }

    pub(super) fn lease_std(&self) -> Duration {
        self.config
            .lease
            .to_std()
            .unwrap_or(Duration::from_secs(300))
    }

    /// A third of the lease: how often a held lease is extended, and what must be left of it
    /// for a send to start without asking the ledger first.
    pub(super) fn lease_third(&self) -> Duration {
        (self.lease_std() / 3).max(Duration::from_millis(100))
    }

    /// Extends a held lease now; `hold` learns the new deadline.
    pub(super) async fn extend(&self, held: &Held, hold: &Hold) -> Result<(), LedgerError> {
        let asked = Instant::now();
        let until = crate::domain::clock::add(self.clock.now(), self.config.lease);
        match held {
            Held::Render(lease) => self.ledger.leases().extend_job(lease, until).await?,
            Held::Send(lease) => self.ledger.leases().extend_delivery(lease, until).await?,
        }
        hold.extended(asked);
        Ok(())
    }

    /// Confirms, before a send starts, that its lease is still held with a third of it to
    /// spare: from `hold` when it knows, else by extending it in the ledger (a fenced write,
    /// refused if the lease ran out and was rescued). An error means: do not send.
    pub(super) async fn confirm_send(
        &self,
        lease: &DeliveryLease,
        hold: &Hold,
    ) -> Result<(), LedgerError> {
        if hold.left() >= self.lease_third() {
            return Ok(());
        }
        // Rare (the extender is late or the node was paused): the lease is cloned only here.
        self.extend(&Held::Send(lease.clone()), hold).await
    }

    /// Runs `work` while extending its lease every third of the lease length; if the lease is
    /// lost (rescued and maybe taken by another worker) the work is dropped.
    pub(super) async fn with_lease(
        self: Arc<Self>,
        held: Held,
        hold: Arc<Hold>,
        work: impl std::future::Future<Output = ()>,
    ) {
        let every = self.lease_third();
        let extender = async {
            loop {
                tokio::time::sleep(every).await;
                match self.extend(&held, &hold).await {
                    Ok(()) => {}
                    Err(LedgerError::LeaseLost { .. }) => return,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not extend a lease; will try again")
                    }
                }
            }
        };
        tokio::select! {
            _ = work => {}
            _ = extender => tracing::warn!(
                key = %held.shown(),
                "lease lost to the rescuer: dropping this work item"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_hold_runs_out_with_monotonic_time_and_an_extension_renews_it() {
        let hold = Hold::new(Instant::now(), Duration::from_secs(10));
        assert_eq!(hold.left(), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(hold.left(), Duration::from_secs(6));
        hold.extended(Instant::now());
        assert_eq!(hold.left(), Duration::from_secs(10));
        // An extension asked for earlier than the last one granted cannot shorten the hold.
        hold.extended(Instant::now() - Duration::from_secs(5));
        assert_eq!(hold.left(), Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(25)).await;
        assert_eq!(hold.left(), Duration::ZERO);
    }
}
