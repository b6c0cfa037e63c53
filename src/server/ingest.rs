//! `POST /v1/runs`: an upstream system asks for a report run, signed per Standard Webhooks with
//! the `whsec_` secret named by `server.ingest_secret_env`. The job insert and the record of the
//! webhook-id commit together; 202 comes only after the commit; a replayed webhook-id or an
//! existing job gets 200 with the same job key and `"duplicate": true`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ApiError, ServerState, TIMESTAMP_TOLERANCE_SECS, header_str};
use crate::ledger::{JobOrigin, NewJob};
use crate::report::schedule::Fire;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    report: String,
    date: Option<String>,
}

/// A run request's body, parsed: the report asked for and its local date, if given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub report: String,
    pub date: Option<chrono::NaiveDate>,
}

/// Why a run request's body was refused (422).
#[derive(Debug, thiserror::Error)]
pub enum RunRequestError {
    #[error("invalid body: {0}")]
    Body(#[from] serde_json::Error),
    #[error("date {0:?} is not YYYY-MM-DD")]
    Date(String),
}

/// Parses `{"report": ID, "date": "YYYY-MM-DD"}` (date optional); the error says why.
pub fn parse_run_request(body: &[u8]) -> Result<RunRequest, RunRequestError> {
    let req: RunBody = serde_json::from_slice(body)?;
    let date = match &req.date {
        None => None,
        Some(d) => Some(
            crate::domain::keys::parse_date(d).ok_or_else(|| RunRequestError::Date(d.clone()))?,
        ),
    };
    Ok(RunRequest {
        report: req.report,
        date,
    })
}

/// A signed run request: verified, then its job recorded with its webhook-id.
pub(super) async fn ingest(
    State(st): State<ServerState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // The signature needs the body anyway.
    let body = super::read_json_body(&headers, body).await?;
    let now = st.clock.now();
    let id = verify_signature(&st, &headers, &body, now)?;
    let unprocessable = |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, m);
    let req = parse_run_request(&body).map_err(|e| unprocessable(e.to_string()))?;
    let date = req.date;
    let Some(report) = st.reports.get(&req.report) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no report {:?}", req.report),
        ));
    };
    let date = date.unwrap_or_else(|| now.with_timezone(&report.timezone()).date_naive());
    let fire = Fire::for_date(&report, date).ok_or_else(|| {
        unprocessable(format!(
            "{date} has no window in {}",
            report.timezone().name()
        ))
    })?;
    let job = NewJob::of(&fire, now, JobOrigin::Ingest);
    let out = st.ledger.ingest_run(&id, &job, now).await.map_err(|e| {
        tracing::error!(error = %e, "could not record a run request");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the ledger is unavailable; retry later",
        )
    })?;
    let duplicate = !out.created;
    st.node
        .metrics
        .ingest(if duplicate { "duplicate" } else { "created" });
    tracing::info!(job = %out.job_key, duplicate, "run requested");
    let status = if duplicate {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let reply = crate::views::api::RunAcceptedV1::new(&out.job_key, duplicate);
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
    let skew = now.timestamp().checked_sub(ts).map(i64::unsigned_abs);
    if skew.is_none_or(|s| s > TIMESTAMP_TOLERANCE_SECS.unsigned_abs()) {
        return Err(refuse("webhook-timestamp is more than 5 minutes off"));
    }
    if secret.verify(id, ts, body, sig).is_err() {
        return Err(refuse("invalid signature"));
    }
    Ok(id.to_string())
}
