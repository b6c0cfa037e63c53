//! The HTTP surface (DESIGN §8): signed run ingestion, the ops API, metrics and health.
//!
//! - `POST /v1/runs` — an upstream system asks for a report run, signed per Standard Webhooks
//!   with the `whsec_` secret named by `server.ingest_secret_env`. The job insert and the record
//!   of the webhook-id commit together; 202 comes only after the commit; a replayed webhook-id or
//!   an existing job gets 200 with the same job key and `"duplicate": true`.
//! - `/v1/jobs`, `/v1/jobs/{key}`, `/v1/dlq`, `/v1/jobs/{key}/redrive`,
//!   `/v1/deliveries/{key}/redrive` — behind the bearer token named by `server.ops_token_env`.
//! - `GET /metrics` (Prometheus text), `GET /healthz` (process up), `GET /readyz` (ledger
//!   reachable and migrated).
//!
//! Every error has a JSON body `{"error": "…"}`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::NaiveDate;
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Report;
use crate::history::{Dlq, JobHistory};
use crate::keys::{DeliveryKey, JobKey};
use crate::ledger::{JobFilter, JobOrigin, JobState, Ledger, LedgerError, NewJob};
use crate::metrics::Metrics;
use crate::schedule::Fire;
use crate::signing::Secret;
use crate::supervisor::Health;

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 64 * 1024;
/// How far a `webhook-timestamp` may be from now.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 5 * 60;

/// What the handlers share.
#[derive(Clone)]
pub struct ServerState {
    pub ledger: Ledger,
    pub reports: Arc<HashMap<String, Report>>,
    pub clock: SharedClock,
    pub ingest_secret: Option<Secret>,
    pub ops_token: Option<String>,
    pub metrics: Arc<Metrics>,
    /// The daemon's services, for `/readyz`.
    pub health: Arc<Health>,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("ingest_secret", &self.ingest_secret.as_ref().map(|_| "***"))
            .field("ops_token", &self.ops_token.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// The routes, for `run` and for tests that mount them on port 0.
pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/v1/runs", post(ingest))
        .route("/v1/jobs", get(list_jobs))
        .route("/v1/jobs/{key}", get(show_job))
        .route("/v1/jobs/{key}/redrive", post(redrive_job))
        .route("/v1/deliveries/{key}/redrive", post(redrive_delivery))
        .route("/v1/dlq", get(dlq))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// A bind the server refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to serve on {0}, which is not a loopback address, without both the ops token and the ingest secret set"
)]
pub struct ExposureError(SocketAddr);

/// Refuses an exposed bind without credentials: off loopback both secrets must be set.
pub fn check_exposure(
    bind: SocketAddr,
    ops_token_set: bool,
    ingest_secret_set: bool,
) -> Result<(), ExposureError> {
    if bind.ip().is_loopback() || (ops_token_set && ingest_secret_set) {
        Ok(())
    } else {
        Err(ExposureError(bind))
    }
}

/// Serves until `cancel`, then stops accepting and finishes the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(cancel.cancelled_owned())
        .await
}

/// A refusal: its status and the message of its JSON body.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "error": self.message }))).into_response()
    }
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
    report: String,
    date: Option<String>,
}

/// A signed run request: verified, then its job recorded with its webhook-id.
async fn ingest(
    State(st): State<ServerState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = axum::body::to_bytes(body, BODY_LIMIT).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {BODY_LIMIT} bytes"),
        )
    })?;
    let now = st.clock.now();
    let id = verify_signature(&st, &headers, &body, now)?;
    let unprocessable = |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, m);
    let req: RunRequest =
        serde_json::from_slice(&body).map_err(|e| unprocessable(format!("invalid body: {e}")))?;
    let date = match &req.date {
        None => None,
        Some(d) => Some(
            NaiveDate::parse_from_str(d, "%Y-%m-%d")
                .map_err(|_| unprocessable(format!("date {d:?} is not YYYY-MM-DD")))?,
        ),
    };
    let Some(report) = st.reports.get(&req.report) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no report {:?}", req.report),
        ));
    };
    let date = date.unwrap_or_else(|| now.with_timezone(&report.timezone()).date_naive());
    let fire = Fire::for_date(report, date).ok_or_else(|| {
        unprocessable(format!(
            "{date} has no window in {}",
            report.timezone().name()
        ))
    })?;
    let job = NewJob {
        key: fire.key,
        fire_at: fire.fire_at,
        window: fire.window,
        ready_at: now,
        origin: JobOrigin::Ingest,
    };
    let out = st.ledger.ingest_run(&id, &job, now).await.map_err(|e| {
        tracing::error!(error = %e, "could not record a run request");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the ledger is unavailable; retry later",
        )
    })?;
    let duplicate = !out.created;
    st.metrics
        .ingest(if duplicate { "duplicate" } else { "created" });
    tracing::info!(job = %out.job_key, duplicate, "run requested");
    let status = if duplicate {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let reply = json!({ "job": out.job_key, "duplicate": duplicate });
    Ok((status, axum::Json(reply)).into_response())
}

