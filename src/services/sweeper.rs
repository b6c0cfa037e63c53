//! The retention sweeper: deletes finished work only, under `retention.toml`, which it re-reads
//! at every sweep (README.md, "Retention").
//!
//! Only jobs in a terminal state (done, quarantined, cancelled) with no delivery pending or in
//! flight are considered, aged from the moment they became terminal; the ledger itself refuses
//! every retention write to any other job. Per job, in this order:
//! 1. **artifact** — delete everything under the job's prefix `<report>/<date>/` and record the
//!    artifact gone, in one step during which the ledger holds the job's row (a redrive waits,
//!    then renders again);
//! 2. **diagnostics** — clear the attempts' verbose transport diagnostics;
//! 3. **ledger** — purge the prefix again (what a crash left), then delete attempts,
//!    deliveries, redrives and the job, in one transaction, and only once the artifact is
//!    recorded gone.
//!
//! Each step is idempotent, so a sweep that dies between steps is finished by the next one.
//! Work goes in batches of `batch_size` jobs; a batch that outruns `batch_time_limit` ends the
//! sweep early and the next sweep carries on. An invalid policy file is reported (log and
//! [`Sweeper::reload_failures`]) and the previous valid policy stays in force: nothing is ever
//! deleted under a policy that did not validate.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigErrors, RetentionPolicy};
use crate::domain::clock::SharedClock;
use crate::domain::keys::JobKey;
use crate::domain::window::rfc3339;
use crate::ledger::{Job, Ledger, LedgerError};
use crate::report::artifact::ArtifactStore;
use crate::runtime::metrics::Metrics;

/// Sweeper settings.
#[derive(Debug, Clone)]
pub struct SweeperConfig {
    /// The policy file, re-read at every sweep.
    pub policy_file: PathBuf,
    /// Jobs per batch. Default [`SweeperConfig::BATCH_SIZE`].
    pub batch_size: u32,
    /// Time one batch may take before the sweep stops early. Default [`SweeperConfig::BATCH_TIME_LIMIT`].
    pub batch_time_limit: Duration,
}

impl SweeperConfig {
    pub(crate) const BATCH_SIZE: u32 = 200;
    pub(crate) const BATCH_TIME_LIMIT: Duration = Duration::from_secs(30);

    pub fn new(policy_file: PathBuf) -> SweeperConfig {
        SweeperConfig {
            policy_file,
            batch_size: Self::BATCH_SIZE,
            batch_time_limit: Self::BATCH_TIME_LIMIT,
        }
    }
}

/// What one sweep did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SweepCounts {
    pub jobs_examined: u64,
    pub artifacts_deleted: u64,
    pub artifact_bytes: u64,
    pub diagnostics_cleared: u64,
    pub diagnostics_rows: u64,
    pub diagnostics_bytes: u64,
    pub jobs_deleted: u64,
    pub ledger_rows: u64,
    pub batches: u64,
    /// A batch outran its time limit; the next sweep continues.
    pub stopped_early: bool,
}

/// One item a dry run lists.
#[derive(Debug, Clone, Serialize)]
pub struct SweepItem {
    pub job: JobKey,
    pub terminal_at: String,
    pub bytes: u64,
    pub rows: u64,
}

/// A dry run: what would go, per class.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepPlan {
    pub as_of: String,
    pub artifact: Vec<SweepItem>,
    pub diagnostics: Vec<SweepItem>,
    pub ledger: Vec<SweepItem>,
    pub counts: SweepCounts,
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// The sweeper service.
#[derive(Debug)]
pub struct Sweeper {
    ledger: Ledger,
    artifacts: ArtifactStore,
    clock: SharedClock,
    config: SweeperConfig,
    policy: Mutex<RetentionPolicy>,
    /// Policy files that did not validate at a reload.
    pub reload_failures: AtomicU64,
    /// The last reload's problems, while the file stays invalid: when and what.
    reload_error: Mutex<Option<(DateTime<Utc>, String)>>,
    /// This process's last sweeps, newest last (at most [`Sweeper::HISTORY`]).
    history: Mutex<std::collections::VecDeque<(DateTime<Utc>, SweepCounts)>>,
    metrics: Option<Arc<Metrics>>,
}

impl Sweeper {
    /// `policy` is the valid policy in force at start (`run` refuses to start without one).
    /// The sweeper of a configuration: its artifact store and `retention.toml`.
    /// The sweeper of `config`'s retention policy over `artifacts` (the daemon's one store).
    pub fn from_config(
        config: &crate::config::Config,
        ledger: Ledger,
        clock: SharedClock,
        artifacts: ArtifactStore,
    ) -> Result<Sweeper, crate::report::artifact::ArtifactError> {
        Ok(Sweeper::new(
            ledger,
            artifacts,
            clock,
            SweeperConfig::new(config.dir.join("retention.toml")),
            config.retention.clone(),
        ))
    }

