//! Retention's reads and writes (README.md, "Retention"). Every write re-checks, atomically
//! with the write, that its job is terminal with nothing pending or in flight: the job's row is locked first
//! (PostgreSQL `FOR UPDATE`; SQLite's `BEGIN IMMEDIATE` already holds the only write lock), the
//! check runs after the lock is held, and the write commits before the lock is let go. A redrive
//! changes the job's row, so it either commits before the check (and the check refuses) or
//! waits for the write to commit (and then finds the artifact recorded gone, or no job).

use super::handles::Retention;
use std::future::Future;

/// A job retention may retire (on `jobs`): terminal, with no delivery unfinished.
const RETIRABLE: &str = sql!(
    "state IN (",
    super::states::JOBS_TERMINAL,
    ") AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                       AND d.state IN (",
    super::states::DELIVERIES_UNFINISHED,
    "))"
);

/// What a retention step may retire: a job terminal with nothing in flight, and for each
/// step its own condition on the artifact.
#[derive(Debug, Clone, Copy)]
enum Retire {
    /// The artifact's objects: one is recorded and not yet deleted.
    Artifact,
    /// The attempts' diagnostics: any terminal job.
    Diagnostics,
    /// The ledger rows: the artifact is gone, or there never was one.
    Rows,
}

impl Retire {
    /// The job's key when it may be retired so, run once its row is locked (so it sees every
    /// redrive committed before).
    fn check(self, key: &JobKey) -> Statement<'static> {
        Statement::new(match self {
            Retire::Artifact => sql!(
                "SELECT key FROM jobs WHERE key = $1 AND ",
                RETIRABLE,
                " AND artifact_key IS NOT NULL AND artifact_deleted_at IS NULL"
            ),
            Retire::Diagnostics => sql!("SELECT key FROM jobs WHERE key = $1 AND ", RETIRABLE),
            Retire::Rows => sql!(
                "SELECT key FROM jobs WHERE key = $1 AND ",
                RETIRABLE,
                " AND (artifact_key IS NULL OR artifact_deleted_at IS NOT NULL)"
            ),
        })
        .bind(key)
    }
}

/// How a retention write ended: refused (the job may not be retired so), its step before the
/// write failed (`E`, and nothing was written), or done (`T`, committed).
enum Retirement<E, T> {
    Refused,
    Failed(E),
    Done(T),
}

impl Ledger {
    /// A retention write on `key` in one transaction holding the job's row: refused unless the
    /// job may be retired as `what`, then `before` (deleting objects), whose failure writes
    /// nothing, then `write`. A failure anywhere rolls back before it returns.
    async fn retire<F, Fut, E, T>(
        &self,
        key: &JobKey,
        what: Retire,
        before: F,
        write: impl AsyncFnOnce(&mut Tx) -> Result<T>,
    ) -> Result<Retirement<E, T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
    {
        self.within(async |tx| {
            tx.lock_job(&key.to_string()).await?;
            let may = tx.fetch_optional::<(String,)>(&what.check(key)).await?;
            if may.is_none() {
                return Ok(Retirement::Refused);
            }
            if let Err(e) = before().await {
                return Ok(Retirement::Failed(e));
            }
            Ok(Retirement::Done(write(tx).await?))
        })
        .await
    }
}

use chrono::{DateTime, Utc};

use super::backend::tx::{Statement, Tx};
use super::{Job, JobRecord, Ledger, Result, RetentionSizes};
use crate::domain::clock::to_millis;
use crate::domain::keys::JobKey;

