//! One send: the artifact of a leased delivery's job, read once for all its deliveries leased
//! together, handed to its kind's sender (`delivery::destination`). Every failure before the
//! transport answers is an [`Outcome`] too, so each attempt is recorded with a class and a
//! reason.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Pipeline;
use super::hold::Hold;
use crate::config::Report;
use crate::delivery::Outcome;
use crate::delivery::destination::{Memo, NotConfirmed, Parcel, Sending, permanent};
use crate::domain::outcome::ResponseClass;
use crate::ledger::{Delivery, DeliveryLease, Job, LedgerError};
use crate::report::artifact::ArtifactRef;
use crate::report::render::Rendered;

/// What one send needs, gathered before the transport is called.
struct Ready<'a> {
    job: &'a Job,
    report: Arc<Report>,
    artifact: ArtifactRef,
    rendered: &'a Rendered,
    memo: &'a Memo,
}

/// A leased job's artifact, read at most once for all its deliveries leased together.
pub(super) struct JobArtifact {
    pub(super) job: Option<Arc<Job>>,
    pub(super) rendered: tokio::sync::OnceCell<Arc<Rendered>>,
    /// What each kind works out once for all the job's deliveries of it (a webhook body's
    /// escaped parts, an email's encoded size).
    pub(super) memo: Memo,
}

impl JobArtifact {
    pub(super) fn new(job: Option<Arc<Job>>) -> JobArtifact {
        JobArtifact::with_rendered(job, None)
    }

    /// With its parts already in hand (the render that made them).
    pub(super) fn with_rendered(
        job: Option<Arc<Job>>,
        rendered: Option<Arc<Rendered>>,
    ) -> JobArtifact {
        JobArtifact {
            job,
            rendered: tokio::sync::OnceCell::new_with(rendered),
            memo: Memo::default(),
        }
    }
}

/// A send not started because its lease could not be confirmed (why, from the ledger).
pub(super) struct NotStarted(pub(super) LedgerError);

/// Attempts one delivery of `shared`'s job under `lease`. The message or body is built first,
/// then the lease confirmed (see [`Pipeline::confirm_send`]), then the transport called: the
/// check is as close to the send as it can be, so a node paused before it sends nothing.
pub(super) async fn attempt(
    p: &Pipeline,
    delivery: &Delivery,
    (lease, hold): (&DeliveryLease, &Hold),
    shared: &JobArtifact,
    now: DateTime<Utc>,
) -> Result<Outcome, NotStarted> {
    let ready = match prepare(p, shared).await {
        Ok(ready) => ready,
        Err(outcome) => return Ok(outcome),
    };
    let sender = match p.senders.of(*delivery.key.kind()) {
        Ok(sender) => sender,
        Err(outcome) => return Ok(outcome),
    };
    let parcel = Parcel {
        job: &ready.job.key,
        window: &ready.job.window,
        supersedes: ready.job.supersedes.as_ref(),
        report: &ready.report,
        artifact: &ready.artifact,
        rendered: ready.rendered,
        memo: ready.memo,
        now,
    };
    // The ledger's refusal, if the lease could not be confirmed, for the caller.
    let refused = std::sync::Mutex::new(None);
    let confirm = || -> Sending<'_, Result<(), NotConfirmed>> {
        Box::pin(async {
            let confirmed = p.confirm_send(lease, hold).await;
            confirmed.map_err(|e| {
                *refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                NotConfirmed
            })
        })
    };
    match sender.send(&parcel, &delivery.key, &confirm).await {
        Ok(outcome) => Ok(outcome),
        Err(NotConfirmed) => {
            let refused = refused.lock().unwrap_or_else(|p| p.into_inner()).take();
            Err(NotStarted(refused.unwrap_or_else(|| {
                LedgerError::LeaseLost {
                    key: delivery.key.to_string(),
                    token: lease.token(),
                }
            })))
        }
    }
}

