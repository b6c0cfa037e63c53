//! Deliveries, their attempts and the redrive audit: reads, the outcome of a send (one
//! attempt row and its consequence, in one transaction), releases and redrives.

use super::handles::Deliveries;
use chrono::{DateTime, Utc};

use super::audit::audit_row;
use super::backend::tx::{Statement, Tx};
use super::types::parse_key;
use super::{
    Arg, Attempt, AttemptRecord, Audit, Delivery, DeliveryLease, DeliveryNext, DeliveryRecord,
    DeliveryState, Finish, LedgerError, NewAttempt, Redrive, RedriveOutcome, RedriveRecord, Result,
};
use crate::domain::clock::to_millis;
use crate::domain::keys::{DeliveryKey, JobKey};

const SEND_RELEASE: &str =
    "UPDATE deliveries SET state = 'pending', attempts = attempts - 1, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $4
     WHERE job_number = $1 AND ordinal = $2 AND lease_token = $3 AND state = 'sending'";

const SEND_DEFER: &str = "UPDATE deliveries SET state = 'pending', attempts = attempts - 1, ready_at = $4, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $5
     WHERE job_number = $1 AND ordinal = $2 AND lease_token = $3 AND state = 'sending'";

/// Delivery `$1` of job `$2`: found through its job's number (the primary key's prefix), since
/// no index holds the text keys.
const BY_KEY: &str = "SELECT * FROM deliveries
     WHERE job_number = (SELECT number FROM jobs WHERE key = $2) AND key = $1";

fn redrive(key: &DeliveryKey, now_ms: i64) -> Statement<'static> {
    Statement::new(
        "UPDATE deliveries SET state = 'pending', ready_at = $1, budget_attempts = attempts,
            budget_since = $1, redrive_count = redrive_count + 1, updated_at = $1,
            terminal_at = NULL
         WHERE job_number = (SELECT number FROM jobs WHERE key = $3) AND key = $2
           AND state = 'quarantined' RETURNING job_key",
    )
    .bind(now_ms)
    .bind(key)
    .bind(key.job())
}

/// The job of a redriven delivery delivers again, or renders again first when retention
/// deleted its artifact (the same bytes: see `generated_at`); its redriven delivery waits.
fn redrive_job(job: &str, now_ms: i64) -> Statement<'_> {
    Statement::new(sql!(
        "UPDATE jobs
         SET state = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                          THEN 'ready' ELSE 'delivering' END,
             ready_at = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                             THEN $1 ELSE ready_at END,
             redrive_count = redrive_count + 1, updated_at = $1, terminal_at = NULL
         WHERE key = $2 AND state IN (",
        super::states::JOBS_RENDERED,
        ")"
    ))
    .bind(now_ms)
    .bind(job)
}

/// Redrives quarantined delivery `key` inside `tx`, with its audit row: the delivery back to
/// `pending`, its job back to delivering (or to render). The job's row is locked first, as
/// retention takes it: the two never wait on each other in opposite orders. The job's key, or
/// `None` when the delivery is not quarantined (nothing changed).
pub(super) async fn redrive_in(
    tx: &mut Tx,
    key: &DeliveryKey,
    audit: &Audit<'_>,
    now_ms: i64,
) -> Result<Option<String>> {
    tx.lock_job(&key.job().to_string()).await?;
    let Some((job,)) = tx
        .fetch_optional::<(String,)>(&redrive(key, now_ms))
        .await?
    else {
        return Ok(None);
    };
    tx.execute(&redrive_job(&job, now_ms)).await?;
    let row = audit_row(&job, Some(key), audit, "redrive", now_ms);
    tx.execute(&row).await?;
    Ok(Some(job))
}

