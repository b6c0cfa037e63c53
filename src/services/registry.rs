//! This node in the ledger's registry of nodes: registered when the daemon starts, a heartbeat
//! every `services.heartbeat_every`, removed on a clean shutdown. A node is live while its last
//! heartbeat is at most three intervals old; a row silent for a day is deleted by any node.
//!
//! The live node that started first leads ([`Leadership`]): it runs the ledger's housekeeping
//! (the lease rescuer, the runbook driver's looks) at their pace, and every other node only
//! every [`FOLLOWER_ROUNDS`](crate::runtime::leadership::FOLLOWER_ROUNDS) rounds, a backstop should the leader stall. So a node added to
//! the cluster adds its heartbeat, not another copy of every look, to the shared server's
//! load. A heartbeat also reads the ledger's clock for the [`Timekeeper`] in its transaction.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::clock::SharedClock;
use crate::ledger::{Ledger, LedgerError, Node};
use crate::runtime::leadership::Leadership;
use crate::services::timekeeper::Timekeeper;

/// Whether node `id` leads `live` (the live nodes, the oldest start first): it is the first,
/// or missing from the list.
pub fn leads(live: &[Node], id: &str) -> bool {
    match crate::ledger::leader(live) {
        Some(first) => first.id == id || !live.iter().any(|n| n.id == id),
        None => true,
    }
}

/// How long a silent node's row is kept.
const FORGET_AFTER: chrono::Duration = chrono::Duration::days(1);

/// How long a node counts as live after its last heartbeat: three heartbeat intervals.
pub fn live_for(config: &Config) -> chrono::Duration {
    config.settings.services.heartbeat_every.as_chrono() * 3
}

/// The earliest heartbeat of a live node at `now`.
pub fn live_since(config: &Config, now: DateTime<Utc>) -> DateTime<Utc> {
    crate::domain::clock::sub(now, live_for(config))
}

/// The daemon's registry service.
#[derive(Debug, Clone)]
pub struct Registry {
    ledger: Ledger,
    clock: SharedClock,
    node: Node,
    every: std::time::Duration,
    live_for: chrono::Duration,
    leadership: Leadership,
    timekeeper: Option<Arc<Timekeeper>>,
}

impl Registry {
    /// This node (`id`, its leases' owner) as it registers.
    pub fn new(config: &Config, ledger: Ledger, clock: SharedClock, id: String) -> Registry {
        let now = clock.now();
        let node = Node {
            id,
            version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version: ledger.schema().known(),
            formats: crate::ledger::WORK_FORMAT.to_string(),
            started_at: now,
            heartbeat_at: now,
        };
        Registry {
            ledger,
            clock,
            node,
            every: config.settings.services.heartbeat_every.as_std(),
            live_for: live_for(config),
            leadership: Leadership::default(),
            timekeeper: None,
        }
    }

    /// Hands each heartbeat's reading of the ledger's clock to `timekeeper`.
    pub fn with_timekeeper(mut self, timekeeper: Arc<Timekeeper>) -> Registry {
        self.timekeeper = Some(timekeeper);
        self
    }

    /// Sets `leadership` (shared, say with the pool) from each heartbeat, in place of its own.
    pub(crate) fn with_leadership(mut self, leadership: Leadership) -> Registry {
        self.leadership = leadership;
        self
    }

    /// Whether this node leads, and how many nodes are live, as its heartbeats see it.
    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// One heartbeat, the ledger's clock read, the rows of nodes silent for a day deleted, and
    /// the newest format a write may use brought up to the live nodes, in one transaction (one
    /// commit on a shared ledger); then whether this node leads.
    pub async fn beat(&self) -> Result<(), LedgerError> {
        let now = self.clock.now();
        let node = Node {
            heartbeat_at: now,
            ..self.node.clone()
        };
        let forget_before = crate::domain::clock::sub(now, FORGET_AFTER);
        let live_since = crate::domain::clock::sub(now, self.live_for);
        let beat = self
            .ledger
            .nodes()
            .beat(&node, forget_before, live_since)
            .await?;
        if let (Some(keeper), Some(r)) = (&self.timekeeper, beat.server_time) {
            keeper.take(r.at, r.sent, r.answered);
        }
        let leads = leads(&beat.live, &self.node.id);
        if leads != self.leadership.leads() {
            tracing::info!(
                leads,
                "this node's part in the cluster's housekeeping changed"
            );
        }
        // This node counts even when its own row is not in the list (registered late).
        let others = beat.live.iter().filter(|n| n.id != self.node.id).count();
        self.leadership.set(leads, others + 1);
        Ok(())
    }

    /// Heartbeats until `cancel`, then leaves the registry.
    pub async fn run(&self, cancel: CancellationToken) {
        let start = crate::runtime::periodic::Start::Now;
        crate::runtime::periodic::every(self.every, start, &cancel, || async {
            if let Err(e) = self.beat().await {
                tracing::warn!(error = %e, "could not record this node's heartbeat; retrying");
            }
        })
        .await;
        if let Err(e) = self.ledger.nodes().leave(&self.node.id).await {
            tracing::warn!(error = %e, "could not remove this node from the registry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_takes_one_housekeeping_round_in_six_the_leader_every_one() {
        let leadership = Leadership::default();
        assert!((0..12).all(|round| leadership.takes(round)), "leads");
        leadership.set(false, 2);
        let taken: Vec<u32> = (0..13).filter(|&round| leadership.takes(round)).collect();
        assert_eq!(taken, [0, 6, 12]);
    }
}
