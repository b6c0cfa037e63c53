//! `run --once`: enqueue every report for a date, work until every job of that date is terminal
//! (waiting for scheduled retries up to `max_wait`), and summarise.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::clock::SharedClock;
use crate::domain::keys::{DeliveryKey, JobKey};
use crate::domain::outcome::ResponseClass;
use crate::ledger::{DeliveryState, JobOrigin, JobState, Ledger, NewJob};
use crate::pool::StatsSnapshot;
use crate::report::schedule::Fire;
use crate::views::history::Redactions;

/// Exit codes of `run --once` (README.md, "Command line").
pub(crate) const EXIT_DELIVERED: u8 = 0;
pub(crate) const EXIT_QUARANTINED: u8 = 3;
pub(crate) const EXIT_PENDING: u8 = 4;

#[derive(Debug, Clone)]
pub struct RunOnceOptions {
    /// The local date; default: today in each report's timezone.
    pub date: Option<NaiveDate>,
    /// How long to wait for scheduled retries. Default 10m.
    pub max_wait: Duration,
    /// Live progress on stderr.
    pub progress: bool,
    /// Metrics to record into (the HTTP server's, say); private ones when None.
    pub metrics: Option<Arc<crate::runtime::metrics::Metrics>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeliverySummary {
    pub key: DeliveryKey,
    pub state: DeliveryState,
    pub attempts: i64,
    pub last_class: Option<ResponseClass>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub key: JobKey,
    pub state: JobState,
    pub attempts: i64,
    pub enqueued: bool,
    pub last_error: Option<String>,
    pub deliveries: Vec<DeliverySummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunOnceSummary {
    pub outcome: &'static str,
    pub exit_code: u8,
    pub jobs: Vec<JobSummary>,
    pub stats: StatsSnapshot,
    /// What a person reading the summary must not see in full: recipient addresses and webhook
    /// URL paths, in delivery keys and errors alike.
    #[serde(skip)]
    pub redactions: Redactions,
}

/// Why `run --once` could not finish its run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("report {report}: {date} has no window in {timezone}")]
    NoWindow {
        report: String,
        date: NaiveDate,
        timezone: String,
    },
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    #[error(transparent)]
    Artifacts(#[from] crate::report::artifact::ArtifactError),
    #[error(transparent)]
    Pool(#[from] crate::pool::PoolError),
    #[error("the worker pool ended abnormally: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Enqueues and works the date's jobs; returns the summary.
pub async fn run_once(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    opts: &RunOnceOptions,
    cancel: CancellationToken,
) -> Result<RunOnceSummary, RunError> {
    let now = clock.now();
    let new_jobs = jobs_for(config, opts.date, now)?;
    let inserted: HashSet<JobKey> = ledger
        .jobs()
        .insert_many(&new_jobs, now)
        .await?
        .into_iter()
        .collect();
    let mut owned: Vec<JobKey> = new_jobs.iter().map(|j| j.key.clone()).collect();
    for k in &new_jobs {
        if !inserted.contains(&k.key) {
            tracing::info!(job = %k.key, "already in the ledger: not enqueued again");
            // A reissued revision of the date's job still to finish is the date's work too.
            let revisions = ledger.jobs().revisions(&k.key).await?;
            owned.extend(
                (revisions.into_iter())
                    .filter(|r| r.key.revision() > 1 && !r.state.is_terminal())
                    .map(|r| r.key),
            );
        }
    }
    let keys: Vec<&JobKey> = owned.iter().collect();

    let metrics = opts.metrics.clone().unwrap_or_default();
    let artifacts = crate::report::artifact::ArtifactStore::from_settings(
        &config.settings.artifacts,
        &config.root,
    )?;
    let (pipeline, rescuer) =
        super::pool_and_rescuer(config, (&ledger, &clock), &metrics, artifacts)?;
    let work = cancel.child_token();
    let pool = tokio::spawn(pipeline.clone().run(work.clone()));
    let rescue = tokio::spawn({
        let work = work.clone();
        async move { rescuer.run(work).await }
    });
    wait_until_finished(&ledger, &keys, &pipeline, opts, &cancel).await?;
    work.cancel();
    pool.await??;
    let _ = rescue.await;
    summarise(&ledger, &keys, &inserted, pipeline.stats.snapshot()).await
}

/// One job per report for `date` (default: today in each report's timezone).
fn jobs_for(
    config: &Config,
    date: Option<NaiveDate>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<NewJob>, RunError> {
    config
        .reports
        .iter()
        .map(|report| {
            let date = date.unwrap_or_else(|| now.with_timezone(&report.timezone()).date_naive());
            let fire = Fire::for_date(report, date).ok_or_else(|| RunError::NoWindow {
                report: report.id.to_string(),
                date,
                timezone: report.timezone().name().to_string(),
            })?;
            Ok(NewJob::of(&fire, now, JobOrigin::Run))
        })
        .collect()
}

/// Polls (one query a poll, however many jobs) until every job is terminal, `max_wait`
/// passes, or `cancel`; shows progress if asked.
async fn wait_until_finished(
    ledger: &Ledger,
    keys: &[&JobKey],
    pipeline: &crate::pool::Pipeline,
    opts: &RunOnceOptions,
    cancel: &CancellationToken,
) -> Result<(), RunError> {
    let bar = opts.progress.then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    let deadline = tokio::time::Instant::now() + opts.max_wait;
    loop {
        let jobs = ledger.jobs().get_many(keys).await?;
        let done = jobs.iter().filter(|j| j.state.is_terminal()).count();
        if let Some(bar) = &bar {
            let s = pipeline.stats.snapshot();
            bar.set_message(format!(
                "jobs {done}/{} finished · rendered {} · sent {} · retrying {} · quarantined {}",
                keys.len(),
                s.rendered,
                s.sent,
                s.retrying,
                s.quarantined
            ));
        }
        if done == keys.len() || cancel.is_cancelled() || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = cancel.cancelled() => {}
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(())
}

async fn summarise(
    ledger: &Ledger,
    keys: &[&JobKey],
    inserted: &HashSet<JobKey>,
    stats: StatsSnapshot,
) -> Result<RunOnceSummary, RunError> {
    // Two reads however many jobs: the jobs, then all their deliveries.
    let mut by_key: std::collections::HashMap<JobKey, crate::ledger::Job> = ledger
        .jobs()
        .get_many(keys)
        .await?
        .into_iter()
        .map(|j| (j.key.clone(), j))
        .collect();
    let all_deliveries = ledger.deliveries().list_many(keys).await?;
    let mut deliveries_of: std::collections::HashMap<&JobKey, Vec<DeliverySummary>> =
        std::collections::HashMap::new();
    for d in &all_deliveries {
        deliveries_of
            .entry(d.key.job())
            .or_default()
            .push(DeliverySummary {
                key: d.key.clone(),
                state: d.state,
                attempts: d.attempts,
                last_class: d.last_class,
                last_error: d.last_error.clone(),
            });
    }
    let mut jobs = Vec::with_capacity(keys.len());
    for &key in keys {
        let Some(job) = by_key.remove(key) else {
            continue;
        };
        jobs.push(JobSummary {
            enqueued: inserted.contains(key),
            deliveries: deliveries_of.remove(key).unwrap_or_default(),
            key: job.key,
            state: job.state,
            attempts: job.attempts,
            last_error: job.last_error,
        });
    }
    let quarantined = jobs.iter().any(|j| j.state == JobState::Quarantined);
    let pending = jobs.iter().any(|j| !j.state.is_terminal());
    let (outcome, exit_code) = if quarantined {
        ("quarantined", EXIT_QUARANTINED)
    } else if pending {
        ("pending", EXIT_PENDING)
    } else {
        ("delivered", EXIT_DELIVERED)
    };
    Ok(RunOnceSummary {
        outcome,
        exit_code,
        jobs,
        stats,
        redactions: Redactions::of(&all_deliveries),
    })
}