impl Retention<'_> {
    /// Terminal jobs that became terminal before `before` and have no delivery in flight,
    /// oldest first, after the cursor `(terminal_at, key)`: what retention may consider.
    pub(crate) async fn terminal_page(
        self,
        before: DateTime<Utc>,
        after: Option<(DateTime<Utc>, JobKey)>,
        limit: u32,
    ) -> Result<Vec<Job>> {
        let (cursor_at, cursor_key) = match after {
            Some((at, key)) => (to_millis(at), key.to_string()),
            None => (i64::MIN, String::new()),
        };
        let recs: Vec<JobRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as(sql!(
                "SELECT * FROM jobs WHERE ",
                RETIRABLE,
                " AND terminal_at < $1 AND (terminal_at > $2 OR (terminal_at = $2 AND key > $3))
                 ORDER BY terminal_at, key LIMIT $4"
            ))
            .bind(to_millis(before))
            .bind(cursor_at)
            .bind(&cursor_key)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await?
        });
        recs.into_iter().map(Job::try_from).collect()
    }

    /// The first page of `ledger.retention().terminal_page`.
    pub async fn terminal_before(self, before: DateTime<Utc>, limit: u32) -> Result<Vec<Job>> {
        self.retention().terminal_page(before, None, limit).await
    }

    /// Deletes a finished job's artifact objects with `delete` and records them gone, as one
    /// step: the job's row stays locked from the check to the commit, so a redrive waits for
    /// the step to end and then sees the artifact gone (and renders again). Refused
    /// (`Ok(None)`, `delete` not called) unless the job is terminal with nothing in flight and
    /// an artifact not yet recorded gone. `Ok(Some(Err(e)))`: `delete` failed and nothing was
    /// recorded.
    pub async fn retire_artifact<F, Fut, E>(
        self,
        key: &JobKey,
        now: DateTime<Utc>,
        delete: F,
    ) -> Result<Option<std::result::Result<(), E>>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
    {
        let gone = Statement::new(
            "UPDATE jobs SET artifact_deleted_at = $1, updated_at = $1 WHERE key = $2",
        )
        .bind(to_millis(now))
        .bind(key);
        let write = async |tx: &mut Tx| tx.execute(&gone).await;
        Ok(
            match self.retire(key, Retire::Artifact, delete, write).await? {
                Retirement::Refused => None,
                Retirement::Failed(e) => Some(Err(e)),
                Retirement::Done(_) => Some(Ok(())),
            },
        )
    }

    /// Records that a finished job's artifact is gone, without deleting anything (for tests
    /// and tools; the sweeper uses `ledger.retention().retire_artifact`). Refused (false) unless the
    /// job is terminal with nothing in flight.
    pub async fn mark_artifact_deleted(self, key: &JobKey, now: DateTime<Utc>) -> Result<bool> {
        let done = self
            .retention()
            .retire_artifact(key, now, || async {
                Ok::<(), std::convert::Infallible>(())
            })
            .await?;
        Ok(done.is_some())
    }

    /// Clears the verbose transport diagnostics of a finished job's attempts; returns how many
    /// attempt rows were cleared, or None when the job is not terminal (or has work in flight).
    pub async fn clear_diagnostics(self, key: &JobKey, now: DateTime<Utc>) -> Result<Option<u64>> {
        let nothing = || async { Ok::<(), std::convert::Infallible>(()) };
        let write = async |tx: &mut Tx| {
            let cleared_at =
                Statement::new("UPDATE jobs SET diagnostics_cleared_at = $1 WHERE key = $2")
                    .bind(to_millis(now))
                    .bind(key);
            tx.execute(&cleared_at).await?;
            let clear = Statement::new(
                "UPDATE delivery_attempts SET diagnostics = NULL
                 WHERE diagnostics IS NOT NULL
                   AND job_number = (SELECT number FROM jobs WHERE key = $1)",
            )
            .bind(key);
            tx.execute(&clear).await
        };
        Ok(
            match self
                .retire(key, Retire::Diagnostics, nothing, write)
                .await?
            {
                Retirement::Done(cleared) => Some(cleared),
                Retirement::Refused | Retirement::Failed(_) => None,
            },
        )
    }

    /// Deletes a finished job's ledger rows (attempts, deliveries, redrives, ingest records, the
    /// job) in one transaction. Refused (None) unless the job is terminal, has nothing in flight,
    /// and its artifact is gone (or never existed). Returns the number of rows deleted.
    pub async fn delete(self, key: &JobKey) -> Result<Option<u64>> {
        let deleted = self
            .retention()
            .delete_with(key, || async { Ok::<(), std::convert::Infallible>(()) })
            .await?;
        Ok(deleted.and_then(|r| r.ok()))
    }

    /// `ledger.retention().delete`, running `purge` (say, deleting whatever is left under the job's
    /// artifact prefix) after the check and before the rows go, with the job's row locked
    /// throughout. `Ok(Some(Err(e)))`: `purge` failed and nothing was deleted.
    pub(crate) async fn delete_with<F, Fut, E>(
        self,
        key: &JobKey,
        purge: F,
    ) -> Result<Option<std::result::Result<u64, E>>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
    {
        let write = async |tx: &mut Tx| {
            let mut rows = 0;
            for sql in [
                "DELETE FROM delivery_attempts WHERE job_number = (SELECT number FROM jobs WHERE key = $1)",
                "DELETE FROM deliveries WHERE job_number = (SELECT number FROM jobs WHERE key = $1)",
                "DELETE FROM audit WHERE job_key = $1",
                "DELETE FROM ingest_events WHERE job_key = $1",
                "DELETE FROM probes WHERE job_key = $1",
                "DELETE FROM jobs WHERE key = $1",
            ] {
                rows += tx.execute(&Statement::new(sql).bind(key)).await?;
            }
            Ok(rows)
        };
        Ok(match self.retire(key, Retire::Rows, purge, write).await? {
            Retirement::Refused => None,
            Retirement::Failed(e) => Some(Err(e)),
            Retirement::Done(rows) => Some(Ok(rows)),
        })
    }

    /// What retention would free for one job: diagnostics bytes and rows, and ledger rows.
    pub async fn sizes(self, key: &JobKey) -> Result<RetentionSizes> {
        let row: (i64, i64, i64, i64, i64) = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT
                    CAST(COALESCE((SELECT SUM(LENGTH(a.diagnostics)) FROM delivery_attempts a WHERE a.job_number = (SELECT number FROM jobs WHERE key = $1)), 0) AS BIGINT),
                    (SELECT COUNT(*) FROM delivery_attempts a WHERE a.job_number = (SELECT number FROM jobs WHERE key = $1) AND a.diagnostics IS NOT NULL),
                    (SELECT COUNT(*) FROM delivery_attempts a WHERE a.job_number = (SELECT number FROM jobs WHERE key = $1)),
                    (SELECT COUNT(*) FROM deliveries WHERE job_number = (SELECT number FROM jobs WHERE key = $1)),
                    (SELECT COUNT(*) FROM audit WHERE job_key = $1)",
            )
            .bind(key)
            .fetch_one(p)
            .await?
        });
        Ok(RetentionSizes {
            diagnostics_bytes: row.0,
            diagnostics_rows: row.1,
            ledger_rows: row.2 + row.3 + row.4 + 1,
        })
    }
}