/// The job, its report and its artifact, read from the store once for all its deliveries.
async fn prepare<'a>(p: &'a Pipeline, shared: &'a JobArtifact) -> Result<Ready<'a>, Outcome> {
    let job = shared
        .job
        .as_deref()
        .ok_or_else(|| permanent("the job row is gone"))?;
    let report = p.catalog.get(job.key.report().as_str()).ok_or_else(|| {
        permanent(format!(
            "report {} is no longer configured",
            job.key.report()
        ))
    })?;
    let artifact = job
        .artifact
        .clone()
        .ok_or_else(|| permanent("the job has no artifact"))?;
    if job.artifact_deleted_at.is_some() {
        return Err(permanent("the artifact was deleted by retention"));
    }
    let read = shared
        .rendered
        .get_or_try_init(|| p.artifacts.read_rendered(&artifact))
        .await;
    let rendered = read.map_err(|e| match e {
        crate::report::artifact::ArtifactError::Store(object_store::Error::NotFound { .. }) => {
            permanent("the artifact is missing from the store: redrive the job to render it again")
        }
        e => Outcome::new(
            ResponseClass::Transient,
            None,
            format!("reading the artifact: {e}"),
        ),
    })?;
    Ok(Ready {
        job,
        report,
        artifact,
        rendered,
        memo: &shared.memo,
    })
}

/// The suppression of delivery `key`'s recipient in force, if any, and why it is not sent, in
/// words; `None` for a kind that reaches no one person, or a recipient not suppressed.
pub(super) async fn suppression(
    p: &Pipeline,
    key: &crate::domain::keys::DeliveryKey,
) -> Result<Option<(crate::ledger::Suppression, String)>, LedgerError> {
    let Some(address) = crate::delivery::recipient(key) else {
        return Ok(None);
    };
    let report = key.job().report();
    let found = (p.suppressions)
        .of(&p.ledger, &address, report.as_str())
        .await?;
    Ok(found.map(|s| {
        let why = format!(
            "not sent: the recipient is suppressed {} since {} ({})",
            crate::ledger::scope(s.report.as_deref()),
            crate::domain::window::rfc3339(s.since),
            s.why
        );
        (s, why)
    }))
}

/// Ends leased delivery `key` unsent for its suppressed recipient (`why`), settles its job,
/// and tells the report's owners, once per suppression.
pub(super) async fn suppressed(
    p: &Pipeline,
    key: &crate::domain::keys::DeliveryKey,
    lease: &crate::ledger::DeliveryLease,
    (suppression, why): &(crate::ledger::Suppression, String),
) {
    let shown = key.shown_lazily();
    let now = p.clock.now();
    let state = match p
        .ledger
        .recipients()
        .suppress_delivery(lease, why, now)
        .await
    {
        Ok(state) => state,
        Err(e) => {
            tracing::warn!(delivery = %shown, error = %e, "could not end the delivery of a suppressed recipient; it is tried again");
            return;
        }
    };
    p.metrics.suppressed.inc();
    tracing::warn!(delivery = %shown, state = state.as_str(), reason = %why, "not sent");
    if let Err(e) = p.ledger.jobs().settle_many(&[key.job()], now).await {
        tracing::warn!(delivery = %shown, error = %e, "could not settle the job; the next settle will");
    }
    if state != crate::ledger::DeliveryState::Suppressed {
        return;
    }
    let report = key.job().report().as_str();
    if !(p.catalog.get(report)).is_some_and(|r| r.owners.notified()) {
        return;
    }
    let notice = crate::ledger::NewNotice {
        report: report.to_string(),
        job: key.job().clone(),
        cause: crate::delivery::notice::Cause::Suppressed,
        detail: format!(
            "{}: {}",
            crate::domain::redact::redact_address(&suppression.address),
            why.trim_start_matches("not sent: the recipient is ")
        ),
        key: Some(format!("{report}/suppressed/{}", suppression.id)),
    };
    if let Err(e) = p.ledger.notices().insert_many(&[notice], now).await {
        tracing::warn!(delivery = %shown, error = %e, "could not record the owners' notice of a suppressed recipient");
    }
}
