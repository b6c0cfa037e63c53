//! One send: the artifact of a leased delivery's job, read once for all its deliveries leased
//! together, sent by email or webhook. Every failure before the transport answers is an
//! [`Outcome`] too, so each attempt is recorded with a class and a reason.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Pipeline;
use super::hold::Hold;
use crate::config::Report;
use crate::delivery::Outcome;
use crate::delivery::signing::Secret;
use crate::delivery::webhook::{
    ArtifactBody, AttachmentBody, BodyHead, BodyVersion, EscapedParts, WebhookBody, WindowBody,
};
use crate::domain::keys::DestinationKind;
use crate::domain::outcome::ResponseClass;
use crate::domain::redact::redact_address;
use crate::domain::window::rfc3339;
use crate::ledger::{Delivery, DeliveryLease, Job, LedgerError};
use crate::report::artifact::ArtifactRef;
use crate::report::render::Rendered;

/// What one send needs, gathered before the transport is called.
struct Ready<'a> {
    job: &'a Job,
    report: Arc<Report>,
    artifact: ArtifactRef,
    rendered: &'a Rendered,
    escaped: &'a std::sync::OnceLock<Result<EscapedParts, String>>,
    email_over: &'a std::sync::OnceLock<Option<u64>>,
}

/// A leased job's artifact, read at most once for all its deliveries leased together.
pub(super) struct JobArtifact {
    pub(super) job: Option<Arc<Job>>,
    pub(super) rendered: tokio::sync::OnceCell<Arc<Rendered>>,
    /// Its parts escaped for a webhook body, once for all the job's webhooks.
    pub(super) escaped: std::sync::OnceLock<Result<EscapedParts, String>>,
    /// The encoded size of its whole email when that passes `email.max_message_bytes` (then
    /// its recipients get the bounded copy and a link); measured once for all its emails.
    pub(super) email_over: std::sync::OnceLock<Option<u64>>,
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
            escaped: std::sync::OnceLock::new(),
            email_over: std::sync::OnceLock::new(),
        }
    }
}

fn permanent(reason: impl Into<String>) -> Outcome {
    Outcome::new(ResponseClass::Permanent, None, reason)
}

/// A send not started because its lease could not be confirmed (why, from the ledger).
pub(super) struct NotStarted(pub(super) LedgerError);

/// Why a send ended before the transport answered: an outcome to record (a message that
/// cannot be built is permanent), or a lease that could not be confirmed.
enum Unsent {
    Outcome(Outcome),
    NotStarted(NotStarted),
}

impl From<Outcome> for Unsent {
    fn from(o: Outcome) -> Unsent {
        Unsent::Outcome(o)
    }
}

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
    let confirm = || async { p.confirm_send(lease, hold).await.map_err(NotStarted) };
    let sent = match delivery.key.kind() {
        DestinationKind::Email => send_email(p, delivery, &ready, now, confirm).await,
        DestinationKind::Webhook => send_webhook(p, delivery, &ready, now, confirm).await,
    };
    match sent {
        Ok(outcome) | Err(Unsent::Outcome(outcome)) => Ok(outcome),
        Err(Unsent::NotStarted(e)) => Err(e),
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
        escaped: &shared.escaped,
        email_over: &shared.email_over,
    })
}

async fn send_email<C, F>(
    p: &Pipeline,
    delivery: &Delivery,
    ready: &Ready<'_>,
    now: DateTime<Utc>,
    confirm: C,
) -> Result<Outcome, Unsent>
where
    C: FnOnce() -> F,
    F: std::future::Future<Output = Result<(), NotStarted>>,
{
    let to: lettre::Address = delivery.key.destination().parse().map_err(|_| {
        permanent(format!(
            "invalid address {}",
            redact_address(delivery.key.destination())
        ))
    })?;
    let subject = crate::delivery::email::subject_of(&ready.report.title, &ready.job.key);
    let list = crate::delivery::email::ListHeaders {
        report: ready.report.id.as_str(),
        domain: &p.email_list_domain,
        reply_to: p.email_reply_to.as_ref(),
        unsubscribe: ready.report.list_unsubscribe.as_deref(),
    };
    let (from, key) = (&p.email_from, &delivery.key);
    let built = crate::delivery::email::build_message(
        from,
        &to,
        &subject,
        key,
        now.into(),
        ready.rendered,
        &list,
    );
    let message = built.map_err(|e| permanent(format!("cannot build the message: {e}")))?;
    let message = match email_over(p, ready, &message) {
        None => message,
        Some(size) => {
            let text = linked_email_text(p, ready, size)?;
            crate::delivery::email::build_linked_message(
                from,
                &to,
                &subject,
                key,
                now.into(),
                text,
                &list,
            )
            .map_err(|e| permanent(format!("cannot build the message: {e}")))?
        }
    };
    confirm().await.map_err(Unsent::NotStarted)?;
    Ok(p.email
        .send(&message, &delivery.key, delivery.key.destination())
        .await)
}

/// The encoded size of `message` when it passes `email.max_message_bytes`: measured only when
/// a bound of it does, and once for all the job's recipients (theirs differ by an address).
fn email_over(p: &Pipeline, ready: &Ready<'_>, message: &lettre::Message) -> Option<u64> {
    let limit = p.max_message_bytes;
    *ready.email_over.get_or_init(|| {
        if crate::delivery::email::size_bound(ready.rendered) <= limit {
            return None;
        }
        let size = message.formatted().len() as u64;
        (size > limit.saturating_sub(1 << 10)).then_some(size)
    })
}

