//! The pool's local queue: work claimed ahead of free slots, so that one claim round (one
//! commit) serves many items instead of the few slots that happen to be free. Each queued item
//! holds its lease from the claim; it starts when a slot frees, oldest first.
//!
//! How much is claimed ahead follows what the pool starts of its claims: about one second of
//! claimed work (what it started of it in the last second), at least `concurrency` and at most
//! [`AHEAD_PER_SLOT`] × `concurrency`. Work that arrived leased from the node's own renders
//! needed no claim and is not counted: a render's deliveries would otherwise shrink the claims
//! that feed the renders, and a node doing a third of the work (three nodes sharing it) would
//! claim in a third of the size, three times as many rounds (commits) for the same jobs. A
//! slow receiver therefore never leaves much waiting under a lease, and an item that did wait
//! a third of its lease in the queue goes back to the shared queue unstarted (no attempt
//! counted): the queue never holds work on leases it would have to keep extending. At shutdown
//! whatever is still queued goes back the same way.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::hold::Hold;
use super::send::JobArtifact;
use crate::ledger::{LeasedDelivery, LeasedJob};

/// The most work claimed ahead, in multiples of `concurrency`.
pub(super) const AHEAD_PER_SLOT: usize = 16;

/// One claimed item waiting for a slot, with how long this node knows it holds the lease.
pub(super) struct Queued<W = ClaimedWork> {
    pub(super) work: W,
    pub(super) hold: Arc<Hold>,
}

/// A claimed render, or a claimed send with its job's artifact (read once for the job's
/// deliveries claimed together).
pub(super) enum ClaimedWork {
    Render(LeasedJob),
    Send(LeasedDelivery, Arc<JobArtifact>),
}

/// Work that came leased without a claim round — the deliveries a render created, leased to
/// this node by the commit that recorded it — until the pool's loop queues it.
#[derive(Default)]
pub(super) struct Arrivals(std::sync::Mutex<Vec<Queued>>);

impl Arrivals {
    pub(super) fn push(&self, items: impl IntoIterator<Item = Queued>) {
        let mut arrived = self.0.lock().unwrap_or_else(|e| e.into_inner());
        arrived.extend(items);
    }

    pub(super) fn take(&self) -> Vec<Queued> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl std::fmt::Debug for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |a| a.len());
        write!(f, "Arrivals({n})")
    }
}

/// Claimed work not started yet, oldest first, and the pace that sizes it.
pub(super) struct Queue<W = ClaimedWork> {
    /// Each item with the instant it entered the queue.
    items: VecDeque<(Instant, Queued<W>)>,
    /// Work that arrived leased from the node's own renders (see [`Arrivals`]): it starts
    /// before claimed work, since its job was claimed earlier and waits for it to finish.
    first: VecDeque<(Instant, Queued<W>)>,
    concurrency: usize,
    /// Starts of claimed work in the current second and in the one before it.
    window: (Instant, usize, usize),
}

impl<W> Queue<W> {
    pub(super) fn new(concurrency: usize) -> Queue<W> {
        Queue {
            items: VecDeque::new(),
            first: VecDeque::new(),
            concurrency: concurrency.max(1),
            window: (Instant::now(), 0, 0),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len() + self.first.len()
    }

    /// Nothing waits to start: a claim asked now is urgent (see `Completion::Claim`).
    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty() && self.first.is_empty()
    }

    /// How many claimed items to hold queued: about a second of their starts, within
    /// `[concurrency, AHEAD_PER_SLOT × concurrency]`.
    pub(super) fn target(&mut self) -> usize {
        self.roll();
        let pace = self.window.1.max(self.window.2);
        pace.clamp(self.concurrency, AHEAD_PER_SLOT * self.concurrency)
    }

    /// How many to claim now: none while more than half the target waits (so a claim round
    /// takes at least half a target), else what fills the target. Arrivals are not counted.
    pub(super) fn wanted(&mut self) -> usize {
        let target = self.target();
        match self.items.len() {
            n if n > target / 2 => 0,
            n => target - n,
        }
    }

    pub(super) fn extend(&mut self, claimed: impl IntoIterator<Item = Queued<W>>) {
        let now = Instant::now();
        self.items.extend(claimed.into_iter().map(|q| (now, q)));
    }

    /// Work that arrived leased: it goes before what was claimed.
    pub(super) fn extend_first(&mut self, arrived: impl IntoIterator<Item = Queued<W>>) {
        let now = Instant::now();
        self.first.extend(arrived.into_iter().map(|q| (now, q)));
    }

    /// The oldest arrival, else the oldest claimed item (counted as started); `true` with an
    /// arrival, which has yet to pass admission (a claim's items passed it when claimed).
    pub(super) fn next(&mut self) -> Option<(Queued<W>, bool)> {
        if let Some((_, item)) = self.first.pop_front() {
            return Some((item, true));
        }
        let (_, item) = self.items.pop_front()?;
        self.roll();
        self.window.2 += 1;
        Some((item, false))
    }

