//! A report whose data is a file and whose artifacts go to a `file://` folder (the embedded
//! default) is read, rendered and stored on one blocking thread: one hand-off to the blocking
//! pool for its render instead of two (the read, then the write), and the render's CPU off the
//! runtime's threads, which the sends need.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use super::Pipeline;
use super::failure::RenderFailure;
use crate::artifact::{ArtifactError, ArtifactRef};
use crate::config::Report;
use crate::keys::JobKey;
use crate::ledger::{Job, SKIPPED_FORMAT};
use crate::render::{Rendered, Templates};
use crate::source::SourceError;

/// What the step made: the stored artifact, its parts and whether this render wrote it, or
/// nothing to send and why (`skip_if_empty`).
pub(super) enum Stepped {
    Stored(ArtifactRef, Rendered, bool),
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
    let skip_allowed = p.ledger.write_format() >= SKIPPED_FORMAT;
    let (key, window, path) = (job.key.clone(), job.window, path.to_path_buf());
    let generated_at = job.generated_at.unwrap_or(job.created_at);
    let stage = Arc::new(AtomicU8::new(READING));
    let at = stage.clone();
    let step = move || -> Result<Stepped, RenderFailure> {
        let data = crate::source::read_json_file(&path, report.source_limit)?;
        let empty = report
            .skip_if_empty
            .as_ref()
            .and_then(|at| at.empty_in(&data));
        if let Some(why) = empty.and_then(|why| skips(&key, why, skip_allowed)) {
            return Ok(Stepped::Empty(why));
        }
        let templates =
            templates.ok_or_else(|| RenderFailure::NotLoaded(report.template.clone()))?;
        at.store(RENDERING, Ordering::Relaxed);
        let when = (key.date(), generated_at);
        let context = crate::render::context(&report, when, &window, data, stale);
        let rendered = templates.render(&context)?;
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
            let waited = crate::duration::Span::from_std(backstop);
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

/// `why` the data is empty, when the job may end `skipped` (`allowed`: every live node reads
/// that state); otherwise `None`, and the log says the report is sent as it is.
pub(super) fn skips(key: &JobKey, why: String, allowed: bool) -> Option<String> {
    if !allowed {
        tracing::info!(job = %key, reason = %why, "not skipped: a live node of an older version does not know the state; sending as it is");
        return None;
    }
    Some(why)
}

fn not_local(artifacts: &crate::artifact::ArtifactStore) -> ArtifactError {
    ArtifactError::Open {
        url: artifacts.url().to_string(),
        reason: "not a file:// store".into(),
    }
}
