//! dawnpost runs nightly scheduled reports: the scheduler inserts one job per report and local
//! date, a bounded worker pool renders each job once into an immutable artifact and delivers it
//! to every destination, retrying what can succeed and quarantining what cannot, and a retention
//! sweeper deletes finished work only.
//!
//! Each folder of `src/` is a layer, and uses only the layers before it. ARCHITECTURE.md's code
//! map lists them in that order with what each owns; `tests/it/layering.rs` reads the map and
//! checks the imports against it.
//!
//! Time is injected through [`domain::clock::Clock`]; domain code never reads the system clock.
//! The binary's clock ([`domain::clock::LedgerClock`]) keeps a shared ledger's time.

pub mod cli;
pub mod config;
pub mod delivery;
pub mod domain;
pub mod ledger;
pub mod node;
pub mod pool;
pub mod report;
pub mod runtime;
pub mod server;
pub mod services;
pub mod views;

pub use config::Config;
pub use domain::clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use domain::duration::Span;
pub use domain::keys::DestinationKind;
pub use domain::keys::{JobKey, ReportId};
pub use ledger::Ledger;
