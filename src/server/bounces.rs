//! Bounces and complaints in, and the suppressions out. Behind the ops token:
//! `POST /v1/bounces/dsn` takes an RFC 3464 delivery status notification or an RFC 5965 abuse
//! report as the raw message (`message/rfc822`, the body a mailbox's filter posts);
//! `GET /v1/suppressions` lists the suppressed recipients (`?all=true` the lifted ones too).
//! Behind each provider's own credentials or signature: `POST /v1/bounces/postmark`,
//! `/v1/bounces/mailgun` and `/v1/bounces/sendgrid`, each 404 (not enabled) until
//! `[recipients]` names the variable that holds its secret.

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::ops::{RevealQuery, answer};
use super::{ApiError, ServerState};
use crate::delivery::email::dsn;
use crate::delivery::email::providers::{self, ProviderError};
use crate::domain::bounce::Bounce;
use crate::views::api::ApiVersion;
use crate::views::recipients::{BounceTakenV1, SuppressionsV1, hiding};

/// What a bounce endpoint answers: what each bounce or complaint it read did.
#[derive(Debug, Serialize)]
pub(super) struct BouncesTakenV1 {
    version: ApiVersion,
    bounces: Vec<BounceTakenV1>,
}

pub(super) async fn dsn(
    State(st): State<ServerState>,
    Query(q): Query<RevealQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let bounces = dsn::read(&body).map_err(|e| {
        let status = match e {
            dsn::DsnError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, e.to_string())
    })?;
    taken(&st, &bounces, &q).await
}

/// Records `bounces` and answers what each did.
async fn taken(
    st: &ServerState,
    bounces: &[Bounce],
    q: &RevealQuery,
) -> Result<Response, ApiError> {
    let metrics = Some(&*st.node.metrics);
    let now = st.clock.now();
    let taken =
        crate::services::bounces::take(&st.ledger, bounces, &st.recipients, metrics, now).await?;
    let reply = BouncesTakenV1 {
        version: ApiVersion,
        bounces: (bounces.iter().zip(&taken))
            .map(|(b, r)| BounceTakenV1::of(b, r))
            .collect(),
    };
    let hide = hiding(bounces.iter().filter_map(|b| b.address.as_deref()));
    answer(&reply, hide, q)
}

/// The secret in the variable `env` names, or 404: the provider is not enabled.
fn secret(env: Option<&str>, provider: &str) -> Result<String, ApiError> {
    env.and_then(|name| std::env::var(name).ok())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("{provider} bounces are not enabled: [recipients] names no variable for its secret, or it is unset"),
            )
        })
}

pub(super) fn refused(e: ProviderError) -> ApiError {
    match e {
        ProviderError::Unauthorized(why) => ApiError::new(StatusCode::UNAUTHORIZED, why),
        ProviderError::Invalid(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, why),
    }
}

/// A provider's answer: what it posted, recorded. The addresses stay masked (a provider
/// never reads them back).
pub(super) async fn recorded(
    st: &ServerState,
    bounces: Result<Vec<Bounce>, ProviderError>,
) -> Result<Response, ApiError> {
    let bounces = bounces.map_err(refused)?;
    taken(st, &bounces, &RevealQuery { reveal: false }).await
}

pub(super) async fn postmark(
    State(st): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    use base64::Engine as _;
    use subtle::ConstantTimeEq;
    let expected = secret(
        st.recipients.postmark_credentials_env.as_deref(),
        "Postmark",
    )?;
    let given = (super::header_str(&headers, "authorization"))
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, b64)| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
        })
        .unwrap_or_default();
    if !bool::from(given.ct_eq(expected.as_bytes())) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong Postmark credentials",
        ));
    }
    recorded(&st, providers::postmark(&body)).await
}

pub(super) async fn mailgun(
    State(st): State<ServerState>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let key = secret(st.recipients.mailgun_signing_key_env.as_deref(), "Mailgun")?;
    let now = st.clock.now().timestamp();
    recorded(&st, providers::mailgun(&body, key.as_bytes(), now)).await
}

pub(super) async fn sendgrid(
    State(st): State<ServerState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let key = secret(
        st.recipients.sendgrid_verification_key_env.as_deref(),
        "SendGrid",
    )?;
    let signature =
        super::header_str(&headers, "x-twilio-email-event-webhook-signature").unwrap_or("");
    let timestamp =
        super::header_str(&headers, "x-twilio-email-event-webhook-timestamp").unwrap_or("");
    let now = st.clock.now().timestamp();
    recorded(
        &st,
        providers::sendgrid(&body, (signature, timestamp), &key, now),
    )
    .await
}

#[derive(Debug, Deserialize)]
pub(super) struct SuppressionsQuery {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    reveal: bool,
}

pub(super) async fn suppressions(
    State(st): State<ServerState>,
    Query(q): Query<SuppressionsQuery>,
) -> Result<Response, ApiError> {
    let list = st.ledger.recipients().suppressions(q.all, 1000).await?;
    let hide = hiding(list.iter().map(|s| s.address.as_str()));
    answer(
        &SuppressionsV1::of(&list),
        hide,
        &RevealQuery { reveal: q.reveal },
    )
}