/// The text of a bounded copy of the job's report, with its link; without links (no
/// `[server] public_url`) the email cannot be sent, and says what would let it.
fn linked_email_text(p: &Pipeline, ready: &Ready<'_>, size: u64) -> Result<String, Outcome> {
    let limit = p.max_message_bytes;
    let links = p.links.as_ref().ok_or_else(|| {
        permanent(format!(
            "the message is {} as sent, over email.max_message_bytes ({}): set [server] public_url and link_secret_env to send a bounded copy with a link instead",
            crate::report::render::human_size(usize::try_from(size).unwrap_or(usize::MAX)),
            crate::config::shown_size(limit)
        ))
    })?;
    let link = links.link(
        &ready.job.key,
        &ready.artifact.sha256,
        crate::delivery::links::Part::Html,
    );
    // Base64 takes 4/3 and its line breaks a little more: five eighths of the limit fit.
    let room = usize::try_from(limit / 8 * 5).unwrap_or(usize::MAX);
    Ok(crate::delivery::email::linked_text(
        &ready.rendered.text,
        &link,
        (size, limit),
        room,
    ))
}

async fn send_webhook<C, F>(
    p: &Pipeline,
    delivery: &Delivery,
    ready: &Ready<'_>,
    now: DateTime<Utc>,
    confirm: C,
) -> Result<Outcome, Unsent>
where
    C: FnOnce() -> F,
    F: std::future::Future<Output = Result<(), NotStarted>>,
{
    let hook = ready
        .report
        .webhooks
        .iter()
        .find(|w| w.url.as_str() == delivery.key.destination());
    let secret = match hook.and_then(|w| w.secret_env.as_ref()) {
        None => None,
        Some(env) => {
            let value = std::env::var(env)
                .map_err(|_| permanent(format!("environment variable {env} is not set")))?;
            Some(Secret::parse(&value).map_err(|e| permanent(format!("{env}: {e}")))?)
        }
    };
    let job = ready.job;
    let escaped = ready
        .escaped
        .get_or_init(|| EscapedParts::of(ready.rendered).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| permanent(format!("cannot encode the body: {e}")))?;
    let body = WebhookBody {
        version: BodyVersion,
        head: body_head(delivery, ready),
        html: &escaped.html,
        text: &escaped.text,
        csv: escaped.csv.as_deref(),
        attachments: AttachmentBody::csv_of(
            &job.key,
            &ready.artifact,
            ready.rendered.csv.as_deref(),
        ),
    };
    // Sized for the escaped parts up front: grown from empty, a body of tens of KB was
    // reallocated and copied a dozen times, per delivery.
    let parts = escaped.html.get().len()
        + escaped.text.get().len()
        + escaped.csv.as_ref().map_or(0, |c| c.get().len());
    let mut encoded = Vec::with_capacity(parts + 2048);
    serde_json::to_writer(&mut encoded, &body)
        .map_err(|e| permanent(format!("cannot encode the body: {e}")))?;
    let body = encoded;
    let body = if body.len() as u64 > p.max_body_bytes {
        linked_body(p, delivery, ready, body.len() as u64)?
    } else {
        body
    };
    confirm().await.map_err(Unsent::NotStarted)?;
    let (key, webhook) = (&delivery.key, &p.webhook);
    Ok(match hook {
        // Parsed once, when the configuration was loaded.
        Some(hook) => {
            let url = hook.url.clone();
            webhook.send(url, secret.as_ref(), key, body, now).await
        }
        None => {
            let url = key.destination();
            webhook.send(url, secret.as_ref(), key, body, now).await
        }
    })
}

/// The fields of both webhook bodies that name the job, its delivery and its artifact.
fn body_head<'a>(delivery: &'a Delivery, ready: &'a Ready<'a>) -> BodyHead<'a> {
    let job = ready.job;
    BodyHead {
        job: &job.key,
        delivery: &delivery.key,
        report: job.key.report(),
        title: &ready.report.title,
        date: job.key.date(),
        window: WindowBody {
            start: rfc3339(job.window.start),
            end: rfc3339(job.window.end),
        },
        revision: (job.key.revision() > 1).then(|| job.key.revision()),
        supersedes: job.supersedes.as_ref(),
        artifact: ArtifactBody::of(&ready.artifact),
    }
}

/// The body of a webhook whose inlined parts (`inline_bytes` in all) pass
/// `webhook.max_body_bytes`: the artifact's references and links to its parts.
fn linked_body(
    p: &Pipeline,
    delivery: &Delivery,
    ready: &Ready<'_>,
    inline_bytes: u64,
) -> Result<Vec<u8>, Outcome> {
    let limit = p.max_body_bytes;
    let links = p.links.as_ref().ok_or_else(|| {
        permanent(format!(
            "the body is {inline_bytes} bytes with the report inlined, over webhook.max_body_bytes ({}): set [server] public_url and link_secret_env to send links instead",
            crate::config::shown_size(limit)
        ))
    })?;
    let (job, sha) = (ready.job, ready.artifact.sha256.as_str());
    let link = |part| links.link(&job.key, sha, part);
    let body = crate::delivery::webhook::LinkedBody {
        version: crate::delivery::webhook::LinkedVersion,
        head: body_head(delivery, ready),
        links: crate::delivery::webhook::PartLinks {
            html: link(crate::delivery::links::Part::Html),
            text: link(crate::delivery::links::Part::Text),
            csv: ready
                .rendered
                .csv
                .as_ref()
                .map(|_| link(crate::delivery::links::Part::Csv)),
        },
        inline_bytes,
        max_body_bytes: limit,
        attachments: AttachmentBody::csv_of(
            &job.key,
            &ready.artifact,
            ready.rendered.csv.as_deref(),
        ),
    };
    serde_json::to_vec(&body).map_err(|e| permanent(format!("cannot encode the body: {e}")))
}
