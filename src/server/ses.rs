//! `POST /v1/bounces/ses`: Amazon SES's notifications as SNS posts them. The topic must be one
//! `[recipients] ses_topic_arns` names and the signature verify with the certificate at the
//! message's `SigningCertURL` (an SNS host of AWS only), read from `ses_certificates_dir` when
//! it holds it, else fetched (bounded in time and size, no redirect) and kept. A subscription's
//! confirmation is confirmed by a GET of its `SubscribeURL`, an SNS host of AWS too.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::bounces::{recorded, refused};
use super::{ApiError, ServerState};
use crate::delivery::email::ses;

/// How long a fetch of a certificate or a confirmation may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest certificate read.
const MAX_CERTIFICATE_BYTES: usize = 16 * 1024;
/// How many fetched certificates are kept (SNS rotates them seldom).
const KEPT: usize = 16;

fn kept() -> &'static Mutex<HashMap<String, Vec<u8>>> {
    static KEPT_CERTS: OnceLock<Mutex<HashMap<String, Vec<u8>>>> = OnceLock::new();
    KEPT_CERTS.get_or_init(Default::default)
}

pub(super) async fn ses(State(st): State<ServerState>, body: Bytes) -> Result<Response, ApiError> {
    let topics = &st.recipients.ses_topic_arns;
    if topics.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "SES bounces are not enabled: [recipients] ses_topic_arns names no topic",
        ));
    }
    let m = ses::sns(&body, topics).map_err(refused)?;
    if !ses::certificate_url_ok(&m.signing_cert_url) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the SNS signing certificate is not served by an SNS host of AWS",
        ));
    }
    let pem = certificate(&st, &m.signing_cert_url).await?;
    ses::verify(&m, &pem).map_err(refused)?;
    match m.kind.as_str() {
        "Notification" => recorded(&st, ses::notification(&m.message)).await,
        "SubscriptionConfirmation" => confirm(m.subscribe_url.as_deref().unwrap_or("")).await,
        "UnsubscribeConfirmation" => {
            tracing::warn!(topic = %m.topic_arn, "SNS says the subscription to this topic was removed");
            Ok((
                StatusCode::OK,
                axum::Json(serde_json::json!({"version": 1})),
            )
                .into_response())
        }
        other => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("an SNS message of type {other:?} is not one SNS sends"),
        )),
    }
}

/// The certificate at `url`: from `ses_certificates_dir` (by the URL's file name), kept, or
/// fetched.
async fn certificate(st: &ServerState, url: &str) -> Result<Vec<u8>, ApiError> {
    let name = url.rsplit('/').next().unwrap_or("");
    if let Some(dir) = &st.recipients.ses_certificates_dir {
        let safe = !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\']);
        if safe && let Ok(pem) = std::fs::read(dir.join(name)) {
            return Ok(pem);
        }
    }
    if let Some(pem) = kept().lock().unwrap_or_else(|p| p.into_inner()).get(url) {
        return Ok(pem.clone());
    }
    let pem = fetch(url, MAX_CERTIFICATE_BYTES).await.map_err(|why| {
        tracing::warn!(error = %why, "SES: the SNS signing certificate could not be fetched");
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("the SNS signing certificate could not be fetched: {why}"),
        )
    })?;
    let mut k = kept().lock().unwrap_or_else(|p| p.into_inner());
    if k.len() >= KEPT {
        k.clear();
    }
    k.insert(url.to_string(), pem.clone());
    Ok(pem)
}

/// GET `url`, at most `limit` bytes, within [`FETCH_TIMEOUT`], no redirect.
async fn fetch(url: &str, limit: usize) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| crate::domain::words::error_chain(&e))?;
    let mut r = client
        .get(url)
        .send()
        .await
        .map_err(|e| crate::domain::redact::http_error(&e))?;
    if !r.status().is_success() {
        return Err(format!("HTTP {}", r.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = r
        .chunk()
        .await
        .map_err(|e| crate::domain::redact::http_error(&e))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(format!("over {limit} bytes"));
        }
    }
    Ok(body)
}

/// Confirms a subscription by a GET of its `SubscribeURL`.
async fn confirm(url: &str) -> Result<Response, ApiError> {
    if !ses::sns_url(url) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the SubscribeURL is not an SNS host of AWS",
        ));
    }
    match fetch(url, 64 * 1024).await {
        Ok(_) => {
            tracing::info!("SES: the SNS subscription is confirmed");
            Ok((
                StatusCode::OK,
                axum::Json(serde_json::json!({"version": 1, "confirmed": true})),
            )
                .into_response())
        }
        Err(why) => {
            tracing::warn!(error = %why, "SES: the SNS subscription could not be confirmed; SNS sends the confirmation again");
            Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("the subscription could not be confirmed: {why}"),
            ))
        }
    }
}
