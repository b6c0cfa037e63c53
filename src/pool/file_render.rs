//! A report whose data is a file and whose artifacts go to a `file://` folder (the embedded
//! default) is read, rendered and stored on one blocking thread: one hand-off to the blocking
//! pool for its render instead of two (the read, then the write), and the render's CPU off the
//! runtime's threads, which the sends need. [`render_data`], what a report's data becomes, is
//! shared with every other render (`work.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Pipeline;
use super::failure::RenderFailure;
use crate::config::Report;
use crate::domain::keys::JobKey;
use crate::domain::window::Window;
use crate::ledger::{Job, SKIPPED_FORMAT};
use crate::report::artifact::{ArtifactError, ArtifactRef};
use crate::report::render::{Rendered, Templates};
use crate::report::source::SourceError;

/// What the step made: the stored artifact, its parts and whether this render wrote it, or
/// nothing to send and why (`skip_if_empty`).
pub(super) enum Stepped {
    Stored(ArtifactRef, Arc<Rendered>, bool),
    Empty(String),
}

/// How far the step got: what a deadline cut, for the failure to say.
const READING: u8 = 0;
const RENDERING: u8 = 1;
const WRITING: u8 = 2;

/// Renders `job` of `report` (a file source) with `templates` into the pool's `file://` store,
/// cut at the work deadline as the file's read was.
pub(super) async fn render_in_one_step(
    p: &Pipeline,
    job: &Job,
    (report, templates): (Arc<Report>, Option<Arc<Templates>>),
    path: &std::path::Path,
    stale: bool,
) -> Result<Stepped, RenderFailure> {
    let artifacts = p.artifacts.clone();
    let allowed = (stale, p.ledger.nodes().write_format() >= SKIPPED_FORMAT);
    let (key, window, path) = (job.key.clone(), job.window, path.to_path_buf());
    let links = p.links.clone();
    let generated_at = generated_at(job);
    let stage = Arc::new(AtomicU8::new(READING));
    let at = stage.clone();
    let step = move || -> Result<Stepped, RenderFailure> {
        let data = crate::report::source::read_json_file(&path, report.source_limit)?;
        at.store(RENDERING, Ordering::Relaxed);
        let job_at = (&key, &window, generated_at);
        let made = (templates.as_deref(), links.as_ref());
        let drawn = render_data(&report, made, job_at, data, allowed)?;
        let rendered = match drawn {
            Drawn::Empty(why) => return Ok(Stepped::Empty(why)),
            Drawn::Parts(rendered) => Arc::new(rendered),
        };
        at.store(WRITING, Ordering::Relaxed);
        let (id, date) = (key.report().as_str(), key.day());
        let written = artifacts.write_blocking(id, &date, &rendered);
        let (artifact, wrote) = written.unwrap_or_else(|| Err(not_local(&artifacts)))?;
        Ok(Stepped::Stored(artifact, rendered, wrote))
    };
    let backstop = p.work_deadline().saturating_add(Duration::from_secs(1));
    match tokio::time::timeout(backstop, tokio::task::spawn_blocking(step)).await {
        Ok(Ok(made)) => made,
        Ok(Err(stopped)) => Err(RenderFailure::Cut(format!("the render stopped: {stopped}"))),
        Err(_) => {
            let waited = crate::domain::duration::Span::from_std(backstop);
            Err(match stage.load(Ordering::Relaxed) {
                READING => RenderFailure::Source(SourceError::Transient(format!(
                    "no data within {waited}: the fetch was cut at its deadline"
                ))),
                RENDERING => RenderFailure::Cut(format!(
                    "the render took longer than {waited}: cut at its deadline"
                )),
                _ => RenderFailure::Cut(format!(
                    "the artifact's write took longer than {waited}: cut at its deadline"
                )),
            })
        }
    }
}

/// What a report's data became: its rendered parts, or why nothing is sent (`skip_if_empty`).
pub(super) enum Drawn {
    Parts(Rendered),
    Empty(String),
}

/// The instant a job's parts say they were generated: its first render lease, recorded in the
/// ledger, so a render repeated after a crash or a redrive writes the same bytes and never a
/// second artifact.
pub(super) fn generated_at(job: &Job) -> DateTime<Utc> {
    job.generated_at.unwrap_or(job.created_at)
}

/// Renders `data` for the job `key` of `report` (its window and generation instant) with its
/// `templates` and the parts its kinds make themselves, the report's link under `links`,
/// whatever its source and store: empty data at `skip_if_empty` ends the job instead, when every live
/// node reads the `skipped` state (`skip_allowed`; otherwise the log says it is sent as it is).
pub(super) fn render_data(
    report: &Report,
    (templates, links): (Option<&Templates>, Option<&crate::delivery::links::Links>),
    (key, window, generated_at): (&JobKey, &Window, DateTime<Utc>),
    data: serde_json::Value,
    (stale, skip_allowed): (bool, bool),
) -> Result<Drawn, RenderFailure> {
    if let Some(why) = (report.skip_if_empty.as_ref()).and_then(|at| at.empty_in(&data)) {
        if skip_allowed {
            return Ok(Drawn::Empty(why));
        }
        tracing::info!(job = %key, reason = %why, "not skipped: a live node of an older version does not know the state; sending as it is");
    }
    draw(
        report,
        (templates, links),
        (key, window, generated_at),
        data,
        (stale, None),
    )
    .map(Drawn::Parts)
}

/// Renders `data` for the job `key` of `report` as [`render_data`] does, without its empty
/// check, and with `alert` (what a `send_when = "alert"` decision says) in the context.
pub(super) fn draw(
    report: &Report,
    (templates, links): (Option<&Templates>, Option<&crate::delivery::links::Links>),
    (key, window, generated_at): (&JobKey, &Window, DateTime<Utc>),
    data: serde_json::Value,
    (stale, alert): (bool, Option<serde_json::Value>),
) -> Result<Rendered, RenderFailure> {
    let templates = templates.ok_or_else(|| RenderFailure::NotLoaded(report.template.clone()))?;
    let when = (key.date(), generated_at);
    let report_url = links.map(|l| l.report(key));
    let mut context =
        crate::report::render::context(report, when, window, data, (stale, report_url.as_deref()));
    let headline = alert
        .as_ref()
        .and_then(|a| a["headline"].as_str().map(str::to_string));
    if let (Some(alert), serde_json::Value::Object(c)) = (alert, &mut context) {
        c.insert("alert".into(), alert);
    }
    let defaults = crate::delivery::default_parts(report);
    let extras = crate::report::render::Extras {
        defaults: &defaults,
        charts: &report.charts,
        xlsx: report.attach.xlsx,
    };
    let mut rendered = templates.render(context, &extras)?;
    if let Some(h) = headline {
        rendered.parts.insert(
            crate::report::render::ALERT_PART.into(),
            serde_json::Value::String(h).to_string(),
        );
    }
    Ok(rendered)
}

/// Counts an artifact this render wrote.
pub(super) fn count_written(p: &Pipeline, artifact: &ArtifactRef, wrote: bool) {
    if wrote {
        super::Stats::bump(&p.stats.artifacts_written);
        p.metrics
            .artifact_bytes
            .inc_by(u64::try_from(artifact.bytes).unwrap_or(0));
    }
}

fn not_local(artifacts: &crate::report::artifact::ArtifactStore) -> ArtifactError {
    ArtifactError::Open {
        url: artifacts.url().to_string(),
        reason: "not a file:// store".into(),
    }
}