    /// The items that waited a third of their lease (`lease`) in the queue: they go back.
    pub(super) fn stale(&mut self, lease: Duration) -> Vec<Queued<W>> {
        let now = Instant::now();
        let mut out = Vec::new();
        for items in [&mut self.first, &mut self.items] {
            while let Some((entered, _)) = items.front()
                && now.saturating_duration_since(*entered) >= lease / 3
            {
                out.extend(items.pop_front().map(|(_, q)| q));
            }
        }
        out
    }

    /// Everything still queued (at shutdown).
    pub(super) fn take_all(&mut self) -> Vec<Queued<W>> {
        let first = self.first.drain(..);
        first.chain(self.items.drain(..)).map(|(_, q)| q).collect()
    }

    /// Moves the one-second window on.
    fn roll(&mut self) {
        let now = Instant::now();
        let (start, before, current) = self.window;
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= Duration::from_secs(2) {
            self.window = (now, 0, 0);
        } else if elapsed >= Duration::from_secs(1) {
            self.window = (start + Duration::from_secs(1), current, 0);
        } else {
            self.window = (start, before, current);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(n: usize, hold: &Arc<Hold>) -> impl Iterator<Item = Queued<usize>> + '_ {
        (0..n).map(|work| Queued {
            work,
            hold: hold.clone(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_holds_about_a_second_of_starts_within_its_bounds() {
        let lease = Duration::from_secs(300);
        let mut q = Queue::new(2);
        // Idle: one slot-full of work ahead, claimed when the queue is at most half full.
        assert_eq!(q.target(), 2);
        assert_eq!(q.wanted(), 2);
        let hold = Arc::new(Hold::new(Instant::now(), lease));
        q.extend(queued(100, &hold));
        assert_eq!(q.wanted(), 0);
        // 20 starts within a second: the next second's target is 20.
        for _ in 0..20 {
            assert!(q.next().is_some());
        }
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert_eq!(q.target(), 20);
        // 40 more: the target is 40, capped at AHEAD_PER_SLOT × 2 = 32.
        for _ in 0..40 {
            assert!(q.next().is_some());
        }
        assert_eq!(q.target(), 2 * AHEAD_PER_SLOT);
        // 40 still queued: more than half the target, nothing claimed.
        assert_eq!(q.wanted(), 0);
        for _ in 0..25 {
            q.next();
        }
        assert_eq!(q.len(), 15);
        assert_eq!(q.wanted(), 32 - 15);
        // Two quiet seconds: back to one slot-full.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(q.target(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_waited_a_third_of_its_lease_goes_back_oldest_first() {
        let lease = Duration::from_secs(300);
        let mut q = Queue::new(2);
        let old = Arc::new(Hold::new(Instant::now(), lease));
        q.extend(queued(1, &old));
        tokio::time::advance(Duration::from_secs(60)).await;
        let newer = Arc::new(Hold::new(Instant::now(), lease));
        q.extend(queued(2, &newer));
        assert!(
            q.stale(lease).is_empty(),
            "a minute is less than a third of five"
        );
        tokio::time::advance(Duration::from_secs(45)).await;
        assert_eq!(q.stale(lease).len(), 1, "the oldest waited 105 s");
        assert_eq!(q.len(), 2);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(q.stale(lease).len(), 2);
        assert!(q.is_empty());
        assert!(q.take_all().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn what_arrived_leased_starts_before_what_was_claimed() {
        let lease = Duration::from_secs(300);
        let mut q = Queue::new(2);
        let hold = Arc::new(Hold::new(Instant::now(), lease));
        q.extend(queued(3, &hold));
        q.extend_first((10..12).map(|work| Queued {
            work,
            hold: hold.clone(),
        }));
        assert_eq!(
            q.wanted(),
            0,
            "three claimed items wait: more than half of two"
        );
        let order: Vec<(usize, bool)> =
            std::iter::from_fn(|| q.next().map(|(q, arrival)| (q.work, arrival))).collect();
        assert_eq!(
            order,
            [(10, true), (11, true), (0, false), (1, false), (2, false)],
            "arrivals first, and said to be arrivals (they pass admission when they start)"
        );
        // Arrivals needed no claim: they neither fill what a claim tops up nor set its pace.
        tokio::time::advance(Duration::from_millis(1100)).await;
        q.extend_first(queued(40, &hold));
        assert_eq!(q.target(), 3, "three claimed starts in the last second");
        assert_eq!(q.wanted(), 3, "forty arrivals queued, no claimed item");
        while q.next().is_some() {}
        assert_eq!(q.target(), 3, "the arrivals' starts set no pace");
        q.extend_first(queued(1, &hold));
        tokio::time::advance(lease / 3).await;
        assert_eq!(q.stale(lease).len(), 1, "an arrival goes back stale too");
        q.extend_first(queued(2, &hold));
        assert_eq!(q.take_all().len(), 2);
    }
}
