//! Work whose worker went away: the rescuer's expired leases, and sends cut at shutdown.
//!
//! A lost lease counts against the same budget as a failed attempt (`max_attempts` of the
//! lease's work, `max_age` of a delivery's budget): work that kills or hangs its worker every
//! time is quarantined with a reason that says so, not retried forever.

use super::handles::Leases;
use chrono::{DateTime, Duration, Utc};

use super::{DeliveryLease, RescueCounts, Result, fenced};
use crate::delivery::retry::RetryPolicy;
use crate::domain::clock::to_millis;
use crate::domain::window::rfc3339;

/// The budget lost leases count against (`[retry]`'s `max_attempts` and `max_age`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RescueBudget {
    pub max_attempts: u32,
    pub max_age: Duration,
}

impl From<&RetryPolicy> for RescueBudget {
    fn from(policy: &RetryPolicy) -> Self {
        RescueBudget {
            max_attempts: policy.max_attempts,
            max_age: policy.max_age,
        }
    }
}

impl Default for RescueBudget {
    /// The retry policy's defaults.
    fn default() -> Self {
        RescueBudget::from(&RetryPolicy::default())
    }
}

const QUARANTINE_LOST_RENDERS: &str = "UPDATE jobs SET state = 'quarantined', lease_owner = NULL, lease_expires_at = NULL,
        lease_losses = lease_losses + 1,
        last_error = 'worker lost ' || CAST(lease_losses + 1 AS TEXT) || $3 || ': the render kills or hangs its worker',
        updated_at = $1, terminal_at = $1
     WHERE state = 'rendering' AND lease_expires_at < $1 AND attempts >= $2";

const RESCUE_RENDERS: &str =
    "UPDATE jobs SET state = 'ready', ready_at = $1, lease_owner = NULL, lease_expires_at = NULL,
        lease_losses = lease_losses + 1,
        last_error = 'lease expired: the worker stopped reporting', updated_at = $1
     WHERE state = 'rendering' AND lease_expires_at < $1";

/// The attempt row of each send whose lease expired before `$1`: its outcome is unknown. Its
/// budget is spent at `$2` attempts, or when it started at or before `$3`.
const RECORD_LOST_SENDS: &str = sql!(
    "INSERT INTO delivery_attempts
        (delivery_key, job_number, ordinal, attempt, requested_at, finished_at, class, reason,
         next_ready_at)
     SELECT key, job_number, ordinal, attempts, updated_at, $1, 'unknown',
            CASE WHEN (attempts - budget_attempts >= $2 OR COALESCE(budget_since, created_at) <= $3)
                 THEN 'lease expired: the worker stopped reporting; outcome unknown; budget spent'
                 ELSE 'lease expired: the worker stopped reporting; outcome unknown' END,
            CASE WHEN (attempts - budget_attempts >= $2 OR COALESCE(budget_since, created_at) <= $3)
                 THEN NULL ELSE $1 END
     FROM deliveries WHERE state = 'sending' AND lease_expires_at < $1 AND job_number IN ",
    super::LIVE_JOB_NUMBERS,
    " ON CONFLICT DO NOTHING"
);

/// Locks the sends whose lease expired before `$1` (PostgreSQL): the attempt rows written next
/// are for exactly the sends this round then rescues or quarantines. Without it a worker's
/// fenced give-back of a send it never started (`attempts - 1`) could commit between the two,
/// leaving an attempt row under a number the delivery's next lease takes again — whose outcome
/// then could never be recorded.
const LOCK_LOST_SENDS: &str = sql!(
    "SELECT 1 FROM deliveries WHERE state = 'sending' AND lease_expires_at < $1 AND job_number IN ",
    super::LIVE_JOB_NUMBERS,
    " FOR UPDATE"
);

/// Lost sends (as above) whose budget is spent: quarantined, `$4` saying how often.
const QUARANTINE_LOST_SENDS: &str = sql!(
    "UPDATE deliveries
     SET state = 'quarantined', lease_owner = NULL, lease_expires_at = NULL,
         lease_losses = lease_losses + 1, last_class = 'unknown',
         last_error = 'worker lost ' || CAST(lease_losses + 1 AS TEXT) || $4
                      || ': the send kills or hangs its worker',
         updated_at = $1, terminal_at = $1
     WHERE state = 'sending' AND lease_expires_at < $1
       AND (attempts - budget_attempts >= $2 OR COALESCE(budget_since, created_at) <= $3)
       AND job_number IN ",
    super::LIVE_JOB_NUMBERS
);

