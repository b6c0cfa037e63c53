//! dawnpost runs nightly scheduled reports: the scheduler inserts one job per report and local
//! date, a bounded worker pool renders each job once into an immutable artifact and delivers it
//! to every destination, retrying what can succeed and quarantining what cannot, and a retention
//! sweeper deletes finished work only.
//!
//! The modules, bottom-up; each uses only those above it (ARCHITECTURE.md is the map of the
//! code; `tests/it/layering.rs` checks the order):
//! - names, time and words: [`keys`] (report id, job key, delivery key), [`duration`],
//!   [`clock`] (the injected clock), [`window`] (a job's data window), [`cron`], [`outcome`]
//!   (how an attempt ended), [`redact`], [`logging`], [`metrics`], [`tls`] (trust for
//!   outgoing TLS), [`words`] (an error and its causes, each said once).
//! - [`config`]: the validated configuration (`dawnpost.toml`, `reports.toml`,
//!   `retention.toml`), plain data.
//! - [`schedule`] (fires, jobs, windows), [`render`] (templates), [`catalog`] (the reports in
//!   force, replaced at a reload), [`source`] (a report's
//!   data), [`readiness`] (whether it is there yet), [`artifact`] (the immutable store),
//!   [`retry`] (the policy), [`signing`], [`links`] (signed links to an artifact),
//!   [`deliver`] (email and webhook transports).
//! - [`ledger`]: jobs, deliveries, attempts and redrives on SQLite or PostgreSQL; every state
//!   transition, fenced by typed leases.
//! - [`tick`] (due fires into jobs), [`timekeeper`] (the node's clock kept on a shared
//!   ledger's), [`pool`] (lease → source → render → artifact once per job, then a send per
//!   destination, classified and retried; the rescuer), [`sweeper`] (retention), [`history`]
//!   (`show`, `dlq`), [`runbook`], [`preview`], [`reload`] (the reports again on SIGHUP);
//!   then [`supervisor`] and [`server`]
//!   (ingestion, the ops API, health, metrics).
//! - [`daemon`] (`run`) and [`runner`] (`run --once`), which build the pool the same way.
//! - [`cli`]: one function per command.
//!
//! Time is injected through [`clock::Clock`]; domain code never reads the system clock. The
//! binary's clock ([`clock::LedgerClock`]) keeps a shared ledger's time.

pub mod api;
pub mod artifact;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod cron;
pub mod daemon;
pub mod data_path;
pub mod deliver;
pub mod duration;
pub mod history;
pub mod keys;
pub mod ledger;
pub mod links;
pub mod logging;
pub mod metrics;
pub mod notice;
pub mod notifier;
pub mod outcome;
pub mod periodic;
pub mod pool;
pub mod preview;
pub mod readiness;
pub mod redact;
pub mod registry;
pub mod reload;
pub mod render;
pub mod retry;
pub mod runbook;
pub mod runner;
pub mod schedule;
pub mod server;
pub mod signing;
pub mod source;
pub mod supervisor;
pub mod sweeper;
pub mod tick;
pub mod timekeeper;
pub mod tls;
pub mod wake;
pub mod window;
pub mod words;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use config::Config;
pub use duration::Span;
pub use keys::{DestinationKind, JobKey, ReportId};
pub use ledger::Ledger;
