//! `/ui/jobs/{key}`: one job as a timeline (what `show` tells), its artifact's preview in a
//! sandboxed frame, and the operator's actions on it: redrive the job or one delivery, cancel.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::job_view::{self, delivery_ref};
use super::session::Session;
use super::{ConsoleError, ServerState, page};
use crate::domain::keys::JobKey;
use crate::ledger::{Audit, LedgerError, Via};
use crate::views::history::JobHistory;

/// What the artifact frame may do: show the report's own inline styles and data images; no
/// script, no request, no form; a unique origin (`sandbox`).
pub(crate) const ARTIFACT_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
     frame-ancestors 'self'; sandbox";

fn job_key(key: &str) -> Result<JobKey, ConsoleError> {
    key.parse().map_err(|_| {
        ConsoleError::Ledger(LedgerError::NotFound {
            what: "job",
            key: key.to_string(),
        })
    })
}

async fn history(st: &ServerState, key: &JobKey) -> Result<JobHistory, ConsoleError> {
    JobHistory::load(&st.ledger, key).await?.ok_or_else(|| {
        ConsoleError::Ledger(LedgerError::NotFound {
            what: "job",
            key: key.to_string(),
        })
    })
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    Path(key): Path<String>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let h = history(&st, &key).await?;
    let tz = st.reports.get(key.report().as_str()).map(|r| r.timezone());
    Ok(page(job_view::job(&session, &h, st.clock.now(), tz)).into_response())
}

/// The rendered HTML, for the preview frame, under its own policy.
pub(super) async fn artifact(
    State(st): State<ServerState>,
    Path(key): Path<String>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let body = match stored(&st, &key).await? {
        Ok(r) => with_charts_inline(r),
        Err(refused) => return Ok(refused),
    };
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(ARTIFACT_CSP),
    );
    Ok(r)
}

/// The HTML with each chart's `cid:` replaced by the picture itself as a `data:` URI: the
/// frame is a unique origin that neither sends the console's cookie nor reaches another URL,
/// and the preview is the operator's alone (emails never carry `data:` pictures).
fn with_charts_inline(r: crate::report::render::Rendered) -> String {
    use base64::Engine as _;
    crate::report::render::cids_replaced(r.html, &r.images, |_, png| {
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        format!("data:image/png;base64,{data}")
    })
}

/// `GET /ui/jobs/{key}/artifact.csv`: the CSV attachment, as a download.
pub(super) async fn artifact_csv(
    State(st): State<ServerState>,
    Path(key): Path<String>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let csv = match stored(&st, &key).await? {
        Ok(r) => r.csv,
        Err(refused) => return Ok(refused),
    };
    let Some(csv) = csv else {
        return Ok((StatusCode::NOT_FOUND, "This report attaches no CSV.").into_response());
    };
    let disposition = format!("attachment; filename=\"{}\"", key.csv_filename());
    let mut r = ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv).into_response();
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

/// A job's stored artifact, or the page that says why there is none to show.
async fn stored(
    st: &ServerState,
    key: &crate::domain::keys::JobKey,
) -> Result<Result<crate::report::render::Rendered, Response>, ConsoleError> {
    let h = history(st, key).await?;
    Ok(match (&h.job.artifact, h.job.artifact_deleted_at) {
        (Some(a), None) => match st.artifacts.read_rendered(a).await {
            Ok(r) => Ok(std::sync::Arc::unwrap_or_clone(r)),
            Err(e) => {
                tracing::warn!(job = %key, error = %e, "console: artifact unreadable");
                let msg = "The artifact could not be read from the store; see the daemon's log.";
                Err((StatusCode::BAD_GATEWAY, msg).into_response())
            }
        },
        (Some(_), Some(_)) => Err((StatusCode::GONE, "Deleted by retention.").into_response()),
        (None, _) => Err((StatusCode::NOT_FOUND, "Not rendered.").into_response()),
    })
}

/// An action's form: the CSRF token, who and why (both required: actions are audited), and
/// for a delivery's redrive its [`delivery_ref`].
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ActionForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub delivery: String,
}

impl CsrfForm for ActionForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// An operator's action on job `key` done: logged with its audit, then the page of `shown`
/// (the job, or the revision a reissue made) follows.
fn acted(action: &str, key: &JobKey, shown: &JobKey, audit: &Audit<'_>) -> Response {
    tracing::info!(job = %key, shown = %shown, by = audit.by(), via = %audit.via(), "console {action}");
    Redirect::to(&format!("/ui/jobs/{shown}")).into_response()
}

/// The audit of a console action: the form's `by` and `reason`, both required.
fn audit_of(f: &ActionForm) -> Result<Audit<'_>, ConsoleError> {
    Audit::new(&f.by, &f.reason, Via::Console).map_err(|e| ConsoleError::Invalid(e.to_string()))
}

pub(super) async fn redrive(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    OperatorForm(f): OperatorForm<ActionForm>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let audit = audit_of(&f)?;
    let now = st.clock.now();
    if f.delivery.is_empty() {
        st.ledger.jobs().redrive(&key, &audit, now).await?;
    } else {
        let deliveries = st.ledger.deliveries().list(&key).await?;
        let Some(d) = deliveries
            .iter()
            .find(|d| delivery_ref(&d.key) == f.delivery)
        else {
            return Err(ConsoleError::Invalid(format!(
                "job {key} has no delivery {}",
                f.delivery
            )));
        };
        st.ledger.deliveries().redrive(&d.key, &audit, now).await?;
    }
    Ok(acted("redrive", &key, &key, &audit))
}

pub(super) async fn cancel(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    OperatorForm(f): OperatorForm<ActionForm>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let audit = audit_of(&f)?;
    st.ledger
        .jobs()
        .cancel(&key, &audit, st.clock.now())
        .await?;
    Ok(acted("cancel", &key, &key, &audit))
}

/// A new revision of a finished job, as a correction; the page of the new revision follows.
pub(super) async fn reissue(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    OperatorForm(f): OperatorForm<ActionForm>,
) -> Result<Response, ConsoleError> {
    let key = job_key(&key)?;
    let audit = audit_of(&f)?;
    let next = st
        .ledger
        .jobs()
        .reissue(&key, &audit, st.clock.now())
        .await?;
    Ok(acted("reissue", &key, &next, &audit))
}