/// The other lost sends wait again, at once.
const RESCUE_SENDS: &str = sql!(
    "UPDATE deliveries
     SET state = 'pending', ready_at = $1, lease_owner = NULL, lease_expires_at = NULL,
         lease_losses = lease_losses + 1,
         last_class = 'unknown', last_error = 'lease expired', updated_at = $1
     WHERE state = 'sending' AND lease_expires_at < $1 AND job_number IN ",
    super::LIVE_JOB_NUMBERS
);

/// How long after a delivering job's last delivery finished the rescuer settles it: the pool
/// settles its own jobs in the group commit after the one that recorded the finish (later
/// under load), and only a job still delivering well after that lost the worker that would
/// have settled it.
pub(crate) const STOPPED_AFTER: Duration = Duration::seconds(30);

/// Settles every delivering job with nothing left to send whose deliveries all finished
/// before `$2` (or in this round's own rescue, at `$1`), at `$1`: `done`, or `quarantined`
/// when a delivery is.
const SETTLE_ALL: &str = sql!(
    "UPDATE jobs
     SET state = CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                                   AND d.state = 'quarantined')
                      THEN 'quarantined' ELSE 'done' END,
         updated_at = $1, terminal_at = $1
     WHERE state = 'delivering'
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                       AND d.state IN (",
    super::states::DELIVERIES_UNFINISHED,
    "))
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                       AND d.terminal_at > $2 AND d.terminal_at <> $1)"
);

/// A send cut at shutdown: its attempt row (`$1` now, `$2` and `$3` the delivery's job number
/// and ordinal, `$4` token), written while
/// `updated_at` still says when the lease was taken.
const RECORD_CUT_SEND: &str = "INSERT INTO delivery_attempts (delivery_key, job_number, ordinal, attempt, requested_at,
        finished_at, class, reason, next_ready_at)
     SELECT key, job_number, ordinal, attempts, updated_at, $1, 'unknown',
            'cut at shutdown (drain_timeout): the send may have reached the receiver; outcome unknown', $1
     FROM deliveries WHERE job_number = $2 AND ordinal = $3 AND lease_token = $4
       AND state = 'sending'
     ON CONFLICT DO NOTHING";

const ABANDON_SEND: &str = "UPDATE deliveries SET state = 'pending', ready_at = $1, lease_owner = NULL, lease_expires_at = NULL,
        last_class = 'unknown', last_error = 'cut at shutdown', updated_at = $1
     WHERE job_number = $2 AND ordinal = $3 AND lease_token = $4 AND state = 'sending'";

/// The most a stored instant may lie ahead of now: a lease (`pool.lease`) and a delivery's
/// wait for its retry (the retry policy's longest wait, jitter included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub lease: Duration,
    pub longest_wait: Duration,
}

impl Bounds {
    /// `lease`, and the longest wait `policy` asks: its backoff cap, or the longest Retry-After
    /// it honours with the spread added on top.
    pub fn of(lease: Duration, policy: &RetryPolicy) -> Bounds {
        let ms = |d: Duration| d.num_milliseconds().max(0) as f64;
        let spread = (ms(policy.max_retry_after) * policy.jitter.clamp(0.0, 1.0)).max(1000.0);
        #[allow(clippy::cast_possible_truncation)] // whole milliseconds of a configured span
        let retry_after = policy.max_retry_after + Duration::milliseconds(spread.ceil() as i64);
        Bounds {
            lease,
            longest_wait: policy.cap.max(retry_after),
        }
    }
}

