//! One work item each: render a job, or attempt a delivery. Plain functions over the shared
//! [`Pipeline`], so the flow reads top-down.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::completer::Completion;
use super::failure::RenderFailure;
use super::file_render::{
    Drawn, Stepped, count_written, generated_at, render_data, render_in_one_step,
};
use super::hold::Hold;
use super::running::Slot;
use super::send::NotStarted;
use super::{Pipeline, Stats};
use crate::delivery::retry::Decision;
use crate::delivery::{Outcome, SendTarget};
use crate::domain::keys::DeliveryKey;
use crate::domain::outcome::ResponseClass;
use crate::domain::window::rfc3339;
use crate::ledger::{
    Delivery, DeliveryLease, DeliveryNext, Finish, Job, JobLease, LeasedDelivery, LeasedJob,
    LedgerError, NewAttempt, NewDelivery, Render, SKIPPED_FORMAT,
};
use crate::report::artifact::ArtifactRef;
use crate::report::render::Rendered;
use crate::report::source::FileSource;

/// Renders a leased job once and creates its deliveries, or reschedules / quarantines it.
pub(super) async fn render_job(
    p: &Arc<Pipeline>,
    leased: LeasedJob,
    completions: mpsc::Sender<Completion>,
    mut slot: Slot,
) {
    let LeasedJob { job, lease } = leased;
    let started = std::time::Instant::now();
    // Boxed: the render's state (source read, templates, store) is the largest part of this
    // future, and held inline it would stay allocated while the render waits for its commit.
    let rendered = Box::pin(render_and_store(p, &job, &lease)).await;
    p.metrics
        .render_duration
        .observe(started.elapsed().as_secs_f64());
    match rendered {
        Ok(Made::Artifact(artifact, deliveries, rendered)) => {
            let render = Render {
                lease,
                artifact,
                deliveries,
            };
            record_render(p, &job, render, rendered, &completions, &mut slot).await;
        }
        Ok(Made::Empty(why)) => match p.ledger.jobs().skip(&lease, &why, p.clock.now()).await {
            Ok(()) => {
                p.metrics.skipped.inc();
                tracing::info!(job = %job.key, reason = %why, "skipped: nothing to send");
            }
            Err(e) => {
                tracing::warn!(job = %job.key, error = %e, "could not record the skip; the lease will be rescued")
            }
        },
        Ok(Made::Decided(made)) => decided(p, &job, made),
        // The readiness gate recorded what follows (a wait, a skip, a quarantine).
        Ok(Made::Held) => {}
        Err(failure) => {
            let (class, why) = (failure.class(), failure.to_string());
            let attempt = u32::try_from(job.attempts).unwrap_or(u32::MAX);
            // The retry delay counts from the failure, not from the start of the render: a
            // source that took its whole timeout to fail still gets its full backoff.
            let failed_at = p.clock.now();
            let result = match p.policy.decide(
                failed_at,
                job.created_at,
                attempt,
                class,
                None,
                super::jitter(),
            ) {
                Decision::Retry { at, .. } => {
                    tracing::warn!(job = %job.key, error = %why, retry_at = %rfc3339(at), "render failed; will retry");
                    let r = p.ledger.jobs().retry(&lease, at, &why, p.clock.now()).await;
                    if r.is_ok() {
                        p.nudge.at(at);
                    }
                    r
                }
                Decision::Quarantine { why: budget } => {
                    let why = if class == ResponseClass::Permanent {
                        why
                    } else {
                        format!("{why} ({budget})")
                    };
                    tracing::error!(job = %job.key, error = %why, "render failed; quarantined");
                    Stats::bump(&p.stats.quarantined);
                    p.metrics.quarantined.inc();
                    p.ledger
                        .jobs()
                        .quarantine(&lease, &why, p.clock.now())
                        .await
                }
                Decision::Sent => Ok(()),
            };
            if let Err(e) = result {
                tracing::warn!(job = %job.key, error = %e, "could not record the render failure");
            }
        }
    }
}

