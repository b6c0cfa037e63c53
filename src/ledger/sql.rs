//! SQL text shared by several statements, as macros that expand to string literals so that
//! statements are assembled with `concat!` at compile time: every statement is a `&'static str`
//! and nothing is spliced at run time.
//!
//! A statement whose text differs between backends is a [`PerBackend`] beside its callers; the
//! dialect module (`sqlite`, `postgres`) picks its side.

/// A statement with one text per backend.
#[derive(Debug, Clone, Copy)]
pub(super) struct PerBackend {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// The columns of `jobs`, in the order of `JobRecord`.
macro_rules! job_columns {
    () => {
        "key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at,
         attempts, lease_owner, lease_token, lease_expires_at, artifact_key, artifact_text_key,
         artifact_csv_key, artifact_sha256, artifact_bytes, artifact_deleted_at, last_error,
         redrive_count, created_at, updated_at, terminal_at, diagnostics_cleared_at, generated_at,
         lease_losses"
    };
}

/// The columns of `deliveries`, in the order of `DeliveryRecord`.
macro_rules! delivery_columns {
    () => {
        "key, job_key, kind, destination, state, ready_at, attempts, lease_owner, lease_token,
         lease_expires_at, last_class, last_error, redrive_count, created_at, updated_at,
         terminal_at, budget_attempts, budget_since, lease_losses"
    };
}

/// The columns of `delivery_attempts`, in the order of `AttemptRecord`.
macro_rules! attempt_columns {
    () => {
        "delivery_key, attempt, requested_at, finished_at, class, code, retry_after_ms,
         next_ready_at, reason, diagnostics"
    };
}

/// The columns of `redrives`, in the order of `RedriveRecord`.
macro_rules! redrive_columns {
    () => {
        "job_key, delivery_key, redriven_by, reason, at, action, via"
    };
}

/// The terminal job states, as an SQL list.
macro_rules! terminal_job {
    () => {
        "('done', 'quarantined', 'cancelled')"
    };
}

/// True when the job `$job` (an SQL expression for its key) has no delivery waiting or in
/// flight. `keyed` writes the state test `(…) IS TRUE`, which no index serves, so that a
/// statement naming its jobs by key probes their deliveries by job whatever the statistics say.
macro_rules! nothing_in_flight {
    ($job:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = ",
            $job,
            " AND d.state IN ('pending', 'sending'))"
        )
    };
    ($job:literal, keyed) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = ",
            $job,
            " AND (d.state IN ('pending', 'sending')) IS TRUE)"
        )
    };
}

/// The state a settle moves a delivering job to: `done`, or `quarantined` when a delivery is.
/// See [`nothing_in_flight`] for `keyed`.
macro_rules! settled_state {
    () => {
        "CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = jobs.key AND d.state = 'quarantined')
              THEN 'quarantined' ELSE 'done' END"
    };
    (keyed) => {
        "CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = jobs.key AND (d.state = 'quarantined') IS TRUE)
              THEN 'quarantined' ELSE 'done' END"
    };
}

/// The state a redriven job goes to: `ready` (to render) without a live artifact, else
/// `delivering`.
macro_rules! redriven_job_state {
    () => {
        "CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL THEN 'ready' ELSE 'delivering' END"
    };
}

/// The audit row of an action: job `$1`, delivery `$2` (NULL for the whole job), by `$3`,
/// reason `$4`, at `$5`, action `$6` (`redrive`, `cancel`), via `$7`.
pub(super) const AUDIT_REDRIVE: &str = "INSERT INTO redrives (job_key, delivery_key, redriven_by, reason, at, action, via) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// The audit row's statement for job `$job`, delivery `$delivery` (an `Option`), an
/// [`Audit`], the action and the instant in milliseconds, for either backend's transaction.
macro_rules! audit_query {
    ($job:expr, $delivery:expr, $audit:expr, $action:expr, $at_ms:expr) => {
        sqlx::query(crate::ledger::sql::AUDIT_REDRIVE)
            .bind($job)
            .bind($delivery)
            .bind($audit.by())
            .bind($audit.reason())
            .bind($at_ms)
            .bind($action)
            .bind($audit.via().as_str())
    };
}

/// Redrives quarantined delivery `$key` inside transaction `$tx` of dialect `$d`, with its
/// audit row: the delivery back to `pending`, its job back to delivering (or to render). The
/// job's row is locked first, as retention takes it: the two never wait on each other in
/// opposite orders. Evaluates to the job's key, or `None` when the delivery is not quarantined.
macro_rules! redrive_delivery_in {
    ($tx:ident, $d:ident, $key:expr, $audit:expr, $now_ms:expr) => {{
        if let Some(lock) = $d::LOCK_JOB {
            sqlx::query(lock)
                .bind($key.job())
                .execute(&mut *$tx)
                .await?;
        }
        let row: Option<(String,)> = sqlx::query_as(crate::ledger::deliveries::REDRIVE)
            .bind($now_ms)
            .bind($key)
            .fetch_optional(&mut *$tx)
            .await?;
        if let Some((job_key,)) = &row {
            sqlx::query(crate::ledger::deliveries::REDRIVE_JOB)
                .bind($now_ms)
                .bind(job_key)
                .execute(&mut *$tx)
                .await?;
            audit_query!(job_key, Some($key), $audit, "redrive", $now_ms)
                .execute(&mut *$tx)
                .await?;
        }
        row.map(|(job_key,)| job_key)
    }};
}
