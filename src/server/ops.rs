//! The ops API: jobs, one job's history, dead letters and redrives, behind the bearer token
//! named by `server.ops_token_env`. The token is checked (by [`require_token`], a route layer)
//! before any part of the request is parsed. What it answers is `crate::views::api`'s contract,
//! recipient addresses and webhook paths redacted as the CLI does, unless `?reveal=true`.

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::{ApiError, ServerState, header_str};
use crate::domain::keys::{DeliveryKey, JobKey};
use crate::ledger::{Audit, JobFilter, JobState, LedgerError, Via};
use crate::views::api::{
    DeliveryRedrivenV1, DlqV1, JobHistoryV1, JobRedrivenV1, JobV1, redacted_json,
};
use crate::views::history::{Dlq, JobHistory, Redactions};

/// Refuses a request without the ops token before its handler parses anything.
pub(super) async fn require_token(
    State(st): State<ServerState>,
    request: Request,
    next: Next,
) -> Response {
    let checked = authorize(&st, request.headers())
        .and_then(|()| super::announced_too_large(request.headers()));
    match checked {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// The bearer token check, in constant time.
fn authorize(st: &ServerState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &st.tokens.ops else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the ops API is not configured: the ops token is unset",
        ));
    };
    // The scheme is case-insensitive (RFC 7235); the token is not.
    let given = header_str(headers, header::AUTHORIZATION.as_str())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, token)| token.trim_start());
    if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token",
        ))
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> ApiError {
        match e {
            LedgerError::NotFound { what, key } => {
                ApiError::new(StatusCode::NOT_FOUND, format!("no {what} {key}"))
            }
            LedgerError::WrongState {
                what, key, actual, ..
            } => ApiError::new(
                StatusCode::CONFLICT,
                format!("{what} {key} is {actual}; only quarantined work can be redriven"),
            ),
            other => {
                tracing::error!(error = %other, "ops API ledger error");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the ledger is unavailable")
            }
        }
    }
}

/// A key from a path: one that does not parse names no work.
fn path_key<K: std::str::FromStr>(what: &str, key: &str) -> Result<K, ApiError> {
    key.parse()
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, format!("no {what} {key}")))
}

#[derive(Debug, Deserialize)]
pub(super) struct JobsQuery {
    state: Option<String>,
    report: Option<String>,
    limit: Option<u32>,
}

pub(super) async fn list_jobs(
    State(st): State<ServerState>,
    Query(q): Query<JobsQuery>,
) -> Result<Response, ApiError> {
    let state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(JobState::parse(s).map_err(|_| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{s:?} is not a job state"),
            )
        })?),
    };
    let filter = JobFilter {
        state,
        report: q.report.filter(|r| !r.is_empty()),
        limit: Some(q.limit.unwrap_or(100).min(1000)),
        ..JobFilter::default()
    };
    let jobs: Vec<JobV1> = st
        .ledger
        .jobs()
        .list(&filter)
        .await?
        .iter()
        .map(JobV1::from)
        .collect();
    Ok(axum::Json(jobs).into_response())
}

/// `?reveal=true`: recipient addresses and webhook URLs in full (as the CLI's `--reveal`).
#[derive(Debug, Deserialize)]
pub(super) struct RevealQuery {
    #[serde(default)]
    pub(super) reveal: bool,
}

/// `value` as JSON, with what `hide` names redacted unless the reader asked to reveal it.
pub(super) fn answer<T: serde::Serialize>(
    value: &T,
    hide: Redactions,
    q: &RevealQuery,
) -> Result<Response, ApiError> {
    let hide = if q.reveal {
        Redactions::default()
    } else {
        hide
    };
    let v = redacted_json(value, &hide).map_err(|e| {
        tracing::error!(error = %e, "ops API: cannot encode a reply");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the reply")
    })?;
    Ok(axum::Json(v).into_response())
}

pub(super) async fn show_job(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    Query(q): Query<RevealQuery>,
) -> Result<Response, ApiError> {
    let key: JobKey = path_key("job", &key)?;
    match JobHistory::load(&st.ledger, &key).await? {
        Some(h) => answer(&JobHistoryV1::from(&h), h.redactions(), &q),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no job {key}"),
        )),
    }
}

pub(super) async fn dlq(
    State(st): State<ServerState>,
    Query(q): Query<RevealQuery>,
) -> Result<Response, ApiError> {
    let dlq = Dlq::load(&st.ledger).await?;
    answer(&DlqV1::from(&dlq), dlq.redactions(), &q)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RedriveRequest {
    by: String,
    reason: String,
}

/// An authorized redrive's who and why (both required: redrives are audited).
fn redrive_request(body: &[u8]) -> Result<RedriveRequest, ApiError> {
    let req: RedriveRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid body: {e}"),
        )
    })?;
    Ok(req)
}

impl RedriveRequest {
    /// Its audit; 422 without a name or a reason.
    fn audit(&self) -> Result<Audit<'_>, ApiError> {
        Audit::new(&self.by, &self.reason, Via::Api)
            .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
    }
}

/// A redrive's body, read as JSON within the server's bounds (415, 408, 413 as for any body),
/// then parsed (422).
impl<S: Send + Sync> axum::extract::FromRequest<S> for RedriveRequest {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let body = super::read_json_body(&parts.headers, body).await?;
        redrive_request(&body)
    }
}

pub(super) async fn redrive_job(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    req: RedriveRequest,
) -> Result<Response, ApiError> {
    let key: JobKey = path_key("job", &key)?;
    let out = st
        .ledger
        .jobs()
        .redrive(&key, &req.audit()?, st.clock.now())
        .await?;
    Ok(axum::Json(JobRedrivenV1::from(&out)).into_response())
}

pub(super) async fn redrive_delivery(
    State(st): State<ServerState>,
    Path(key): Path<String>,
    req: RedriveRequest,
) -> Result<Response, ApiError> {
    let key: DeliveryKey = path_key("delivery", &key)?;
    let out = st
        .ledger
        .deliveries()
        .redrive(&key, &req.audit()?, st.clock.now())
        .await?;
    Ok(axum::Json(DeliveryRedrivenV1::new(&out.job_key, &key)).into_response())
}
