//! The scheduler tick: turns due fires ([`crate::report::schedule`]) into job rows, and nothing else.
//!
//! The daemon's heartbeat is a UTC tokio-cron-scheduler job (every minute, no timezone: its own
//! timezone jobs drift an hour after a DST change). Each beat inserts every fire due since the
//! report's last recorded tick, computed by the same function as `plan`, and no older than
//! `catch_up`, so a process that was down at 06:30 enqueues the missed report when it starts.
//! A report never ticked before catches up `catch_up` back. Inserts are idempotent on the job
//! key, so any number of schedulers on one ledger insert each key once.
//!
//! A report's tick is recorded only when the tick found fires of it (due or missed): until
//! then nothing lies between its recorded tick and now, so the range a later tick looks at
//! holds the same fires either way. A minute's tick over 10,000 daily reports so writes the
//! handful that fired, not 10,000 rows.

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::Report;
use crate::domain::clock::SharedClock;
use crate::domain::duration::Span;
use crate::ledger::{JobOrigin, Ledger, LedgerError, NewJob};
use crate::report::catalog::Catalog;

/// The UTC heartbeat: second 0 of every minute.
pub(crate) const HEARTBEAT: &str = "0 * * * * *";

/// What one tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TickCounts {
    /// Fires due in the catch-up horizon.
    pub due: usize,
    /// Jobs this tick inserted (a key another scheduler inserted first is not counted).
    pub inserted: usize,
    /// Fires older than `catch_up` that were skipped.
    pub missed: usize,
}

/// The scheduler service.
#[derive(Debug, Clone)]
pub struct SchedulerTick {
    ledger: Ledger,
    reports: Catalog,
    clock: SharedClock,
    catch_up: Span,
    /// This node's pool, nudged when a tick inserts jobs.
    nudge: Option<crate::runtime::periodic::Nudge>,
}

/// The heartbeat could not be scheduled.
#[derive(Debug, thiserror::Error)]
#[error("the scheduler's heartbeat: {0}")]
pub struct TickError(#[from] tokio_cron_scheduler::JobSchedulerError);

impl SchedulerTick {
    pub fn new(ledger: Ledger, reports: Catalog, clock: SharedClock, catch_up: Span) -> Self {
        SchedulerTick {
            ledger,
            reports,
            clock,
            catch_up,
            nudge: None,
        }
    }

    /// Nudges `nudge` (this node's pool) whenever a tick inserts jobs: they start at once, not
    /// at the pool's next look.
    pub fn with_nudge(mut self, nudge: crate::runtime::periodic::Nudge) -> Self {
        self.nudge = Some(nudge);
        self
    }

    /// One tick at the clock's now: every report's last tick in one read, then the due jobs
    /// and the tick records of the reports that had fires, in one transaction.
    pub async fn run_once(&self) -> Result<TickCounts, LedgerError> {
        let now = self.clock.now();
        let horizon = crate::domain::clock::sub(now, self.catch_up.as_chrono());
        let last_ticks = self.ledger.ticks().last_of_all().await?;
        let mut counts = TickCounts::default();
        let mut jobs = Vec::new();
        let mut ticked: Vec<&str> = Vec::new();
        let reports = self.reports.current();
        refresh_calendars(&reports.list);
        for report in reports.list.iter() {
            // A report a reload added starts after it came into force.
            let last = last_ticks
                .get(report.id.as_str())
                .or_else(|| reports.added_at.get(report.id.as_str()))
                .copied();
            let after = last.map_or(horizon, |l| l.max(horizon));
            let mut fired = 0;
            if let Some(last) = last.filter(|l| *l < horizon) {
                fired += self.missed(report, last, horizon);
            }
            counts.missed += fired;
            let before = jobs.len();
            jobs.extend(
                crate::report::schedule::plan([report], after, now)
                    .into_iter()
                    .map(|fire| NewJob::of(&fire, fire.fire_at, JobOrigin::Schedule)),
            );
            fired += jobs.len() - before;
            if fired > 0 {
                ticked.push(report.id.as_str());
            }
        }
        counts.due = jobs.len();
        let inserted = self.ledger.ticks().tick(&jobs, &ticked, now).await?;
        for key in &inserted {
            tracing::debug!(job = %key, "enqueued");
        }
        counts.inserted = inserted.len();
        if let Some(nudge) = self.nudge.as_ref().filter(|_| counts.inserted > 0) {
            nudge.now();
        }
        // The other nodes' pools look at once too.
        if counts.inserted > 0
            && let Err(e) = self.ledger.signal_work().await
        {
            tracing::debug!(error = %e, "could not signal the tick's jobs to the other nodes");
        }
        Ok(counts)
    }

    /// Counts (and warns about) `report`'s fires in `[last, horizon)`: older than `catch_up`,
    /// they are not enqueued.
    fn missed(&self, report: &Report, last: DateTime<Utc>, horizon: DateTime<Utc>) -> usize {
        let missed = crate::report::schedule::plan([report], last, horizon);
        if let Some(first) = missed.first() {
            tracing::warn!(
                report = %report.id,
                missed = missed.len(),
                first = %first.fire_at,
                catch_up = %self.catch_up,
                "fires older than catch_up were not enqueued; use `backfill` to enqueue them"
            );
        }
        missed.len()
    }

    /// Ticks once at start (to catch up), then on every heartbeat until `cancel`. Fails only
    /// when its heartbeat cannot be scheduled; a failed tick is logged and the next one retries.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), TickError> {
        use tokio_cron_scheduler::{Job, JobScheduler};

        let (beat_tx, mut beats) = tokio::sync::mpsc::channel::<()>(1);
        let mut scheduler = JobScheduler::new().await?;
        scheduler
            .add(Job::new_async(HEARTBEAT, move |_id, _sched| {
                let beat_tx = beat_tx.clone();
                Box::pin(async move {
                    // A beat while the previous tick still runs is dropped: the next tick covers it.
                    let _ = beat_tx.try_send(());
                })
            })?)
            .await?;
        scheduler.start().await?;
        self.tick_logged().await;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                beat = beats.recv() => match beat {
                    Some(()) => self.tick_logged().await,
                    None => break,
                },
            }
        }
        scheduler.shutdown().await?;
        Ok(())
    }

    async fn tick_logged(&self) {
        match self.run_once().await {
            Ok(c) if c.inserted > 0 || c.missed > 0 => {
                tracing::info!(
                    inserted = c.inserted,
                    due = c.due,
                    missed = c.missed,
                    "scheduler tick"
                )
            }
            Ok(_) => tracing::debug!("scheduler tick: nothing due"),
            Err(e) => tracing::error!(error = %e, "scheduler tick failed; the next tick retries"),
        }
    }

    /// The last instant the tick covered for `report`.
    pub async fn last_tick(&self, report: &str) -> Result<Option<DateTime<Utc>>, LedgerError> {
        self.ledger.ticks().last(report).await
    }
}

/// Reads each calendar file the reports name again if it changed (each file once, however
/// many reports share it): an edit takes effect at this tick; one that does not validate is
/// logged and the previous calendar stays in force.
fn refresh_calendars(reports: &[std::sync::Arc<Report>]) {
    let mut seen = std::collections::HashSet::new();
    for rc in reports.iter().filter_map(|r| r.calendar.as_ref()) {
        if !seen.insert(std::sync::Arc::as_ptr(&rc.cell)) {
            continue;
        }
        if let Some(problems) = rc.cell.refresh() {
            tracing::error!(
                calendar = %rc.cell.path().display(),
                problems = %problems,
                "the calendar file does not validate; the previous calendar stays in force"
            );
        }
    }
}
