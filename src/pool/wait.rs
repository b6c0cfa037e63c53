//! Waiting for a report's data (`ready_when`): before a leased job of such a report renders,
//! one probe asks whether its data is there. Ready, it renders; not ready before the deadline,
//! it goes back to `waiting` (no lease, no worker slot) until the next probe; past the
//! deadline, `on_late` decides. The probe and what follows are recorded together.

use super::Pipeline;
use crate::config::{OnLate, Readiness, Report};
use crate::domain::window::rfc3339;
use crate::ledger::{AfterProbe, Job, JobLease, ProbeRow, SKIPPED_FORMAT, WAITING_FORMAT};
use crate::report::readiness::{Answer, ProbeOutcome};

/// Whether a leased job renders now.
pub(super) enum Gate {
    /// Render; `stale` when its deadline passed without the data.
    Render { stale: bool },
    /// Not now: it waits, or it ended (skipped, quarantined), or the record failed and the
    /// lease will be rescued.
    Held,
}

/// Probes the data of a leased job whose report waits for it, records the probe and what
/// follows, and says whether to render.
pub(super) async fn gate(p: &Pipeline, job: &Job, lease: &JobLease, report: &Report) -> Gate {
    let Some(r) = &report.readiness else {
        return Gate::Render { stale: false };
    };
    let deadline =
        crate::report::readiness::deadline(r, job.key.date(), job.fire_at, report.timezone());
    let answer = crate::report::readiness::probe(r, job.key.date(), &job.window, &p.http).await;
    p.metrics.probed(answer.outcome.as_str());
    let at = p.clock.now();
    let next = after(p, job, r, &answer, (at, deadline));
    let row = ProbeRow {
        at,
        outcome: answer.outcome,
        answer: answer.text,
    };
    if let Err(e) = p.ledger.waits().probed(lease, &row, deadline, &next).await {
        tracing::warn!(job = %job.key, error = %e, "could not record the readiness probe; the lease will be rescued");
        return Gate::Held;
    }
    match next {
        AfterProbe::Render { late } => {
            if late {
                tracing::warn!(job = %job.key, probe = %row.answer, "its data is not ready and its deadline passed: rendering what is there (stale)");
            }
            Gate::Render { stale: late }
        }
        AfterProbe::Wait { next } | AfterProbe::Later { next } => {
            p.nudge.at(next);
            tracing::info!(job = %job.key, probe = %row.answer, next_probe = %rfc3339(next), deadline = %rfc3339(deadline), "waiting for its data");
            Gate::Held
        }
        AfterProbe::Skip { why } => {
            p.metrics.skipped.inc();
            tracing::warn!(job = %job.key, reason = %why, "skipped: its data was not ready by its deadline");
            Gate::Held
        }
        AfterProbe::Quarantine { why } => {
            p.metrics.quarantined.inc();
            tracing::error!(job = %job.key, reason = %why, "quarantined: its data was not ready by its deadline");
            Gate::Held
        }
    }
}

/// What follows a probe at `at`, with the job's deadline.
fn after(
    p: &Pipeline,
    job: &Job,
    r: &Readiness,
    answer: &Answer,
    (at, deadline): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
) -> AfterProbe {
    if answer.outcome == ProbeOutcome::Ready {
        return AfterProbe::Render { late: false };
    }
    // Past its deadline once already (a redrive after `on_late`): it renders what is there.
    if job.late_at.is_some() {
        return AfterProbe::Render { late: true };
    }
    let write_format = p.ledger.nodes().write_format();
    if at < deadline {
        let next = crate::report::readiness::next_probe(r, at, deadline, super::jitter());
        // A live node of an older version would not know a waiting job: probe again from
        // `ready` instead (such a node may render it without waiting).
        return if write_format >= WAITING_FORMAT {
            AfterProbe::Wait { next }
        } else {
            AfterProbe::Later { next }
        };
    }
    let why = format!(
        "its data was not ready by its deadline ({}, {}); the last probe: {}; on_late = {:?}",
        r.wait_until,
        rfc3339(deadline),
        answer.text,
        r.on_late.as_str()
    );
    match r.on_late {
        OnLate::Send => AfterProbe::Render { late: true },
        OnLate::Skip if write_format >= SKIPPED_FORMAT => AfterProbe::Skip { why },
        OnLate::Skip => AfterProbe::Render { late: true },
        OnLate::Quarantine => AfterProbe::Quarantine { why },
    }
}
