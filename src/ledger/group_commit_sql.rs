//! What both backends' forms of the outcome statements share (`group_commit.rs` writes SQLite's
//! `VALUES` lists, `group_commit_pg.rs` PostgreSQL's arrays): the updates that follow the rows `v`,
//! and the column values a render or a finish writes.

use super::{DeliveryNext, Finish, NewDelivery, Render};
use crate::domain::clock::to_millis;
use crate::domain::keys::JobKey;

/// A delivery to insert: its job's key and number, its place among the job's deliveries, and
/// the delivery.
pub(super) struct NewRow<'a> {
    pub(super) job: &'a JobKey,
    pub(super) job_number: i64,
    pub(super) ordinal: i32,
    pub(super) delivery: &'a NewDelivery,
}

/// The update that follows the rows `v`, on both backends.
/// The state test is `(…) IS TRUE`, which no partial index's predicate matches: each job is
/// found by its key. (Matched, PostgreSQL probed the index of rendering jobs by lease token,
/// which every first lease shares, and filtered each row's whole set of rendering jobs.)
pub(super) const RENDERED_UPDATE: &str = "UPDATE jobs SET state = v.state, artifact_key = v.html, artifact_text_key = v.text,
        artifact_sha256 = v.sha256, artifact_bytes = v.bytes, artifact_deleted_at = NULL, last_error = NULL,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = v.now,
        terminal_at = CASE WHEN v.state = 'done' THEN v.now ELSE NULL END, artifact_csv_key = v.csv,
        artifact_parts = v.parts
     FROM v
     WHERE jobs.key = v.key AND jobs.lease_token = v.token AND (jobs.state = 'rendering') IS TRUE
     RETURNING ";

/// The update that follows the rows `v`, on both backends.
/// The state test is `(…) IS TRUE`, so each delivery is found by its place (the primary key),
/// not by reading every leased delivery for a hash join.
pub(super) const FINISH_UPDATE: &str =
    "UPDATE deliveries SET state = v.state, ready_at = COALESCE(v.ready_at, deliveries.ready_at),
        last_class = v.class, last_error = v.error, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = v.finished, terminal_at = v.terminal
     FROM v
     WHERE deliveries.job_number = v.job_number AND deliveries.ordinal = v.ordinal
       AND (deliveries.state = 'sending') IS TRUE AND deliveries.lease_token = v.token
     RETURNING deliveries.key, deliveries.lease_token, deliveries.attempts, deliveries.job_number,
        deliveries.ordinal";

/// The state a recorded render moves its job to: `delivering`, or `done` without destinations.
pub(super) fn rendered_state(r: &Render) -> &'static str {
    match r.deliveries.is_empty() {
        true => "done",
        false => "delivering",
    }
}

/// A delivery's last error: the reason of its last failed attempt.
pub(super) fn last_error(f: &Finish) -> Option<&str> {
    (f.attempt.reason.as_deref()).filter(|_| f.next != DeliveryNext::Sent)
}

/// The delivery columns a finish sets: state, the next `ready_at` (retries only) and
/// `terminal_at` (sent or quarantined), in milliseconds.
pub(super) fn finish_columns(f: &Finish) -> (&'static str, Option<i64>, Option<i64>) {
    let finished = to_millis(f.attempt.finished_at);
    match f.next {
        DeliveryNext::Sent => ("sent", None, Some(finished)),
        DeliveryNext::Retry { ready_at } => ("pending", Some(to_millis(ready_at)), None),
        DeliveryNext::Quarantine => ("quarantined", None, Some(finished)),
    }
}