impl Deliveries<'_> {
    pub async fn get(self, key: &DeliveryKey) -> Result<Option<Delivery>> {
        let st = Statement::new(BY_KEY).bind(key).bind(key.job());
        Ok(self.fetch_all::<DeliveryRecord, _>(&st).await?.pop())
    }

    pub async fn list(self, job_key: &JobKey) -> Result<Vec<Delivery>> {
        let sql = "SELECT * FROM deliveries
                   WHERE job_number = (SELECT number FROM jobs WHERE key = $1) ORDER BY key";
        self.select::<DeliveryRecord, _, _>(sql, job_key).await
    }

    /// The deliveries of these jobs, ordered by key; 500 jobs a statement.
    pub async fn list_many(self, job_keys: &[&JobKey]) -> Result<Vec<Delivery>> {
        let head = "SELECT d.* FROM jobs j JOIN deliveries d ON d.job_number = j.number
                    WHERE j.key IN (";
        let mut out: Vec<Delivery> = self
            .select_by_job_keys::<DeliveryRecord, _>(head, job_keys)
            .await?;
        out.sort_by_cached_key(|d| d.key.to_string());
        Ok(out)
    }

    /// Every quarantined delivery, oldest first.
    pub async fn quarantined(self, limit: u32) -> Result<Vec<Delivery>> {
        let sql = "SELECT * FROM deliveries WHERE quarantined_at IS NOT NULL
                   ORDER BY quarantined_at, job_number, ordinal LIMIT $1";
        self.select::<DeliveryRecord, _, _>(sql, i64::from(limit))
            .await
    }

    /// How many deliveries are in each state.
    pub async fn count_by_state(self) -> Result<Vec<(DeliveryState, i64)>> {
        let sql = "SELECT state, COUNT(*) FROM deliveries GROUP BY state ORDER BY state";
        self.count_rows_by_state(sql, DeliveryState::parse).await
    }

    /// Records one attempt and its consequence in one transaction: `sending → sent`,
    /// `sending → pending` (at `ready_at`) or `sending → quarantined`.
    pub async fn finish(
        self,
        lease: &DeliveryLease,
        attempt: &NewAttempt,
        next: DeliveryNext,
    ) -> Result<()> {
        let one = [Finish {
            lease: lease.clone(),
            attempt: attempt.clone(),
            next,
        }];
        self.deliveries()
            .finish_many(&one)
            .await?
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Records many attempts and their consequences in one transaction (one commit), each as
    /// `ledger.deliveries().finish` would. Returns one result per finish, in order: `LeaseLost`
    /// for a lease no longer held (that finish changes nothing; the others still record). An
    /// `Err` of the whole call means nothing was recorded.
    pub async fn finish_many(self, finishes: &[Finish]) -> Result<Vec<Result<()>>> {
        let outcomes = super::GroupCommit {
            renders: &[],
            finishes,
            settle: &[],
            lease_to: None,
            claim: None,
            now: DateTime::<Utc>::UNIX_EPOCH,
        };
        Ok(self.commit_group(outcomes).await?.finishes)
    }

    /// `sending → pending` without counting an attempt: the worker is draining for shutdown.
    pub async fn release(self, lease: &DeliveryLease, now: DateTime<Utc>) -> Result<()> {
        self.fenced_send(SEND_RELEASE, lease, &[Arg::Int(to_millis(now))])
            .await
    }

    /// `sending → pending` at `ready_at` without counting an attempt: the pool leased work for a
    /// host that is paused (a receiver asked to wait), so the work waits for the pause to end.
    pub(crate) async fn defer(
        self,
        lease: &DeliveryLease,
        ready_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let args = [Arg::Int(to_millis(ready_at)), Arg::Int(to_millis(now))];
        self.fenced_send(SEND_DEFER, lease, &args).await
    }

    /// Redrives one quarantined delivery with an audit row; its job returns to `delivering`, or
    /// to `ready` to render again when retention deleted its artifact.
    pub async fn redrive(
        self,
        key: &DeliveryKey,
        audit: &Audit<'_>,
        now: DateTime<Utc>,
    ) -> Result<RedriveOutcome> {
        let now_ms = to_millis(now);
        // Not quarantined: nothing changed, and the commit only lets the job's row go.
        let job_key = self
            .within(async |tx| redrive_in(tx, key, audit, now_ms).await)
            .await?;
        match job_key {
            Some(job_key) => Ok(RedriveOutcome {
                job_key: parse_key(&job_key)?,
                deliveries: 1,
            }),
            None => Err(match self.deliveries().get(key).await? {
                Some(dl) => LedgerError::WrongState {
                    what: "delivery",
                    key: key.to_string(),
                    expected: "quarantined",
                    actual: dl.state.as_str().to_string(),
                },
                None => LedgerError::NotFound {
                    what: "delivery",
                    key: key.to_string(),
                },
            }),
        }
    }

    /// Every attempt's duration from lease to result, in milliseconds (for benchmarks).
    pub async fn latencies_ms(self) -> Result<Vec<i64>> {
        let rows: Vec<(i64,)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT finished_at - requested_at FROM delivery_attempts")
                .fetch_all(p)
                .await?
        });
        Ok(rows.into_iter().map(|(ms,)| ms).collect())
    }

    /// Attempts by response class (for benchmarks and diagnostics).
    pub async fn attempts_by_class(self) -> Result<Vec<(String, i64)>> {
        Ok(on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT class, COUNT(*) FROM delivery_attempts GROUP BY class ORDER BY class",
            )
            .fetch_all(p)
            .await?
        }))
    }

    pub async fn attempts(self, delivery_key: &DeliveryKey) -> Result<Vec<Attempt>> {
        let sql = "SELECT * FROM delivery_attempts
                   WHERE job_number = (SELECT number FROM jobs WHERE key = $2) AND delivery_key = $1
                   ORDER BY attempt";
        let st = Statement::new(sql)
            .bind(delivery_key)
            .bind(delivery_key.job());
        self.fetch_all::<AttemptRecord, _>(&st).await
    }

    pub async fn redrives(self, job_key: &JobKey) -> Result<Vec<Redrive>> {
        let sql = "SELECT * FROM audit WHERE job_key = $1 ORDER BY at, id";
        self.select::<RedriveRecord, _, _>(sql, job_key).await
    }
}
