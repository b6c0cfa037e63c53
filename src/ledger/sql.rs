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
