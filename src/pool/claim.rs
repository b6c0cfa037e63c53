//! Claiming work into the pool's local queue, and starting it from there: a claim takes what
//! the queue wants in the completer's next commit (it rides the commit of the outcomes waiting
//! there, or makes one of its own when none are); a queued item starts when a slot frees, its
//! delivery's host checked against pauses and rate limits at that moment; what waited too long
//! or is left at shutdown goes back unstarted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use tokio::sync::oneshot;

use super::completer::{Born, ClaimAnswer, Completion};
use super::queue::{ClaimedWork, Queue, Queued};
use super::running::{Held, Running};
use super::send::JobArtifact;
use super::{Pipeline, PoolError, Stats, throttle, work};
use crate::domain::keys::JobKey;
use crate::ledger;
use crate::report::render::Rendered;

impl Pipeline {
    /// How long this idle pool waits before it asks again (see [`idle_wait`]).
    pub(super) fn idle_wait(&self, next_due: Option<DateTime<Utc>>) -> Duration {
        let most = match self.is_hearing() {
            true => super::HEARING_IDLE_MAX.max(self.config.idle_max),
            false => self.config.idle_max,
        };
        let bounds = (self.config.idle_poll, most);
        idle_wait(next_due, self.clock.now(), bounds)
    }

    /// Asks the completer to claim up to `n` items in its next commit (the claim rides the
    /// commit the outcomes need anyway; `urgent` when the queue is empty, so that commit comes
    /// at once); the answer comes on the returned receiver. `None` when the completer is gone.
    pub(super) async fn ask_claim(
        &self,
        (n, urgent): (u32, bool),
        completions: &tokio::sync::mpsc::Sender<Completion>,
    ) -> Option<oneshot::Receiver<ClaimAnswer>> {
        let (reply, answer) = oneshot::channel();
        let ask = Completion::Claim {
            limit: n,
            urgent,
            reply,
        };
        completions.send(ask).await.ok()?;
        Some(answer)
    }

    /// Turns what a claim took into queued work, once admitted. `asked`: the instant before the
    /// commit that took it (its leases run at least from then).
    pub(super) async fn queue_claimed(
        &self,
        claimed: ledger::Claimed,
        asked: tokio::time::Instant,
    ) -> Vec<Queued> {
        let count = claimed.len();
        if count > 0 {
            self.admission.admit(count as u32).await;
        }
        let hold = self.hold_from(asked);
        let ledger::Claimed {
            jobs, deliveries, ..
        } = claimed;
        let mut out = Vec::with_capacity(count);
        out.extend(jobs.into_iter().map(|leased| Queued {
            work: ClaimedWork::Render(leased),
            hold: hold.clone(),
        }));
        // The deliveries of one job claimed together read its artifact once.
        let mut shared: HashMap<JobKey, Arc<JobArtifact>> = HashMap::new();
        for leased in deliveries {
            let artifact = shared
                .entry(leased.delivery.key.job().clone())
                .or_insert_with(|| Arc::new(JobArtifact::new(leased.job.clone())))
                .clone();
            out.push(Queued {
                work: ClaimedWork::Send(leased, artifact),
                hold: hold.clone(),
            });
        }
        out
    }

    /// Takes the deliveries a recorded render created, leased to this node, as claimed work:
    /// the pool's loop queues them (see [`Pipeline::queue_arrivals`]). With the render's parts
    /// (`rendered`) they read no store: renders run ahead of the sends by a commit or more,
    /// further than the store's memory of recent artifacts reaches under load.
    pub(super) fn adopt(&self, born: Born, rendered: Option<Arc<Rendered>>) {
        let Born { deliveries, asked } = born;
        let Some(first) = deliveries.first() else {
            return;
        };
        let hold = self.hold_from(asked);
        let artifact = Arc::new(JobArtifact::with_rendered(first.job.clone(), rendered));
        self.arrivals
            .push(deliveries.into_iter().map(|leased| Queued {
                work: ClaimedWork::Send(leased, artifact.clone()),
                hold: hold.clone(),
            }));
        self.nudge.wake();
    }

    /// Queues what arrived leased (it passes admission when it starts).
    pub(super) fn queue_arrivals(&self, queue: &mut Queue) {
        queue.extend_first(self.arrivals.take());
    }

    /// Starts queued work in every free slot; how many it started (a send put off for a paused
    /// or rate-limited host counts: it left the queue).
    pub(super) async fn start_queued(
        self: &Arc<Self>,
        queue: &mut Queue,
        running: &mut Running,
    ) -> Result<usize, PoolError> {
        let mut started = 0;
        while running.slots.available_permits() > 0 {
            let Some((queued, arrival)) = queue.next() else {
                break;
            };
            // Arrivals are admitted one by one as they start, as a claim admits its items:
            // a node's `admission_per_second` bounds what it starts, however it got the lease.
            if arrival {
                self.admission.admit(1).await;
            }
            self.start(queued, running).await?;
            started += 1;
        }
        Ok(started)
    }

