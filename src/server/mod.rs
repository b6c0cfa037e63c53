//! The HTTP surface (README.md, "HTTP"): signed run ingestion, the ops API, metrics and health.
//!
//! - `POST /v1/runs` ([`ingest`]): signed run requests.
//! - `/v1/jobs`, `/v1/jobs/{key}`, `/v1/dlq`, `/v1/jobs/{key}/redrive`,
//!   `/v1/deliveries/{key}/redrive` ([`ops`]): behind the bearer token.
//! - `GET /metrics` (Prometheus text), `GET /healthz` (process up), `GET /readyz` (ledger
//!   reachable and migrated).
//!
//! Every error has a JSON body `{"error": "…"}`.

use std::net::SocketAddr;
use std::sync::Arc;

mod bounces;
pub mod console;
mod head;
mod ingest;
mod links;
mod listen;
mod ops;
mod ses;
mod unsubscribe;

pub use ingest::parse_run_request;
pub use ingest::{RunRequest, RunRequestError};
use listen::BodyTimeout;
pub use listen::{Limits, serve};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::delivery::signing::Secret;
use crate::domain::clock::SharedClock;
use crate::ledger::{JobState, Ledger};
use crate::runtime::metrics::Metrics;
use crate::runtime::supervisor::Health;

/// The largest request body accepted.
pub(crate) const BODY_LIMIT: usize = 64 * 1024;
/// The largest body of a provider's event post (SendGrid batches its events).
const PROVIDER_BODY_LIMIT: usize = 1024 * 1024;
/// How far a `webhook-timestamp` may be from now.
pub(crate) const TIMESTAMP_TOLERANCE_SECS: i64 = 5 * 60;

/// What the handlers share.
#[derive(Clone)]
pub struct ServerState {
    pub ledger: Ledger,
    /// Where artifacts are read back from (the console's preview).
    pub artifacts: Arc<crate::report::artifact::ArtifactStore>,
    /// The reports in force (replaced at a reload).
    pub reports: crate::report::catalog::Catalog,
    pub clock: SharedClock,
    pub ingest_secret: Option<Secret>,
    /// The ops token (the JSON ops API's bearer token and the console's operator login) and
    /// the console's viewer token.
    pub tokens: console::session::Tokens,
    /// Session cookies marked `Secure` (the server is not on loopback).
    pub secure_cookies: bool,
    pub node: Node,
    /// Links to reports too large to send (`[server] public_url`); none without it.
    pub links: Option<crate::delivery::links::Links>,
    /// What bounces and complaints do to the addresses they name (`[recipients]`).
    pub recipients: crate::config::RecipientSettings,
    /// The console's "Send a test"; `None` when the email transport could not be built (the
    /// console says so).
    pub test_sender: Option<crate::views::test_send::TestSender>,
}