/// Hands a render to the completer and says what came of it; its deliveries, born leased,
/// start with the parts in hand (`rendered`, when this render made them).
async fn record_render(
    p: &Pipeline,
    job: &Job,
    render: Render,
    rendered: Option<Arc<Rendered>>,
    completions: &mpsc::Sender<Completion>,
    slot: &mut Slot,
) {
    let (count, sha256) = (render.deliveries.len(), render.artifact.sha256.clone());
    let (reply, recorded) = oneshot::channel();
    let completion = Completion::Rendered { render, reply };
    match hand_off(completions, completion, recorded, slot).await {
        Some(Ok(born)) => {
            Stats::bump(&p.stats.rendered);
            tracing::info!(job = %job.key, deliveries = count, sha256 = %sha256, "rendered");
            p.adopt(born, rendered);
        }
        Some(Err(e)) => {
            tracing::warn!(job = %job.key, error = %e, "could not record the render; the lease will be rescued")
        }
        None => {
            tracing::warn!(job = %job.key, "the pool stopped before the render was recorded; the lease will be rescued")
        }
    }
}

/// What a render made: the stored artifact and the deliveries to create, nothing to send and
/// why (the report's `skip_if_empty` found its data empty), or nothing yet (its data is not
/// ready: the gate recorded what follows).
enum Made {
    /// The artifact, its deliveries, and its parts when this render made them (not when it
    /// found them stored by an earlier attempt).
    Artifact(ArtifactRef, Vec<NewDelivery>, Option<Arc<Rendered>>),
    Empty(String),
    /// Decided under `send_when = "changed"` or `"alert"`, and recorded with its render or skip.
    Decided(super::decide::Made),
    Held,
}

/// Says what a decided render came to, in the log and the metrics.
fn decided(p: &Pipeline, job: &Job, made: super::decide::Made) {
    let d = &made.decision;
    let report = job.key.report().as_str();
    if let Some(alert) = &d.alert {
        p.metrics.alert(report, alert.triggered, d.event);
    }
    match d.send {
        true => {
            Stats::bump(&p.stats.rendered);
            tracing::info!(job = %job.key, decision = %d.words, "rendered: sent as its report's send_when decides");
        }
        false => {
            p.metrics.skipped.inc();
            tracing::info!(job = %job.key, decision = %d.words, "skipped: not sent, as its report's send_when decides");
        }
    }
    drop(made.rendered);
}

async fn render_and_store(
    p: &Pipeline,
    job: &Job,
    lease: &JobLease,
) -> Result<Made, RenderFailure> {
    let reports = p.catalog.current();
    let report = reports
        .by_id
        .get(job.key.report().as_str())
        .ok_or_else(|| RenderFailure::Unconfigured(job.key.report().to_string()))?;
    let deliveries: Vec<NewDelivery> = crate::delivery::of_report(report)
        .into_iter()
        .map(|(kind, destination)| NewDelivery {
            key: DeliveryKey::new(job.key.clone(), kind, destination),
        })
        .collect();
    // Render once: an artifact stored by an earlier attempt (say, before a crash) is reused.
    // A job's first lease had no earlier attempt, so the store is not listed for one (on a
    // `file://` store a listing is a blocking task, on S3 a request, for every render).
    let (id, date) = (job.key.report().as_str(), job.key.day());
    // A report that decides whether to send reads its data again: the decision needs it.
    let existing = match lease.is_first() || report.send_rule.is_some() {
        true => None,
        false => p.artifacts.find(id, &date).await?,
    };
    if let Some(artifact) = existing {
        return Ok(Made::Artifact(artifact, deliveries, None));
    }
    let stale = match super::wait::gate(p, job, lease, report).await {
        super::wait::Gate::Render { stale } => stale,
        super::wait::Gate::Held => return Ok(Made::Held),
    };
    if let Some(rule) = &report.send_rule {
        let both = ((job, lease), (report, rule));
        return Ok(
            match super::decide::render(p, both.0, both.1, deliveries, stale).await? {
                super::decide::Outcome::Decided(made) => Made::Decided(made),
                super::decide::Outcome::Empty(why) => Made::Empty(why),
                super::decide::Outcome::Behind => Made::Held,
            },
        );
    }
    let file = report
        .source
        .settings::<crate::report::source::FileSource>();
    if let (Some(FileSource { path }), true) = (file, p.artifacts.is_local()) {
        let templates = reports.templates.get(&report.template).cloned();
        let step = render_in_one_step(p, job, (report.clone(), templates), path, stale);
        return Ok(match step.await? {
            Stepped::Empty(why) => Made::Empty(why),
            Stepped::Stored(artifact, rendered, wrote) => {
                count_written(p, &artifact, wrote);
                Made::Artifact(artifact, deliveries, Some(rendered))
            }
        });
    }
    let (source, deadline) = (&report.source, p.work_deadline());
    let data = crate::report::source::fetch_within(
        source,
        &job.window,
        &p.http,
        deadline,
        report.source_limit,
    )
    .await?;
    let templates = reports.templates.get(&report.template).map(|t| &**t);
    let job_at = (&job.key, &job.window, generated_at(job));
    let allowed = (stale, p.ledger.nodes().write_format() >= SKIPPED_FORMAT);
    let made = (templates, p.links.as_ref());
    let rendered = match render_data(report, made, job_at, data, allowed)? {
        Drawn::Empty(why) => return Ok(Made::Empty(why)),
        Drawn::Parts(rendered) => Arc::new(rendered),
    };
    let (artifact, wrote) = p.artifacts.write(id, &date, &rendered).await?;
    count_written(p, &artifact, wrote);
    Ok(Made::Artifact(artifact, deliveries, Some(rendered)))
}