    async fn start(
        self: &Arc<Self>,
        queued: Queued,
        running: &mut Running,
    ) -> Result<(), PoolError> {
        let Queued { work, hold } = queued;
        // Claimed with its admission waited for, or queued a while: its lease is renewed before
        // it starts, so every item starts with at least two thirds of a lease, as a fresh claim
        // would (a render's first extension comes a third of a lease after its start).
        let fresh = self.lease_std().saturating_sub(self.lease_third());
        if hold.left() < fresh {
            let held = match &work {
                ClaimedWork::Render(l) => Held::Render(l.lease.clone()),
                ClaimedWork::Send(l, _) => Held::Send(l.lease.clone()),
            };
            match self.extend(&held, &hold).await {
                Ok(()) => {}
                Err(crate::ledger::LedgerError::LeaseLost { .. }) => {
                    lease_ran_out(&held);
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(key = %held.shown(), error = %e, "not started: its lease could not be renewed");
                    self.give_back(vec![Queued { work, hold }], "not renewed")
                        .await;
                    return Ok(());
                }
            }
        }
        let completions = running.completions.clone();
        let me = self.clone();
        match work {
            ClaimedWork::Render(leased) => {
                let lease = leased.lease.clone();
                running.spawn(self, Held::Render(lease), hold, |slot, _| async move {
                    // Its deliveries come back leased to this node and wake the loop
                    // (`Pipeline::adopt`).
                    work::render_job(&me, leased, completions, slot).await;
                })
            }
            ClaimedWork::Send(leased, artifact) => {
                let now = self.clock.now();
                let target = self.limits.target(&leased.delivery.key);
                if let throttle::Gate::WaitUntil(until) = self.throttle.gate(target.as_str(), now) {
                    self.defer(&leased, until, now, "a paused host").await;
                    return Ok(());
                }
                if let Some(until) = self.limits.take_or_defer(&target, now, &self.metrics) {
                    self.defer(&leased, until, now, "a rate-limited host").await;
                    return Ok(());
                }
                let lease = leased.lease.clone();
                running.spawn(self, Held::Send(lease), hold, |slot, hold| async move {
                    let item = work::SendItem {
                        leased,
                        artifact,
                        target,
                        hold,
                    };
                    work::deliver(&me, item, completions, slot).await;
                })
            }
        }
    }

    /// Puts a leased delivery back in the queue, ready at `until`, without an attempt.
    async fn defer(
        &self,
        leased: &crate::ledger::LeasedDelivery,
        until: chrono::DateTime<chrono::Utc>,
        now: chrono::DateTime<chrono::Utc>,
        why: &str,
    ) {
        Stats::bump(&self.stats.deferred);
        match self
            .ledger
            .deliveries()
            .defer(&leased.lease, until, now)
            .await
        {
            Ok(()) => self.nudge.at(until),
            Err(e) => tracing::warn!(error = %e, "could not defer a delivery to {why}"),
        }
    }

    /// Returns claimed work that never started to the shared queue, without counting an
    /// attempt: nothing of it reached anyone. A failure leaves it to the rescuer.
    pub(super) async fn give_back(&self, items: Vec<Queued>, why: &str) {
        let now = self.clock.now();
        for Queued { work, .. } in items {
            let (held, r) = match work {
                ClaimedWork::Render(l) => {
                    let r = self.ledger.jobs().release(&l.lease, now).await;
                    (Held::Render(l.lease), r)
                }
                ClaimedWork::Send(l, _) => {
                    let r = self.ledger.deliveries().release(&l.lease, now).await;
                    (Held::Send(l.lease), r)
                }
            };
            match r {
                Ok(()) => {
                    tracing::debug!(key = %held.shown(), "{why}: returned unstarted to the queue")
                }
                Err(crate::ledger::LedgerError::LeaseLost { .. }) => lease_ran_out(&held),
                Err(e) => {
                    tracing::warn!(key = %held.shown(), error = %e, "{why}: could not return it unstarted; the rescuer will")
                }
            }
        }
    }
}

/// Says that queued work was not started because its lease ran out while it waited (the node
/// was paused, or its ledger unreachable): whoever holds the lease now does the work.
fn lease_ran_out(held: &Held) {
    match held {
        Held::Send(_) => tracing::warn!(
            delivery = %held.shown(),
            "not sent: the lease ran out before the send started (was this node paused?); whoever holds it now sends it"
        ),
        Held::Render(_) => tracing::warn!(
            job = %held.shown(),
            "not rendered: the lease ran out before the render started (was this node paused?); whoever holds it now renders it"
        ),
    }
}

/// How long an idle pool waits at `now` before it asks again, the ledger's earliest due work at
/// `next_due` (`None`: none queued): until then, but at least `least` (`idle_poll`) and at most
/// `most` (`idle_max`). An idle node makes about one empty claim a second, not five; work due
/// already (another node holds it locked) is asked for again after `least`.
fn idle_wait(
    next_due: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    (least, most): (Duration, Duration),
) -> Duration {
    let most = most.max(least);
    let until = next_due.map(|at| (at - now).to_std().unwrap_or_default());
    until.map_or(most, |d| d.clamp(least, most))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_pool_waits_until_work_falls_due_within_its_bounds() {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let ms = Duration::from_millis;
        let bounds = (ms(200), ms(1000));
        let wait = |due_in_ms: Option<i64>| {
            let due = due_in_ms.map(|d| now + chrono::Duration::milliseconds(d));
            idle_wait(due, now, bounds)
        };
        assert_eq!(wait(None), ms(1000), "nothing queued: the longest wait");
        assert_eq!(wait(Some(450)), ms(450), "until the work falls due");
        assert_eq!(
            wait(Some(60_000)),
            ms(1000),
            "work made elsewhere is seen within it"
        );
        assert_eq!(wait(Some(50)), ms(200), "never sooner than idle_poll");
        assert_eq!(
            wait(Some(-5_000)),
            ms(200),
            "due already: held by another node"
        );
        assert_eq!(
            idle_wait(None, now, (ms(200), ms(10))),
            ms(200),
            "bounds crossed"
        );
    }
}
