//! The render of a job whose report sends only on a change or an alert (`send_when =
//! "changed"` or `"alert"`): its data read, its facts found, the decision the report's earlier
//! jobs lead to made, the artifact drawn for a send (an alert's marked as one), and the decision
//! recorded with the render or the skip in one transaction. When another job of the report was
//! decided meanwhile, the decision is made again from the new state.

use std::sync::Arc;

use super::Pipeline;
use super::failure::RenderFailure;
use super::file_render::{draw, generated_at};
use crate::config::Report;
use crate::domain::condition::{Decision, Facts, Rule, decide};
use crate::ledger::{Decided, Job, JobLease, NewDelivery, Render, ToDecide};
use crate::report::render::Rendered;

/// How many times a decision is made again after the report's state moved under it.
const TRIES: usize = 3;

/// What a decided render came to.
pub(super) enum Outcome {
    /// Decided and recorded.
    Decided(Made),
    /// Its data is empty at `skip_if_empty`: the caller skips it as any other.
    Empty(String),
    /// Back in the queue behind an earlier job of its report (recorded).
    Behind,
}

/// What a decided render made: the decision, and the parts sent when it sends.
pub(super) struct Made {
    pub(super) decision: Decision,
    pub(super) rendered: Option<Arc<Rendered>>,
}

/// Reads, decides, renders and records job `job` of `report` under `rule`.
pub(super) async fn render(
    p: &Pipeline,
    (job, lease): (&Job, &JobLease),
    (report, rule): (&Arc<Report>, &Rule),
    deliveries: Vec<NewDelivery>,
    stale: bool,
) -> Result<Outcome, RenderFailure> {
    let deadline = p.work_deadline();
    let data = crate::report::source::fetch_within(
        &report.source,
        &job.window,
        &p.http,
        deadline,
        report.source_limit,
    )
    .await?;
    if let Some(why) = (report.skip_if_empty.as_ref()).and_then(|at| at.empty_in(&data)) {
        return Ok(Outcome::Empty(why));
    }
    let facts = Facts::of(rule, &data)
        .map_err(|e| RenderFailure::Condition(format!("report {}: {e}", report.id)))?;
    let key = job.key.to_string();
    let mut moved = None;
    for _ in 0..TRIES {
        let expected = match moved.take() {
            Some(decision) => decision,
            None => {
                let earlier = p
                    .ledger
                    .decisions()
                    .earlier(&job.key)
                    .await
                    .map_err(ledger)?;
                decide(rule, &facts, &earlier, &key, p.clock.now())
            }
        };
        let drawn = match expected.send {
            true => Some(drawn(p, job, report, rule, data.clone(), (stale, &expected)).await?),
            false => None,
        };
        let render = drawn.as_ref().map(|(artifact, _)| Render {
            lease: lease.clone(),
            artifact: artifact.clone(),
            deliveries: deliveries.clone(),
        });
        let to_decide = ToDecide {
            lease,
            render,
            rule,
            facts: &facts,
            expected: &expected,
            lease_to: None,
            now: p.clock.now(),
        };
        match p
            .ledger
            .decisions()
            .record(to_decide)
            .await
            .map_err(ledger)?
        {
            Decided::Recorded(decision, _) => {
                p.nudge.now();
                let rendered = drawn.map(|(_, rendered)| rendered);
                return Ok(Outcome::Decided(Made { decision, rendered }));
            }
            Decided::Moved(decision) => moved = Some(decision),
            Decided::Behind(first, at) => {
                p.nudge.at(at);
                tracing::info!(job = %job.key, earlier = %first, "waits for an earlier job of its report to be decided first");
                return Ok(Outcome::Behind);
            }
        }
    }
    Err(RenderFailure::Cut(
        "the report's other jobs were decided while this one was: it is decided again on its next attempt".into(),
    ))
}

/// The artifact of a send: drawn with the alert's marks, and stored.
async fn drawn(
    p: &Pipeline,
    job: &Job,
    report: &Report,
    rule: &Rule,
    data: serde_json::Value,
    (stale, decision): (bool, &Decision),
) -> Result<(crate::report::artifact::ArtifactRef, Arc<Rendered>), RenderFailure> {
    let catalog = p.catalog.current();
    let templates = catalog.templates.get(&report.template).map(|t| &**t);
    let alert = match rule {
        Rule::Alert(a) => Some(a.context(decision)),
        Rule::Changed => None,
    };
    let job_at = (&job.key, &job.window, generated_at(job));
    let rendered = draw(
        report,
        (templates, p.links.as_ref()),
        job_at,
        data,
        (stale, alert),
    )?;
    let rendered = Arc::new(rendered);
    let (id, date) = (job.key.report().as_str(), job.key.day());
    let (artifact, wrote) = p.artifacts.write(id, &date, &rendered).await?;
    super::file_render::count_written(p, &artifact, wrote);
    Ok((artifact, rendered))
}

/// A ledger that could not decide: the render is tried again (or, its lease lost, by whoever
/// holds it now).
fn ledger(e: crate::ledger::LedgerError) -> RenderFailure {
    RenderFailure::Cut(format!("could not record the decision: {e}"))
}