/// Hands an outcome to the completer, frees the slot (the work is over; new work starts while
/// the outcome waits for its commit, its lease still registered), and waits for the commit.
/// `None` when the completer is gone.
async fn hand_off<T>(
    completions: &mpsc::Sender<Completion>,
    completion: Completion,
    recorded: oneshot::Receiver<T>,
    slot: &mut Slot,
) -> Option<T> {
    completions.send(completion).await.ok()?;
    slot.free();
    recorded.await.ok()
}

/// One leased delivery to attempt: its job's artifact (shared with the job's other deliveries
/// leased together), where its sends go (the throttle's key), and how long this node knows it holds the lease.
pub(super) struct SendItem {
    pub(super) leased: LeasedDelivery,
    pub(super) artifact: Arc<super::send::JobArtifact>,
    pub(super) target: SendTarget,
    pub(super) hold: Arc<Hold>,
}

/// Attempts one leased delivery and records the attempt and what follows.
pub(super) async fn deliver(
    p: &Arc<Pipeline>,
    item: SendItem,
    completions: mpsc::Sender<Completion>,
    mut slot: Slot,
) {
    let SendItem {
        leased,
        artifact,
        target,
        hold,
    } = item;
    let LeasedDelivery {
        delivery, lease, ..
    } = leased;
    let shown = delivery.key.shown_lazily();
    match super::send::suppression(p, &delivery.key).await {
        Ok(None) => {}
        Ok(Some(why)) => return super::send::suppressed(p, &delivery.key, &lease, &why).await,
        Err(e) => return not_started(p, &lease, shown, &e).await,
    }
    // An attempt is requested when its delivery is leased: lease-to-result is what it cost.
    let requested_at = crate::domain::clock::sub(lease.expires_at(), p.config.lease);
    // Boxed: the HTTP or SMTP send's state is most of this future's size, and held inline it
    // would stay allocated in every finished send waiting for its outcome's commit (a batch
    // of them at a time).
    let send = Box::pin(attempt_within_deadline(
        p,
        &delivery,
        (&lease, &hold),
        &artifact,
    ))
    .await;
    // The job's artifact (its parts, read once for its deliveries) is not kept while the
    // outcome waits for its commit.
    drop(artifact);
    let mut outcome = match send {
        Ok(outcome) => outcome,
        Err(NotStarted(e)) => return not_started(p, &lease, shown, &e).await,
    };
    let finished_at = p.clock.now();
    let attempt_no = u32::try_from(delivery.attempts).unwrap_or(u32::MAX);
    // A redrive gives a fresh budget: count attempts and age from it.
    let decision = p.policy.decide(
        finished_at,
        delivery.budget_since,
        u32::try_from(delivery.budget_attempts_used()).unwrap_or(u32::MAX),
        outcome.class,
        outcome.retry_after,
        super::jitter(),
    );
    let decision = under_policy(p, &delivery.key, &mut outcome, decision);
    throttle_on(p, target.as_str(), &outcome, &decision, finished_at);
    let (next, reason) = next_of(&outcome, &decision);
    let record = NewAttempt {
        requested_at,
        finished_at,
        class: outcome.class,
        code: outcome.code,
        retry_after: outcome.retry_after,
        reason: Some(reason.clone()),
        diagnostics: outcome.diagnostics.clone(),
    };
    (p.metrics).attempt(delivery.key.kind().as_str(), outcome.class.as_str());
    let (reply, recorded) = oneshot::channel();
    let completion = Completion::Finished {
        finish: Finish {
            lease,
            attempt: record,
            next,
        },
        job_key: delivery.key.job().clone(),
        reply,
    };
    let recorded = hand_off(&completions, completion, recorded, &mut slot).await;
    if was_recorded(recorded, shown) {
        let class = outcome.class;
        recorded_attempt(p, shown, attempt_no, class, next, &reason, finished_at);
    }
}

