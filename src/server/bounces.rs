//! Bounces and complaints in, and the suppressions out, behind the ops token:
//! `POST /v1/bounces/dsn` takes an RFC 3464 delivery status notification or an RFC 5965 abuse
//! report as the raw message (`message/rfc822`, the body a mailbox's filter posts);
//! `GET /v1/suppressions` lists the suppressed recipients (`?all=true` the lifted ones too).

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::ops::{RevealQuery, answer};
use super::{ApiError, ServerState};
use crate::delivery::email::dsn;
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
    let metrics = Some(&*st.node.metrics);
    let now = st.clock.now();
    let taken =
        crate::services::bounces::take(&st.ledger, &bounces, &st.recipients, metrics, now).await?;
    let reply = BouncesTakenV1 {
        version: ApiVersion,
        bounces: (bounces.iter().zip(&taken))
            .map(|(b, r)| BounceTakenV1::of(b, r))
            .collect(),
    };
    let hide = hiding(bounces.iter().filter_map(|b| b.address.as_deref()));
    answer(&reply, hide, &q)
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