impl Leases<'_> {
    /// On SQLite, whose ledger follows no clock but the machine's: brings back within `bounds`
    /// what a wall clock that was ahead wrote — a lease ending later than now + the lease, a
    /// retry waiting longer than the policy's longest wait — so a clock stepped back costs at
    /// most that. How many rows it moved. PostgreSQL's nodes keep the ledger's clock: nothing.
    pub async fn bound(self, now: DateTime<Utc>, bounds: Bounds) -> Result<u64> {
        let super::Backend::Sqlite(p) = &self.backend else {
            return Ok(0);
        };
        let lease_end = to_millis(crate::domain::clock::add(now, bounds.lease));
        let wait_end = to_millis(crate::domain::clock::add(now, bounds.longest_wait));
        let mut tx = p.begin_with(super::backend::sqlite::BEGIN).await?;
        let mut moved = 0;
        for (sql, bound) in [
            (
                "UPDATE deliveries SET ready_at = $1 WHERE state = 'pending' AND ready_at > $1",
                wait_end,
            ),
            (
                "UPDATE deliveries SET lease_expires_at = $1 WHERE state = 'sending' AND lease_expires_at > $1",
                lease_end,
            ),
            (
                "UPDATE jobs SET lease_expires_at = $1 WHERE state = 'rendering' AND lease_expires_at > $1",
                lease_end,
            ),
        ] {
            moved += sqlx::query(sql)
                .bind(bound)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// Returns every expired lease: `rendering → ready`, `sending → pending`, or, once the
    /// lost leases have spent the work's budget, `→ quarantined` with "worker lost N times".
    /// A rescued delivery keeps its attempt (the send may have happened) and gets an attempt
    /// row saying so. Also settles delivering jobs whose deliveries are all terminal (a worker
    /// stopped between recording a job's last delivery and settling the job).
    pub async fn rescue(self, now: DateTime<Utc>, budget: &RescueBudget) -> Result<RescueCounts> {
        let now_ms = to_millis(now);
        let max_attempts = i64::from(budget.max_attempts);
        let age_cutoff = to_millis(crate::domain::clock::sub(now, budget.max_age));
        let lost = format!(" times, last at {}", rfc3339(now));
        on_backend!(self, |p, d| {
            let mut tx = d::begin(&self, p).await?;
            if let Some(wait) = d::RESCUE_WAIT {
                sqlx::query(wait).execute(&mut *tx).await?;
            }
            let jobs_quarantined = sqlx::query(QUARANTINE_LOST_RENDERS)
                .bind(now_ms)
                .bind(max_attempts)
                .bind(&lost)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let jobs = sqlx::query(RESCUE_RENDERS)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if d::ROW_LOCKS {
                sqlx::query(LOCK_LOST_SENDS)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(RECORD_LOST_SENDS)
                .bind(now_ms)
                .bind(max_attempts)
                .bind(age_cutoff)
                .execute(&mut *tx)
                .await?;
            let deliveries_quarantined = sqlx::query(QUARANTINE_LOST_SENDS)
                .bind(now_ms)
                .bind(max_attempts)
                .bind(age_cutoff)
                .bind(&lost)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let deliveries = sqlx::query(RESCUE_SENDS)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let settled = sqlx::query(SETTLE_ALL)
                .bind(now_ms)
                .bind(to_millis(crate::domain::clock::sub(now, STOPPED_AFTER)))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok(RescueCounts {
                jobs,
                deliveries,
                settled,
                quarantined: jobs_quarantined + deliveries_quarantined,
            })
        })
    }

    /// `sending → pending` at `now`, keeping the attempt and recording it as `unknown`: a send
    /// cut at shutdown (`drain_timeout`) may have reached the receiver, so it counts, and its
    /// retry reuses the same key — as the rescuer does with a lost lease.
    pub async fn abandon(self, lease: &DeliveryLease, now: DateTime<Utc>) -> Result<()> {
        let now_ms = to_millis(now);
        let place = lease.place();
        let n = on_backend!(self, |p, d| {
            let mut tx = d::begin(&self, p).await?;
            sqlx::query(RECORD_CUT_SEND)
                .bind(now_ms)
                .bind(place.job_number)
                .bind(place.ordinal)
                .bind(lease.token())
                .execute(&mut *tx)
                .await?;
            let n = sqlx::query(ABANDON_SEND)
                .bind(now_ms)
                .bind(place.job_number)
                .bind(place.ordinal)
                .bind(lease.token())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            n
        });
        fenced(n, lease)
    }
}