/// Whether an attempt's commit recorded it; if not, says why in the log (its lease is rescued,
/// or already went to another worker, whose retry keeps the same key).
fn was_recorded(
    recorded: Option<super::completer::Recorded>,
    shown: crate::domain::keys::Redacted<'_>,
) -> bool {
    match recorded {
        Some(Ok(())) => true,
        Some(Err(e)) if matches!(*e, LedgerError::LeaseLost { .. }) => {
            tracing::warn!(delivery = %shown, "lease lost before the outcome was recorded; the rescuer's retry reuses the same key");
            false
        }
        Some(Err(e)) => {
            tracing::error!(delivery = %shown, error = %e, "could not record the attempt; the lease will be rescued");
            false
        }
        None => {
            tracing::error!(delivery = %shown, "the pool stopped before the attempt was recorded; the lease will be rescued");
            false
        }
    }
}

/// One attempt, cut at the send's deadline. A send that outlives its own timeout (or its
/// lease) may have reached the receiver: it is `ambiguous`, and the retry keeps the same key.
async fn attempt_within_deadline(
    p: &Pipeline,
    delivery: &Delivery,
    held: (&DeliveryLease, &Hold),
    artifact: &super::send::JobArtifact,
) -> Result<Outcome, NotStarted> {
    let deadline = p.send_deadline(*delivery.key.kind());
    let send = super::send::attempt(p, delivery, held, artifact, p.clock.now());
    match tokio::time::timeout(deadline, send).await {
        Ok(attempted) => attempted,
        Err(_) => {
            let waited = crate::domain::duration::Span::from_std(deadline);
            let why = format!("no answer within {waited}: the send was cut at its deadline");
            Ok(Outcome::new(ResponseClass::Ambiguous, None, why))
        }
    }
}

/// A send whose lease could not be confirmed was not started: nothing reached the receiver.
/// A lease that ran out belongs to whoever rescued it; one the ledger could not confirm goes
/// back to the queue without counting an attempt (or, if that fails too, to the rescuer).
async fn not_started(
    p: &Pipeline,
    lease: &DeliveryLease,
    shown: crate::domain::keys::Redacted<'_>,
    e: &LedgerError,
) {
    if matches!(e, LedgerError::LeaseLost { .. }) {
        tracing::warn!(
            delivery = %shown,
            "not sent: the lease ran out before the send started (was this node paused?); whoever holds it now sends it"
        );
        return;
    }
    tracing::error!(delivery = %shown, error = %e, "not sent: the lease could not be confirmed before the send started");
    match p.ledger.deliveries().release(lease, p.clock.now()).await {
        Ok(()) => p.nudge.now(),
        Err(e) => {
            tracing::warn!(delivery = %shown, error = %e, "could not return the unsent delivery; the rescuer will")
        }
    }
}

