//! The node's background services, one per file, each a periodic loop over the ledger: the
//! scheduler tick, the lease rescuer, the retention sweeper, the runbook driver, the owners'
//! notifier, the node registry and its timekeeper, the reload of the reports, and the wake-ups
//! from other nodes' work signals.

pub mod bounces;
pub mod notifier;
pub mod registry;
pub mod reload;
pub mod rescuer;
pub mod runbook;
pub mod sweeper;
pub mod tick;
pub mod timekeeper;
pub mod wake;
