//! Whether this node leads the live nodes sharing its ledger. The leader runs the ledger's
//! housekeeping (the lease rescuer, the runbook driver's looks) at their pace; every other node
//! only every [`FOLLOWER_ROUNDS`] rounds, a backstop should the leader stall. The registry's
//! heartbeats set it (`services::registry`); the pool, the rescuer and the runbook driver read it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A node that does not lead takes one housekeeping round in this many.
pub(crate) const FOLLOWER_ROUNDS: u32 = 6;

/// Whether this node leads the live nodes, and how many they are, as its last heartbeat saw
/// them. A node leads, alone, until a heartbeat says otherwise: one that cannot reach the
/// registry keeps its housekeeping. Clones share what the heartbeats set.
#[derive(Debug, Clone)]
pub struct Leadership {
    leads: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
}

impl Default for Leadership {
    fn default() -> Leadership {
        Leadership {
            leads: Arc::new(AtomicBool::new(true)),
            live: Arc::new(AtomicUsize::new(1)),
        }
    }
}

impl Leadership {
    pub fn leads(&self) -> bool {
        self.leads.load(Ordering::Relaxed)
    }

    /// How many live nodes share the ledger, this one among them (at least 1).
    pub fn live_nodes(&self) -> usize {
        self.live.load(Ordering::Relaxed).max(1)
    }

    /// What a heartbeat saw: whether this node leads, and how many live nodes there are.
    pub fn set(&self, leads: bool, live: usize) {
        self.leads.store(leads, Ordering::Relaxed);
        self.live.store(live, Ordering::Relaxed);
    }

    /// Whether housekeeping round `round` (counted from 0) is this node's to take: every
    /// round while it leads, else one in [`FOLLOWER_ROUNDS`] (the first among them).
    pub fn takes(&self, round: u32) -> bool {
        self.leads() || round.is_multiple_of(FOLLOWER_ROUNDS)
    }
}