    pub fn new(
        ledger: Ledger,
        artifacts: ArtifactStore,
        clock: SharedClock,
        config: SweeperConfig,
        policy: RetentionPolicy,
    ) -> Sweeper {
        Sweeper {
            ledger,
            artifacts,
            clock,
            config,
            policy: Mutex::new(policy),
            reload_failures: AtomicU64::new(0),
            reload_error: Mutex::new(None),
            history: Mutex::new(std::collections::VecDeque::new()),
            metrics: None,
        }
    }

    /// Sweeps [`Sweeper::history`] keeps.
    pub(crate) const HISTORY: usize = 10;

    /// The policy file's problems at the last reload, if it is invalid now: when and what.
    pub(crate) fn reload_error(&self) -> Option<(DateTime<Utc>, String)> {
        self.reload_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// This process's last sweeps, newest first.
    pub fn history(&self) -> Vec<(DateTime<Utc>, SweepCounts)> {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        h.iter().rev().copied().collect()
    }

    /// The policy file this sweeper re-reads.
    pub fn policy_file(&self) -> &std::path::Path {
        &self.config.policy_file
    }

    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Sweeper {
        self.metrics = Some(metrics);
        self
    }

    /// The policy in force.
    pub fn policy(&self) -> RetentionPolicy {
        self.policy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the policy file. An invalid file is logged and counted, and the previous policy
    /// stays in force.
    pub fn reload(&self) -> Result<(), ConfigErrors> {
        // No file at all means the documented defaults, as at start-up.
        let loaded = if self.config.policy_file.exists() {
            RetentionPolicy::load(&self.config.policy_file)
        } else {
            Ok(RetentionPolicy::default())
        };
        match loaded {
            Ok(p) => {
                *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = p;
                *self.reload_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Ok(())
            }
            Err(e) => {
                *self.reload_error.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((self.clock.now(), e.to_string().trim_end().to_string()));
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = &self.metrics {
                    m.policy_reload_failures.inc();
                }
                tracing::error!(problems = %e.to_string().trim_end(), "retention policy invalid: the previous policy stays in force");
                Err(e)
            }
        }
    }

    /// Re-reads the policy and sweeps at the clock's now.
    pub async fn run_once(&self) -> Result<SweepCounts, SweepError> {
        let _ = self.reload();
        let mut plan = SweepPlan::default();
        let now = self.clock.now();
        self.sweep(now, false, &mut plan).await?;
        {
            let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            if h.len() >= Self::HISTORY {
                h.pop_front();
            }
            h.push_back((now, plan.counts));
        }
        if plan.counts.artifacts_deleted
            + plan.counts.diagnostics_cleared
            + plan.counts.jobs_deleted
            > 0
        {
            tracing::info!(
                artifacts = plan.counts.artifacts_deleted,
                diagnostics = plan.counts.diagnostics_cleared,
                jobs = plan.counts.jobs_deleted,
                "retention sweep"
            );
        }
        Ok(plan.counts)
    }

    /// What a sweep at `as_of` would delete, per class; deletes nothing.
    pub async fn plan(&self, as_of: DateTime<Utc>) -> Result<SweepPlan, SweepError> {
        let mut plan = SweepPlan {
            as_of: rfc3339(as_of),
            ..SweepPlan::default()
        };
        self.sweep(as_of, true, &mut plan).await?;
        Ok(plan)
    }

    /// Sweeps every `sweep_every` of the policy in force until `cancel`.
    pub async fn run(&self, cancel: CancellationToken) {
        loop {
            if let Err(e) = self.run_once().await {
                tracing::error!(error = %e, "retention sweep failed; the next sweep retries");
            }
            let every = self.policy().sweep_every.as_std();
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    fn count(&self, class: &str, n: u64) {
        if let Some(m) = &self.metrics {
            m.swept(class, n);
        }
    }

    async fn sweep(
        &self,
        now: DateTime<Utc>,
        dry: bool,
        plan: &mut SweepPlan,
    ) -> Result<(), SweepError> {
        let policy = self.policy();
        let before = crate::domain::clock::sub(now, policy.shortest().as_chrono());
        let mut cursor: Option<(DateTime<Utc>, JobKey)> = None;
        loop {
            let started = tokio::time::Instant::now();
            let page = self
                .ledger
                .retention()
                .terminal_page(before, cursor.clone(), self.config.batch_size)
                .await?;
            let Some(last) = page.last() else { break };
            cursor = last.terminal_at.map(|t| (t, last.key.clone()));
            plan.counts.batches += 1;
            for job in &page {
                if started.elapsed() > self.config.batch_time_limit {
                    plan.counts.stopped_early = true;
                    tracing::warn!(
                        "retention batch outran its time limit; the next sweep continues"
                    );
                    return Ok(());
                }
                plan.counts.jobs_examined += 1;
                self.sweep_job(job, &policy, now, dry, plan).await?;
            }
            if page.len() < self.config.batch_size as usize || cursor.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Deletes everything under a job's artifact prefix.
    async fn purge(&self, job: &Job) -> Result<(), crate::report::artifact::ArtifactError> {
        self.artifacts
            .purge(job.key.report().as_str(), &job.key.day())
            .await
            .map(|_| ())
    }

    async fn sweep_job(
        &self,
        job: &Job,
        policy: &RetentionPolicy,
        now: DateTime<Utc>,
        dry: bool,
        plan: &mut SweepPlan,
    ) -> Result<(), SweepError> {
        let Some(terminal_at) = job.terminal_at else {
            return Ok(());
        };
        let th = policy.for_report(job.key.report().as_str());
        let age = now - terminal_at;
        let ledger_due = age > th.ledger.as_chrono();
        let step = Step {
            job,
            now,
            dry,
            terminal_at: rfc3339(terminal_at),
        };
        // 1. The artifact; 2. verbose diagnostics; 3. ledger rows, last, and never while the
        //    artifact exists.
        let mut artifact_gone = job.artifact.is_none() || job.artifact_deleted_at.is_some();
        if !artifact_gone && (age > th.artifact.as_chrono() || ledger_due) {
            match self.sweep_artifact(&step, plan).await? {
                Some(gone) => artifact_gone = gone,
                None => return Ok(()),
            }
        }
        if job.diagnostics_cleared_at.is_none() && age > th.diagnostics.as_chrono() {
            self.sweep_diagnostics(&step, plan).await?;
        }
        if ledger_due && artifact_gone {
            self.sweep_rows(&step, plan).await?;
        }
        Ok(())
    }

    /// Everything under the job's prefix (a crash may have left a staging file or a second
    /// render beside the recorded pair), deleted and recorded gone in one step that holds the
    /// job's row, so a redrive cannot slip in between. `Some(gone)`, or `None` when the store
    /// failed and this job waits for the next sweep.
    async fn sweep_artifact(
        &self,
        step: &Step<'_>,
        plan: &mut SweepPlan,
    ) -> Result<Option<bool>, SweepError> {
        let job = step.job;
        let Some(a) = job.artifact.as_ref() else {
            return Ok(Some(true));
        };
        let bytes = u64::try_from(a.bytes).unwrap_or(0);
        let gone = if step.dry {
            true
        } else {
            let retired = self
                .ledger
                .retention()
                .retire_artifact(&job.key, step.now, || self.purge(job))
                .await?;
            match retired {
                Some(Err(e)) => {
                    tracing::warn!(job = %job.key, error = %e, "could not delete the artifact; the next sweep retries");
                    return Ok(None);
                }
                Some(Ok(())) => {
                    self.count("artifact", 1);
                    true
                }
                None => false,
            }
        };
        if gone {
            plan.counts.artifacts_deleted += 1;
            plan.counts.artifact_bytes += bytes;
            plan.artifact.push(step.item(bytes, 2));
        }
        Ok(Some(gone))
    }

    async fn sweep_diagnostics(
        &self,
        step: &Step<'_>,
        plan: &mut SweepPlan,
    ) -> Result<(), SweepError> {
        let key = &step.job.key;
        let sizes = self.ledger.retention().sizes(key).await?;
        let (bytes, rows) = (
            u64::try_from(sizes.diagnostics_bytes).unwrap_or(0),
            u64::try_from(sizes.diagnostics_rows).unwrap_or(0),
        );
        let cleared = if step.dry {
            Some(rows)
        } else {
            self.ledger
                .retention()
                .clear_diagnostics(key, step.now)
                .await?
        };
        if let Some(cleared) = cleared
            && rows > 0
        {
            if !step.dry {
                self.count("diagnostics", cleared);
            }
            plan.counts.diagnostics_cleared += 1;
            plan.counts.diagnostics_rows += cleared;
            plan.counts.diagnostics_bytes += bytes;
            plan.diagnostics.push(step.item(bytes, cleared));
        }
        Ok(())
    }

    async fn sweep_rows(&self, step: &Step<'_>, plan: &mut SweepPlan) -> Result<(), SweepError> {
        let job = step.job;
        let rows = if step.dry {
            let sizes = self.ledger.retention().sizes(&job.key).await?;
            Some(u64::try_from(sizes.ledger_rows).unwrap_or(0))
        } else {
            // Whatever is still under the job's prefix goes with its rows.
            let deleted = self
                .ledger
                .retention()
                .delete_with(&job.key, || self.purge(job))
                .await?;
            match deleted {
                Some(Err(e)) => {
                    tracing::warn!(job = %job.key, error = %e, "could not purge the artifact prefix; the next sweep retries");
                    return Ok(());
                }
                Some(Ok(rows)) => Some(rows),
                None => None,
            }
        };
        if let Some(rows) = rows {
            if !step.dry {
                self.count("ledger", 1);
            }
            plan.counts.jobs_deleted += 1;
            plan.counts.ledger_rows += rows;
            plan.ledger.push(step.item(0, rows));
        }
        Ok(())
    }
}

/// One job under retention at one instant.
struct Step<'a> {
    job: &'a Job,
    now: DateTime<Utc>,
    dry: bool,
    terminal_at: String,
}

impl Step<'_> {
    fn item(&self, bytes: u64, rows: u64) -> SweepItem {
        SweepItem {
            job: self.job.key.clone(),
            terminal_at: self.terminal_at.clone(),
            bytes,
            rows,
        }
    }
}
