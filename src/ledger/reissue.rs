//! Reissue: a new revision of a finished job — its own job row, keyed `report:date.rN`, on the
//! same report, date and window — that renders from fresh source data and is delivered to
//! every destination under delivery keys derived from its own key. The revisions before it
//! keep their artifacts and rows as they were. Audited like a redrive.

use super::handles::Jobs;
use chrono::{DateTime, Utc};

use super::audit::audit_row;
use super::backend::tx::{Statement, Tx};
use super::{Audit, Job, JobRecord, LedgerError, REISSUE_FORMAT, Result};
use crate::domain::clock::to_millis;
use crate::domain::keys::JobKey;

/// The newest revision of report `$1`'s date `$2`.
const LATEST: &str =
    "SELECT * FROM jobs WHERE report = $1 AND local_date = $2 ORDER BY revision DESC LIMIT 1";

/// Every revision of report `$1`'s date `$2`, oldest first.
const REVISIONS: &str =
    "SELECT * FROM jobs WHERE report = $1 AND local_date = $2 ORDER BY revision";

/// A revision `$8` of the job it supersedes (`$9`), ready at `$7`, in format `$10`.
const INSERT_REVISION: &str = "INSERT INTO jobs (key, report, local_date, state, origin, fire_at,
        window_start, window_end, ready_at, created_at, updated_at, revision, supersedes, format)
     VALUES ($1, $2, $3, 'ready', 'reissue', $4, $5, $6, $7, $7, $7, $8, $9, $10)";

/// `key`'s job and its date's newest revision, locked, both finished: every reissue of a
/// report's date locks its first revision's row first, so two at once (naming different
/// revisions) run one after the other and the second sees the first's revision as the newest,
/// unfinished: refused, never a duplicate key.
async fn finished_revisions(tx: &mut Tx, key: &JobKey) -> Result<(Job, Job)> {
    let text = key.to_string();
    tx.lock_job(&key.with_revision(1).to_string()).await?;
    tx.lock_job(&text).await?;
    let get = Statement::new("SELECT * FROM jobs WHERE key = $1").bind(text.as_str());
    let job: Job = match tx.fetch_optional::<JobRecord>(&get).await? {
        Some(r) => r.try_into()?,
        None => {
            return Err(LedgerError::NotFound {
                what: "job",
                key: text,
            });
        }
    };
    let date = crate::domain::keys::IsoDate(key.date()).to_string();
    let latest = Statement::new(LATEST)
        .bind(key.report().as_str())
        .bind(date.as_str());
    let newest: Job = match tx.fetch_optional::<JobRecord>(&latest).await? {
        Some(r) => r.try_into()?,
        None => job.clone(),
    };
    for j in [&job, &newest] {
        if !j.state.is_terminal() {
            return Err(LedgerError::WrongState {
                what: "job",
                key: j.key.to_string(),
                expected: "finished (done, quarantined, cancelled or skipped)",
                actual: j.state.as_str().to_string(),
            });
        }
    }
    Ok((job, newest))
}

impl Jobs<'_> {
    /// Reissues finished job `key`: inserts the next revision of its report and date, ready
    /// at `now`, superseding the newest one, and audits it. Refused (`WrongState`) unless
    /// both `key` and the newest revision are finished; refused (`OlderNodes`) while a live
    /// node does not read revisions. Returns the new revision's key.
    pub async fn reissue(
        self,
        key: &JobKey,
        audit: &Audit<'_>,
        now: DateTime<Utc>,
    ) -> Result<JobKey> {
        if self.nodes().write_format() < REISSUE_FORMAT {
            return Err(LedgerError::OlderNodes {
                what: "a reissue",
                format: REISSUE_FORMAT,
            });
        }
        let text = key.to_string();
        self.within(async |tx| {
            let (job, newest) = finished_revisions(tx, key).await?;
            let (report, date) = (
                key.report().as_str(),
                crate::domain::keys::IsoDate(key.date()).to_string(),
            );
            let next = key.with_revision(newest.key.revision().saturating_add(1));
            let (next_text, supersedes) = (next.to_string(), newest.key.to_string());
            let now_ms = to_millis(now);
            let insert = Statement::new(INSERT_REVISION)
                .bind(next_text.as_str())
                .bind(report)
                .bind(date.as_str())
                .bind(to_millis(job.fire_at))
                .bind(to_millis(job.window.start))
                .bind(to_millis(job.window.end))
                .bind(now_ms)
                .bind(i64::from(next.revision()))
                .bind(supersedes.as_str())
                .bind(REISSUE_FORMAT);
            tx.execute(&insert).await?;
            tx.execute(&audit_row(&text, None, audit, "reissue", now_ms))
                .await?;
            Ok(next)
        })
        .await
    }

    /// "Run now": inserts `job` ready at once, unless its report and date have a job, and
    /// audits it as `run`. Whether this inserted it, and the job's state after.
    pub async fn run_now(
        self,
        job: super::NewJob,
        audit: &Audit<'_>,
        now: DateTime<Utc>,
    ) -> Result<(bool, Option<super::JobState>)> {
        let key = job.key.clone();
        let inserted = !self.jobs().insert_many(&[job], now).await?.is_empty();
        if inserted {
            let text = key.to_string();
            let row = audit_row(&text, None, audit, "run", to_millis(now));
            self.execute(&row).await?;
        }
        let state = self.jobs().get(&key).await?.map(|j| j.state);
        Ok((inserted, state))
    }

    /// Every revision of `key`'s report and date, oldest first (one, for a job never
    /// reissued).
    pub async fn revisions(self, key: &JobKey) -> Result<Vec<Job>> {
        let date = crate::domain::keys::IsoDate(key.date()).to_string();
        let st = Statement::new(REVISIONS)
            .bind(key.report().as_str())
            .bind(date.as_str());
        self.fetch_all::<JobRecord, Job>(&st).await
    }
}
