//! This node in the ledger's registry of nodes: registered when the daemon starts, a heartbeat
//! every `services.heartbeat_every`, removed on a clean shutdown. A node is live while its last
//! heartbeat is at most three intervals old; a row silent for a day is deleted by any node.

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::ledger::{Ledger, LedgerError, Node};

/// How long a silent node's row is kept.
const FORGET_AFTER: chrono::Duration = chrono::Duration::days(1);

/// How long a node counts as live after its last heartbeat: three heartbeat intervals.
pub fn live_for(config: &Config) -> chrono::Duration {
    config.settings.services.heartbeat_every.as_chrono() * 3
}

/// The earliest heartbeat of a live node at `now`.
pub fn live_since(config: &Config, now: DateTime<Utc>) -> DateTime<Utc> {
    crate::clock::sub(now, live_for(config))
}

/// The daemon's registry service.
#[derive(Debug, Clone)]
pub struct Registry {
    ledger: Ledger,
    clock: SharedClock,
    node: Node,
    every: std::time::Duration,
    live_for: chrono::Duration,
}

impl Registry {
    /// This node (`id`, its leases' owner) as it registers.
    pub fn new(config: &Config, ledger: Ledger, clock: SharedClock, id: String) -> Registry {
        let now = clock.now();
        let node = Node {
            id,
            version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version: ledger.schema_known(),
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
        }
    }

    /// One heartbeat, the rows of nodes silent for a day deleted, and the newest format a write
    /// may use brought up to the live nodes, in one transaction (one commit on a shared ledger).
    pub async fn beat(&self) -> Result<(), LedgerError> {
        let now = self.clock.now();
        let node = Node {
            heartbeat_at: now,
            ..self.node.clone()
        };
        let forget_before = crate::clock::sub(now, FORGET_AFTER);
        let live_since = crate::clock::sub(now, self.live_for);
        self.ledger
            .node_beat(&node, forget_before, live_since)
            .await?;
        Ok(())
    }

    /// Heartbeats until `cancel`, then leaves the registry.
    pub async fn run(&self, cancel: CancellationToken) {
        let start = crate::periodic::Start::Now;
        crate::periodic::every(self.every, start, &cancel, || async {
            if let Err(e) = self.beat().await {
                tracing::warn!(error = %e, "could not record this node's heartbeat; retrying");
            }
        })
        .await;
        if let Err(e) = self.ledger.node_leave(&self.node.id).await {
            tracing::warn!(error = %e, "could not remove this node from the registry");
        }
    }
}