/// Checks a run request's Standard Webhooks signature; returns its webhook-id.
fn verify_signature(
    st: &ServerState,
    headers: &HeaderMap,
    body: &[u8],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, ApiError> {
    let refuse = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, m);
    let Some(secret) = &st.ingest_secret else {
        return Err(refuse(
            "ingestion is not configured: the ingest secret is unset",
        ));
    };
    let (Some(id), Some(ts), Some(sig)) = (
        header_str(headers, "webhook-id"),
        header_str(headers, "webhook-timestamp"),
        header_str(headers, "webhook-signature"),
    ) else {
        return Err(refuse(
            "missing webhook-id, webhook-timestamp or webhook-signature",
        ));
    };
    let Ok(ts) = ts.trim().parse::<i64>() else {
        return Err(refuse("webhook-timestamp is not Unix seconds"));
    };
    if (now.timestamp() - ts).abs() > TIMESTAMP_TOLERANCE_SECS {
        return Err(refuse("webhook-timestamp is more than 5 minutes off"));
    }
    if secret.verify(id, ts, body, sig).is_err() {
        return Err(refuse("invalid signature"));
    }
    Ok(id.to_string())
}

/// The bearer token check, in constant time.
fn authorize(st: &ServerState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &st.ops_token else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the ops API is not configured: the ops token is unset",
        ));
    };
    let given = header_str(headers, header::AUTHORIZATION.as_str())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
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
struct JobsQuery {
    state: Option<String>,
    report: Option<String>,
    limit: Option<u32>,
}

async fn list_jobs(
    State(st): State<ServerState>,
    headers: HeaderMap,
    Query(q): Query<JobsQuery>,
) -> Result<Response, ApiError> {
    authorize(&st, &headers)?;
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
    };
    Ok(axum::Json(st.ledger.job_list(&filter).await?).into_response())
}

async fn show_job(
    State(st): State<ServerState>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&st, &headers)?;
    let key: JobKey = path_key("job", &key)?;
    match JobHistory::load(&st.ledger, &key).await? {
        Some(h) => Ok(axum::Json(h).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no job {key}"),
        )),
    }
}

async fn dlq(State(st): State<ServerState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&st, &headers)?;
    Ok(axum::Json(Dlq::load(&st.ledger).await?).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RedriveRequest {
    by: String,
    reason: String,
}

/// An authorized redrive's who and why (both required: redrives are audited).
fn redrive_request(
    st: &ServerState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<RedriveRequest, ApiError> {
    authorize(st, headers)?;
    let req: RedriveRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("invalid body: {e}"),
        )
    })?;
    if req.by.trim().is_empty() || req.reason.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "by and reason must not be empty: redrives are audited",
        ));
    }
    Ok(req)
}

async fn redrive_job(
    State(st): State<ServerState>,
    headers: HeaderMap,
    Path(key): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req = redrive_request(&st, &headers, &body)?;
    let key: JobKey = path_key("job", &key)?;
    let out = st
        .ledger
        .job_redrive(&key, &req.by, &req.reason, st.clock.now())
        .await?;
    Ok(axum::Json(json!({ "job": out.job_key, "deliveries": out.deliveries })).into_response())
}

async fn redrive_delivery(
    State(st): State<ServerState>,
    headers: HeaderMap,
    Path(key): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req = redrive_request(&st, &headers, &body)?;
    let key: DeliveryKey = path_key("delivery", &key)?;
    let out = st
        .ledger
        .delivery_redrive(&key, &req.by, &req.reason, st.clock.now())
        .await?;
    Ok(axum::Json(json!({ "job": out.job_key, "delivery": key })).into_response())
}

async fn metrics(State(st): State<ServerState>) -> Response {
    let now = st.clock.now();
    if let Ok(counts) = st.ledger.job_count_by_state().await {
        for state in JobState::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            st.metrics.set_jobs(state.as_str(), n);
        }
    }
    if let Ok(counts) = st.ledger.delivery_count_by_state().await {
        for state in ["pending", "sending", "sent", "quarantined"] {
            let n = counts
                .iter()
                .find(|(s, _)| s.as_str() == state)
                .map_or(0, |(_, n)| *n);
            st.metrics.set_deliveries(state, n);
        }
    }
    if let Ok(oldest) = st.ledger.job_oldest_ready(now).await {
        let age = oldest.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        st.metrics.oldest_ready_age.set(age);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}

async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// Ready when the ledger answers and is migrated and every service runs; otherwise 503 with
/// what is wrong.
async fn readyz(State(st): State<ServerState>) -> Response {
    let mut problems = st.health.down();
    // A ledger that does not answer within a second is not ready: a probe must not hang.
    let ledger_ready = tokio::time::timeout(std::time::Duration::from_secs(1), st.ledger.ready())
        .await
        .unwrap_or(false);
    if !ledger_ready {
        problems.insert(0, "the ledger is unreachable or not migrated".to_string());
    }
    let services = st.health.snapshot();
    if problems.is_empty() {
        axum::Json(json!({ "status": "ready", "services": services })).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "error": problems.join("; "), "services": services })),
        )
            .into_response()
    }
}
