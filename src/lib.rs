//! dawnpost runs nightly scheduled reports: the scheduler inserts one job per report and local
//! date, a bounded worker pool renders each job once into an immutable artifact and delivers it
//! to every destination, retrying what can succeed and quarantining what cannot, and a retention
//! sweeper deletes finished work only.
//!
//! The flow, top-down:
//! - [`config`]: the validated configuration (`dawnpost.toml`, `reports.toml`, `retention.toml`).
//! - [`schedule`]: fire instants in each report's timezone, job keys, windows, the tick service.
//! - [`ledger`]: jobs, deliveries, attempts and redrives on SQLite or PostgreSQL; every state
//!   transition, with fenced leases.
//! - [`pool`]: the bounded worker pool: lease, then [`source`] → [`render`] → [`artifact`]
//!   (once per job), then [`deliver`] per destination, classified and retried by [`retry`];
//!   webhooks are signed by [`signing`].
//!
//! Time is injected through [`clock::Clock`]; domain code never reads the system clock.

pub mod artifact;
pub mod cli;
pub mod clock;
pub mod config;
pub mod cron;
pub mod daemon;
pub mod deliver;
pub mod duration;
pub mod history;
pub mod keys;
pub mod ledger;
pub mod logging;
pub mod metrics;
pub mod outcome;
pub mod pool;
pub mod redact;
pub mod render;
pub mod retry;
pub mod runner;
pub mod schedule;
pub mod server;
pub mod signing;
pub mod source;
pub mod supervisor;
pub mod sweeper;
pub mod window;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use config::Config;
pub use duration::Span;
pub use keys::{DestinationKind, JobKey, ReportId};
pub use ledger::Ledger;
