//! Group commit of delivery outcomes. Work items hand their finished attempt to one task that
//! records everything queued since its last commit in one transaction, answers each item, then
//! settles the jobs those attempts finished in one statement. Alone, an attempt is recorded at
//! once; under load one commit carries as many attempts as are waiting, so the ledger's cost
//! per delivery falls as the load rises instead of capping it.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::clock::SharedClock;
use crate::ledger::{DeliveryNext, Finish, Ledger, LedgerError};

/// The most attempts one commit records.
pub(super) const MAX_BATCH: usize = 256;

/// How a finish was recorded: `LeaseLost` when the lease was no longer held, another error
/// when the whole batch failed (nothing of it was recorded).
pub(super) type Recorded = Result<(), Arc<LedgerError>>;

/// One finished attempt waiting to be recorded.
pub(super) struct Completion {
    pub finish: Finish,
    pub job_key: String,
    pub reply: oneshot::Sender<Recorded>,
}

/// Records completions until every sender is gone, then returns.
pub(super) async fn run(ledger: Ledger, clock: SharedClock, mut rx: mpsc::Receiver<Completion>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        record(&ledger, &clock, std::mem::take(&mut batch)).await;
    }
}

async fn record(ledger: &Ledger, clock: &SharedClock, batch: Vec<Completion>) {
    let (finishes, waiting): (Vec<Finish>, Vec<_>) = batch
        .into_iter()
        .map(|c| (c.finish, (c.job_key, c.reply)))
        .unzip();
    let results = match ledger.delivery_finish_many(&finishes).await {
        Ok(results) => results.into_iter().map(|r| r.map_err(Arc::new)).collect(),
        Err(e) => vec![Err(Arc::new(e)); finishes.len()],
    };
    let mut settle = BTreeSet::new();
    for ((finish, (job_key, reply)), result) in finishes.iter().zip(waiting).zip(results) {
        if result.is_ok() && !matches!(finish.next, DeliveryNext::Retry { .. }) {
            settle.insert(job_key);
        }
        // The item may have been dropped (its lease was lost meanwhile): nothing to tell.
        let _ = reply.send(result);
    }
    if settle.is_empty() {
        return;
    }
    let keys: Vec<&str> = settle.iter().map(String::as_str).collect();
    if let Err(e) = ledger.job_settle_many(&keys, clock.now()).await {
        tracing::warn!(jobs = keys.len(), error = %e, "could not settle jobs; the rescuer settles them later");
    }
}
