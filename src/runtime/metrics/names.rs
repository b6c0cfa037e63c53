//! The names `/metrics` always exports, and the label values whose series exist from the
//! start (so dashboards and alerts see zeros, not gaps).

/// How an attempt can end, as `dawnpost_delivery_attempts_total` labels it.
pub(super) const ATTEMPT_CLASSES: [&str; 6] = [
    "accepted",
    "rate_limited",
    "transient",
    "ambiguous",
    "permanent",
    "unknown",
];

/// Where bounces and complaints come from, as `dawnpost_bounces_total` labels them.
pub(crate) const BOUNCE_PROVIDERS: [&str; 5] = ["dsn", "ses", "postmark", "sendgrid", "mailgun"];

/// The services the daemon supervises (as `/readyz` and `service_failures` name them), listed
/// here so that their failure series exist from the start.
pub(crate) const SERVICES: [&str; 10] = [
    "tick", "pool", "rescuer", "sweeper", "runbooks", "clock", "registry", "reload", "notifier",
    "server",
];

/// Why the HTTP server cut or refused a connection: a head or body that did not arrive in time,
/// a malformed or oversized head, the connection limit reached.
pub(crate) const HTTP_CUT_REASONS: [&str; 4] = [
    "header_timeout",
    "body_timeout",
    "malformed",
    "too_many_connections",
];

/// The names `GET /metrics` always exports.
pub const NAMES: &[&str] = &[
    "dawnpost_jobs",
    "dawnpost_deliveries",
    "dawnpost_oldest_ready_job_age_seconds",
    "dawnpost_oldest_waiting_job_age_seconds",
    "dawnpost_jobs_waiting_past_deadline",
    "dawnpost_readiness_probes_total",
    "dawnpost_leases_rescued_total",
    "dawnpost_active_workers",
    "dawnpost_delivery_attempts_total",
    "dawnpost_rate_limited_total",
    "dawnpost_retry_delay_seconds",
    "dawnpost_quarantined_total",
    "dawnpost_jobs_skipped_total",
    "dawnpost_artifact_bytes_written_total",
    "dawnpost_render_duration_seconds",
    "dawnpost_sweeper_deleted_total",
    "dawnpost_policy_reload_failures_total",
    "dawnpost_config_reloads_total",
    "dawnpost_owner_notice_sends_total",
    "dawnpost_ingested_runs_total",
    "dawnpost_deliveries_suppressed_total",
    "dawnpost_bounces_total",
    "dawnpost_bounces_unmatched_total",
    "dawnpost_log_lines_dropped_total",
    "dawnpost_service_failures_total",
    "dawnpost_service_up",
    "dawnpost_http_connections_open",
    "dawnpost_http_connections_cut_total",
    "dawnpost_clock_offset_seconds",
];
