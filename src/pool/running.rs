//! The pool's running work: the slots that bound it, the lease each item holds, and the
//! tasks, so that a drain can return what did not finish.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use super::{Hold, Pipeline, PoolError, completer};
use crate::domain::keys::Key;
use crate::ledger::{DeliveryLease, JobLease};

/// A lease a work item holds: a render's or a send's.
#[derive(Debug, Clone)]
pub(super) enum Held {
    Render(JobLease),
    Send(DeliveryLease),
}

impl Held {
    /// The held key as a log line may print it.
    pub(super) fn shown(&self) -> String {
        match self {
            Held::Render(l) => l.key().shown(),
            Held::Send(l) => l.key().shown(),
        }
    }

    /// The held key in full: the work item's identity among the running ones.
    fn id(&self) -> String {
        match self {
            Held::Render(l) => l.key().to_string(),
            Held::Send(l) => l.key().to_string(),
        }
    }
}

pub(super) type Inflight = Arc<Mutex<HashMap<String, Held>>>;

/// A work item's place among the `concurrency` slots, freed when dropped or by
/// [`Slot::free`]: a delivery frees it once its outcome is handed to the completer, so new work
/// starts while the outcome waits for its commit.
pub(super) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    pub(super) freed: Arc<Notify>,
}

impl Slot {
    pub(super) fn free(&mut self) {
        if self.permit.take().is_some() {
            self.freed.notify_one();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.free();
    }
}

/// The pool's running work: slots, the tasks by lease, and the way to the completer. A task
/// may outlive its slot (see [`Slot`]); its lease stays registered until the task ends.
pub(super) struct Running {
    pub(super) slots: Arc<Semaphore>,
    /// Told whenever a slot frees.
    pub(super) freed: Arc<Notify>,
    /// Held leases by key, so a drain can release what did not finish.
    pub(super) inflight: Inflight,
    pub(super) tasks: JoinSet<()>,
    pub(super) completions: mpsc::Sender<completer::Completion>,
}

impl Running {
    /// Spawns one work item in a slot, registered by its lease so a drain can release it;
    /// `hold` tracks the lease while it runs.
    pub(super) fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(
        &mut self,
        pipeline: &Arc<Pipeline>,
        held: Held,
        hold: Arc<Hold>,
        work: impl FnOnce(Slot, Arc<Hold>) -> F,
    ) -> Result<(), PoolError> {
        let slot = Slot {
            permit: Some(self.slots.clone().try_acquire_owned()?),
            freed: self.freed.clone(),
        };
        // Boxed where it is made: a work item's state machine is ~12 KB (a render or an HTTP
        // send in flight), and moved by value it was copied at each step on its way into the
        // task (this closure, `with_lease`, its `select!`): memmove's share of the process's
        // samples fell from 6.0% to 5.0% (perf, `cargo bench --bench pipeline`).
        let work = Box::pin(work(slot, hold.clone()));
        let me = pipeline.clone();
        let registry = self.inflight.clone();
        let key = held.id();
        registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), held.clone());
        pipeline.metrics.active_workers.inc();
        // Boxed too, so the task holds a pointer to the work, not another copy of the wrapper.
        self.tasks.spawn(Box::pin(async move {
            me.clone().with_lease(held, hold, work).await;
            me.metrics.active_workers.dec();
            registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }));
        Ok(())
    }

    /// Collects finished tasks without waiting.
    pub(super) fn reap(&mut self) {
        while let Some(done) = self.tasks.try_join_next() {
            Running::report(done);
        }
    }

    pub(super) fn report(done: Result<(), tokio::task::JoinError>) {
        if let Err(e) = done {
            tracing::error!(error = %e, "a work item panicked; its lease will be rescued");
        }
    }
}
