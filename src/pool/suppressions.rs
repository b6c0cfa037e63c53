//! The suppressions in force, as the pool checks each send against them: kept in memory and
//! looked at again when [`FRESH`] has passed — a cheap version read (the newest suppression
//! and how many are in force), the whole list read again only when that changed. A
//! suppression made anywhere (a bounce, an unsubscribe, an operator, another node) stops this
//! node's sends within [`FRESH`]; a send costs no ledger read.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ledger::{Ledger, LedgerError, Suppression};

/// How long a look at the suppressions stands.
pub(crate) const FRESH: Duration = Duration::from_secs(5);

/// The most suppressions held (more are read in pages of the newest first: this bounds memory).
const HELD: u32 = 1_000_000;

#[derive(Debug, Default)]
pub(super) struct Suppressions {
    state: tokio::sync::Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    looked: Option<Instant>,
    version: (i64, i64),
    by_address: HashMap<String, Vec<Suppression>>,
}

impl Suppressions {
    /// The suppression of `address` in force for `report` (its own, or one for every report).
    pub(super) async fn of(
        &self,
        ledger: &Ledger,
        address: &str,
        report: &str,
    ) -> Result<Option<Suppression>, LedgerError> {
        let mut held = self.state.lock().await;
        let stale = held.looked.is_none_or(|at| at.elapsed() >= FRESH);
        if stale {
            let version = ledger.recipients().version().await?;
            if held.looked.is_none() || version != held.version {
                let list = ledger.recipients().suppressions(false, HELD).await?;
                let mut by_address: HashMap<String, Vec<Suppression>> = HashMap::new();
                for s in list {
                    by_address.entry(s.address.clone()).or_default().push(s);
                }
                held.by_address = by_address;
                held.version = version;
            }
            held.looked = Some(Instant::now());
        }
        let found = (held.by_address.get(address).into_iter().flatten())
            .filter(|s| s.report.as_deref().is_none_or(|r| r == report))
            .min_by_key(|s| (s.report.is_some(), s.id));
        Ok(found.cloned())
    }
}