/// This process's services, as the server reports them: metrics, health (`/readyz`), the
/// sweeper (its policy, reload error and last sweeps) and the pool (its paused hosts).
#[derive(Clone)]
pub struct Node {
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub sweeper: Arc<crate::services::sweeper::Sweeper>,
    pub pool: crate::pool::PoolView,
    /// How long a node counts as live after its last heartbeat (three `heartbeat_every`).
    pub live_for: chrono::Duration,
    /// The reports late at the notifier's last round (the console's overview lists them first).
    pub late: crate::delivery::notice::LateBoard,
    /// Wakes this node's runbook driver (`runbook::Driver::with_waker`): the server started one.
    pub runbooks: crate::runtime::periodic::Nudge,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("ingest_secret", &self.ingest_secret.as_ref().map(|_| "***"))
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

/// The routes, for `run` and for tests that mount them on port 0.
/// Every error, axum's own rejections and fallbacks included, answers `{"error": "…"}`.
pub fn router(state: ServerState) -> Router {
    let ops = Router::new()
        .route("/v1/jobs", get(ops::list_jobs))
        .route("/v1/jobs/{key}", get(ops::show_job))
        .route(
            "/v1/jobs/{key}/redrive",
            making_work(post(ops::redrive_job), &state),
        )
        .route(
            "/v1/deliveries/{key}/redrive",
            making_work(post(ops::redrive_delivery), &state),
        )
        .route("/v1/dlq", get(ops::dlq))
        .route("/v1/bounces/dsn", post(bounces::dsn))
        .route("/v1/suppressions", get(bounces::suppressions))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ops::require_token,
        ));
    Router::new()
        .merge(ops)
        .merge(console::router(state.clone()))
        .route("/v1/runs", making_work(post(ingest::ingest), &state))
        .route("/v1/bounces/postmark", post(bounces::postmark))
        .route("/v1/bounces/mailgun", post(bounces::mailgun))
        .route("/v1/bounces/ses", post(ses::ses))
        .route(
            "/v1/bounces/sendgrid",
            post(bounces::sendgrid)
                .layer(axum::extract::DefaultBodyLimit::max(PROVIDER_BODY_LIMIT)),
        )
        .route("/r/{job}", get(links::job_report))
        .route("/r/{job}/charts/{id}", get(links::chart))
        .route("/r/{job}/{sha256}", get(links::report))
        .route("/r/{job}/{sha256}/{part}", get(links::part))
        .route(
            "/u/{token}",
            get(unsubscribe::confirm).post(unsubscribe::one_click),
        )
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::map_response(json_errors))
        .with_state(state)
}

/// `route`, a write that makes work due (a redrive, a reissue, an ingested run, a bulk redrive
/// started), followed when it succeeds by [`nudge_after_writes`]. Other writes (a sign-in, a
/// cancel, a plan) make nothing due and tell nobody.
pub(super) fn making_work(
    route: axum::routing::MethodRouter<ServerState>,
    state: &ServerState,
) -> axum::routing::MethodRouter<ServerState> {
    route.layer(axum::middleware::from_fn_with_state(
        state.clone(),
        nudge_after_writes,
    ))
}

/// A write the server took made work due: this node's pool, and on PostgreSQL every listening
/// node's (`Ledger::signal_work`), looks for it at once rather than at its next look.
async fn nudge_after_writes(
    State(st): State<ServerState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let writes = !request.method().is_safe();
    let response = next.run(request).await;
    let status = response.status();
    if writes && !(status.is_client_error() || status.is_server_error()) {
        st.node.pool.nudge();
        // The other nodes' pools look at once too (a failure only delays them).
        if let Err(e) = st.ledger.signal_work().await {
            tracing::debug!(error = %e, "could not signal new work to the other nodes");
        }
    }
    response
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this route does not take that method",
    )
}

/// The longest error text carried over from a rejection into its JSON body.
const ERROR_TEXT_LIMIT: usize = 1024;

/// Gives an error response that is not JSON yet (axum's rejections: a bad query, a bad path,
/// a body over the limit) the body every error has.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), ERROR_TEXT_LIMIT)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    ApiError::new(status, message).into_response()
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

/// A refusal: its status and the message of its JSON body.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
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

/// A body announced (`Content-Length`) larger than [`BODY_LIMIT`]: refused from the head,
/// before a byte of it is read.
pub(super) fn announced_too_large(headers: &HeaderMap) -> Result<(), ApiError> {
    let announced = header_str(headers, header::CONTENT_LENGTH.as_str())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match announced {
        Some(n) if n > BODY_LIMIT as u64 => Err(body_too_large()),
        _ => Ok(()),
    }
}

/// Reads a JSON request body whole: refused 413 past [`BODY_LIMIT`], 408 when it does not
/// arrive within the server's body timeout, 400 when it is malformed (a broken chunked
/// encoding, a connection cut mid-body), and 415 when it is declared as anything but JSON.
/// The body is read before it is refused, so a client still writing sees the answer rather
/// than a broken pipe.
pub(super) async fn read_json_body(
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<axum::body::Bytes, ApiError> {
    let bytes = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .map_err(|e| body_error(&e))?;
    if let Some(kind) = header_str(headers, header::CONTENT_TYPE.as_str()) {
        let essence = kind.split(';').next().unwrap_or_default().trim();
        if !essence.eq_ignore_ascii_case("application/json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("the body must be application/json, not {essence}"),
            ));
        }
    }
    Ok(bytes)
}