/// Counts and logs an attempt whose outcome the ledger recorded.
fn recorded_attempt(
    p: &Pipeline,
    shown: crate::domain::keys::Redacted<'_>,
    attempt_no: u32,
    class: ResponseClass,
    next: DeliveryNext,
    reason: &str,
    finished_at: chrono::DateTime<chrono::Utc>,
) {
    match next {
        DeliveryNext::Sent => {
            Stats::bump(&p.stats.sent);
            tracing::info!(delivery = %shown, attempt = attempt_no, "sent");
        }
        DeliveryNext::Retry { ready_at } => {
            Stats::bump(&p.stats.retrying);
            p.nudge.at(ready_at);
            p.metrics
                .retry_delay
                .observe((ready_at - finished_at).num_milliseconds().max(0) as f64 / 1000.0);
            tracing::warn!(delivery = %shown, attempt = attempt_no, class = class.as_str(), reason = %reason, retry_at = %rfc3339(ready_at), "will retry");
        }
        DeliveryNext::Quarantine => {
            Stats::bump(&p.stats.quarantined);
            p.metrics.quarantined.inc();
            tracing::error!(delivery = %shown, attempt = attempt_no, class = class.as_str(), reason = %reason, "quarantined");
        }
    }
}

/// What an outcome tells the throttles: a 429 pauses its host and slows admission; an
/// answer clears the host's pause.
fn throttle_on(
    p: &Pipeline,
    host: &str,
    outcome: &Outcome,
    decision: &Decision,
    finished_at: chrono::DateTime<chrono::Utc>,
) {
    match outcome.class {
        ResponseClass::RateLimited => {
            Stats::bump(&p.stats.rate_limited);
            p.metrics.rate_limited.inc();
            p.admission.on_rate_limited(finished_at);
            let until = (p.policy).pause_until(finished_at, outcome.retry_after, decision);
            p.throttle.pause(host, until);
        }
        ResponseClass::Accepted => {
            p.admission.on_accepted(finished_at);
            p.throttle.clear(host);
        }
        _ => p.throttle.clear(host),
    }
}

/// What follows an ambiguous attempt to a destination whose kind has a policy for one (a chat
/// post, of which its service cannot recognise a second copy): held for an operator, or
/// retried; the attempt's reason says which.
fn under_policy(
    p: &Pipeline,
    key: &crate::domain::keys::DeliveryKey,
    outcome: &mut Outcome,
    decision: Decision,
) -> Decision {
    use crate::delivery::destination::OnAmbiguous;
    if outcome.class != ResponseClass::Ambiguous {
        return decision;
    }
    let report = p.catalog.get(key.job().report().as_str());
    match report.and_then(|r| crate::delivery::on_ambiguous(&r, key)) {
        None => decision,
        Some(OnAmbiguous::Retry) => {
            if matches!(decision, Decision::Retry { .. }) {
                let words = "; on_ambiguous = \"retry\": retried, so it may arrive twice";
                outcome.reason.push_str(words);
            }
            decision
        }
        Some(OnAmbiguous::Quarantine) => Decision::Quarantine {
            why: "on_ambiguous = \"quarantine\": not retried, as it may have arrived; see whether it did, and redrive it if not".into(),
        },
    }
}

/// What follows an attempt, and the reason recorded with it (a quarantine says why).
fn next_of(outcome: &Outcome, decision: &Decision) -> (DeliveryNext, String) {
    match decision {
        Decision::Sent => (DeliveryNext::Sent, outcome.reason.clone()),
        Decision::Retry { at, .. } => (
            DeliveryNext::Retry { ready_at: *at },
            outcome.reason.clone(),
        ),
        Decision::Quarantine { why } => {
            let reason = if outcome.class == ResponseClass::Permanent {
                outcome.reason.clone()
            } else {
                format!("{}; {why}", outcome.reason)
            };
            (DeliveryNext::Quarantine, reason)
        }
    }
}
