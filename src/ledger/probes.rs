//! Readiness probes: what each probe of a job's data answered, and the transition that follows
//! one, recorded together in one transaction (a probe is never recorded without its outcome's
//! effect, nor the effect without the probe that caused it).

use super::backend::tx::Statement;
use super::handles::Waits;
use super::{JobLease, LedgerError, Result, SKIPPED_FORMAT, WAITING_FORMAT, fenced};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::keys::JobKey;
use crate::report::readiness::ProbeOutcome;
use chrono::{DateTime, Utc};

/// One probe as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRow {
    pub at: DateTime<Utc>,
    pub outcome: ProbeOutcome,
    /// What it answered, for a person (`HTTP 503`, `no file …`, `timed out after 30s`).
    pub answer: String,
}

#[derive(Debug, sqlx::FromRow)]
struct ProbeRecord {
    at: i64,
    outcome: String,
    answer: String,
}

impl TryFrom<ProbeRecord> for ProbeRow {
    type Error = LedgerError;

    fn try_from(r: ProbeRecord) -> Result<ProbeRow> {
        Ok(ProbeRow {
            at: from_millis(r.at),
            outcome: (ProbeOutcome::ALL.into_iter())
                .find(|o| o.as_str() == r.outcome)
                .ok_or_else(|| {
                    LedgerError::Corrupt(format!("unknown probe outcome {:?}", r.outcome))
                })?,
            answer: r.answer,
        })
    }
}

/// What follows a probe of a leased job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterProbe {
    /// Not ready before the deadline: `rendering → waiting`, probed again at `next`.
    Wait { next: DateTime<Utc> },
    /// Not ready before the deadline while a live node does not know `waiting`:
    /// `rendering → ready`, due again at `next`.
    Later { next: DateTime<Utc> },
    /// Render now (the job stays `rendering`): the data is ready, or the deadline passed and
    /// the report sends what is there (`late`).
    Render { late: bool },
    /// The deadline passed: `rendering → skipped`, saying why.
    Skip { why: String },
    /// The deadline passed: `rendering → quarantined`, for an operator.
    Quarantine { why: String },
}

/// Records a probe of leased job `$1` (token `$2`) at `$3`: only while the lease holds.
const PROBE_INSERT: &str = "INSERT INTO probes (job_key, at, outcome, answer)
     SELECT $1, $3, $4, $5
     WHERE EXISTS (SELECT 1 FROM jobs WHERE key = $1 AND lease_token = $2 AND state = 'rendering')";

/// `rendering → waiting` until `$3` (the probe is not a render attempt), deadline `$4`, in
/// format `$5`, at `$6`.
const WAIT: &str = "UPDATE jobs SET state = 'waiting', ready_at = $3, wait_until = $4, format = $5,
        attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = $6
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

/// `rendering → ready` at `$3` (the probe is not a render attempt), deadline `$4`, at `$5`.
const LATER: &str = "UPDATE jobs SET state = 'ready', ready_at = $3, wait_until = $4,
        attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

/// The job renders now: its deadline `$3`, and late since `$5` when `$4` is 1.
const RENDER: &str = "UPDATE jobs SET wait_until = $3,
        late_at = CASE WHEN $4 = 1 THEN COALESCE(late_at, $5) ELSE late_at END, updated_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

/// `rendering → skipped` at its deadline `$4`, saying `$3`, at `$5`.
const SKIP: &str = "UPDATE jobs SET state = 'skipped', last_error = $3, wait_until = $4,
        late_at = COALESCE(late_at, $5), format = CASE WHEN format > $6 THEN format ELSE $6 END,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = $5, terminal_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

/// `rendering → quarantined` at its deadline `$4`, saying `$3`, at `$5`.
const QUARANTINE: &str = "UPDATE jobs SET state = 'quarantined', last_error = $3, wait_until = $4,
        late_at = COALESCE(late_at, $5), lease_owner = NULL, lease_expires_at = NULL,
        updated_at = $5, terminal_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

impl Waits<'_> {
    /// Records a probe of a leased job and what follows it, in one transaction. A wait is
    /// written in [`WAITING_FORMAT`], which the caller uses only while every live node reads it
    /// (`ledger.nodes().write_format`); a skip in [`SKIPPED_FORMAT`] at least.
    pub async fn probed(
        self,
        lease: &JobLease,
        probe: &ProbeRow,
        wait_until: DateTime<Utc>,
        next: &AfterProbe,
    ) -> Result<()> {
        let key = lease.key().to_string();
        let (key, token, at) = (key.as_str(), lease.token(), to_millis(probe.at));
        let deadline = to_millis(wait_until);
        let fenced_on = |sql| Statement::new(sql).bind(key).bind(token);
        let insert = fenced_on(PROBE_INSERT)
            .bind(at)
            .bind(probe.outcome.as_str())
            .bind(probe.answer.as_str());
        let effect = match next {
            AfterProbe::Wait { next } => fenced_on(WAIT)
                .bind(to_millis(*next))
                .bind(deadline)
                .bind(WAITING_FORMAT)
                .bind(at),
            AfterProbe::Later { next } => fenced_on(LATER)
                .bind(to_millis(*next))
                .bind(deadline)
                .bind(at),
            AfterProbe::Render { late } => fenced_on(RENDER)
                .bind(deadline)
                .bind(i64::from(*late))
                .bind(at),
            AfterProbe::Skip { why } => fenced_on(SKIP)
                .bind(why.as_str())
                .bind(deadline)
                .bind(at)
                .bind(SKIPPED_FORMAT),
            AfterProbe::Quarantine { why } => fenced_on(QUARANTINE)
                .bind(why.as_str())
                .bind(deadline)
                .bind(at),
        };
        self.within(async |tx| {
            fenced(tx.execute(&insert).await?, lease)?;
            fenced(tx.execute(&effect).await?, lease)
        })
        .await
    }

    /// Every probe of job `key`, oldest first.
    pub async fn probes(self, key: &JobKey) -> Result<Vec<ProbeRow>> {
        let sql = "SELECT at, outcome, answer FROM probes WHERE job_key = $1 ORDER BY at, id";
        self.select::<ProbeRecord, ProbeRow, _>(sql, key).await
    }

    /// When the oldest of the jobs still waiting was made.
    pub async fn oldest(self) -> Result<Option<DateTime<Utc>>> {
        let row: (Option<i64>,) = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT MIN(created_at) FROM jobs WHERE state = 'waiting'")
                .fetch_one(p)
                .await?
        });
        Ok(row.0.map(from_millis))
    }

    /// How many waiting jobs are past their deadline at `now` (the daemon should have acted).
    pub async fn overdue(self, now: DateTime<Utc>) -> Result<i64> {
        let row: (i64,) = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT COUNT(*) FROM jobs WHERE state = 'waiting' AND wait_until < $1")
                .bind(to_millis(now))
                .fetch_one(p)
                .await?
        });
        Ok(row.0)
    }
}
