//! The ledger's face: its operations grouped by concern, each group a handle borrowed from the
//! [`Ledger`] (`ledger.jobs().get(&key)`, `ledger.deliveries().finish(…)`). A handle is a
//! reference, free to make and copy; its operations are written in the file of their concern
//! and see the ledger's connection and helpers through it.

use std::ops::Deref;

use super::Ledger;

macro_rules! handles {
    ($($(#[$doc:meta])* $method:ident -> $handle:ident;)*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy)]
            pub struct $handle<'l>(&'l Ledger);

            impl Deref for $handle<'_> {
                type Target = Ledger;
                fn deref(&self) -> &Ledger {
                    self.0
                }
            }
        )*

        impl Ledger {
            $(
                $(#[$doc])*
                pub fn $method(&self) -> $handle<'_> {
                    $handle(self)
                }
            )*
        }
    };
}

handles! {
    /// Jobs: inserted by a tick, rendered, settled, released, retried, skipped, quarantined,
    /// redriven, cancelled, reissued; read one by one and listed (`jobs.rs`, `reissue.rs`,
    /// `browse.rs`).
    jobs -> Jobs;
    /// Jobs waiting for their report's data: their probes and deadlines (`probes.rs`).
    waits -> Waits;
    /// The claims: jobs and deliveries leased, extended, abandoned, and expired leases rescued
    /// (`leases.rs`, `rescue.rs`, the leases a deploy waits for in `deploy.rs`).
    leases -> Leases;
    /// Deliveries and their attempts: finished, deferred, released, redriven; read, counted and
    /// listed (`deliveries.rs`, `browse.rs`).
    deliveries -> Deliveries;
    /// Finished work's retirement: terminal jobs found by page, their artifacts retired, their
    /// rows deleted (`retention.rs`).
    retention -> Retention;
    /// Bulk redrive runbooks: created, stepped, moved between states (`runbooks.rs`).
    runbooks -> Runbooks;
    /// Owners' notices: their messages and sends, claimed and recorded (`notices.rs`).
    notices -> Notices;
    /// The nodes sharing the ledger: heartbeats, departures, the formats they write (`nodes.rs`).
    nodes -> Nodes;
    /// Recipients: bounces and complaints, suppressions set and lifted, a delivery to a
    /// suppressed address ended (`recipients.rs`).
    recipients -> Recipients;
    /// What `send_when = "changed"` and `"alert"` decided for each job (`decisions.rs`).
    decisions -> Decisions;
    /// The scheduler's ticks: each report's last fire recorded with the jobs it made (`ticks.rs`).
    ticks -> Ticks;
    /// The schema: how this binary fits it, and migrations planned and applied (`schema.rs`,
    /// `deploy.rs`).
    schema -> Schema;
}