/// The refusal of a body that could not be read.
fn body_error(e: &axum::Error) -> ApiError {
    for c in crate::domain::words::causes(e) {
        if c.downcast_ref::<http_body_util::LengthLimitError>()
            .is_some()
        {
            return body_too_large();
        }
        if let Some(t) = c.downcast_ref::<BodyTimeout>() {
            return ApiError::new(StatusCode::REQUEST_TIMEOUT, t.to_string());
        }
    }
    let detail = std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string);
    ApiError::new(
        StatusCode::BAD_REQUEST,
        format!("the body could not be read: {detail}"),
    )
}

pub(super) fn body_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is larger than {BODY_LIMIT} bytes"),
    )
}

pub(super) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `GET /metrics`: OpenMetrics when the scraper asks for it (Prometheus does), the 0.0.4 text
/// format otherwise.
async fn metrics(State(st): State<ServerState>, headers: HeaderMap) -> Response {
    let now = st.clock.now();
    if let Ok(counts) = st.ledger.jobs().count_by_state().await {
        for state in JobState::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            st.node.metrics.set_jobs(state.as_str(), n);
        }
    }
    if let Ok(counts) = st.ledger.deliveries().count_by_state().await {
        for state in ["pending", "sending", "sent", "quarantined"] {
            let n = counts
                .iter()
                .find(|(s, _)| s.as_str() == state)
                .map_or(0, |(_, n)| *n);
            st.node.metrics.set_deliveries(state, n);
        }
    }
    if let Ok(oldest) = st.ledger.jobs().oldest_ready(now).await {
        let age = oldest.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        st.node.metrics.oldest_ready_age.set(age);
    }
    if let Ok(oldest) = st.ledger.waits().oldest().await {
        let age = oldest.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        st.node.metrics.oldest_waiting_age.set(age);
    }
    if let Ok(n) = st.ledger.waits().overdue(now).await {
        st.node.metrics.waiting_overdue.set(n);
    }
    let week = crate::domain::clock::sub(now, chrono::Duration::days(8));
    if let Ok(last) = st.ledger.deliveries().last_accepted_by_report(week).await {
        for (report, at) in last {
            let secs = crate::domain::clock::to_millis(at) as f64 / 1000.0;
            st.node.metrics.set_report_last_accepted(&report, secs);
        }
    }
    for (service, state) in st.node.health.snapshot() {
        let up = matches!(state, crate::runtime::supervisor::ServiceState::Running);
        st.node.metrics.set_service_up(service, up);
    }
    let accept = header_str(&headers, header::ACCEPT.as_str());
    if crate::runtime::metrics::classic::wants_openmetrics(accept) {
        let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        ([(header::CONTENT_TYPE, kind)], st.node.metrics.render()).into_response()
    } else {
        let kind = "text/plain; version=0.0.4; charset=utf-8";
        (
            [(header::CONTENT_TYPE, kind)],
            st.node.metrics.render_text(),
        )
            .into_response()
    }
}

async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// Ready when the ledger answers and is migrated and every service runs; otherwise 503 with
/// what is wrong.
async fn readyz(State(st): State<ServerState>) -> Response {
    let mut problems = st.node.health.down();
    // A ledger that does not answer within a second is not ready: a health check must not hang.
    let ledger_ready = tokio::time::timeout(std::time::Duration::from_secs(1), st.ledger.ready())
        .await
        .map_err(|_| "the ledger does not answer within 1 s".to_string())
        .and_then(|ready| ready.map_err(|e| e.to_string()));
    if let Err(problem) = ledger_ready {
        problems.insert(0, problem);
    }
    problems.extend(st.node.pool.clock_refusal());
    let services = st.node.health.snapshot();
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
