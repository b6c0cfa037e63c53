//! Webhooks: a JSON POST per destination URL, signed per the Standard Webhooks spec
//! (`webhook-id` = the delivery key), with `Idempotency-Key` = the delivery key, so a retry is
//! recognisable as the same delivery.
//!
//! Replies: 2xx accepted; 429 rate limited (Retry-After honoured); 408, 425 and 5xx transient;
//! 410 and every other 4xx permanent; redirects are not followed (permanent). A failure to
//! connect is transient; a timeout or reset after the request went out is ambiguous.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use serde_json::value::RawValue;

use super::{Outcome, bounded};
use crate::delivery::retry::parse_retry_after;
use crate::delivery::signing::Secret;
use crate::domain::keys::{DeliveryKey, JobKey, ReportId};
use crate::domain::outcome::ResponseClass;
use crate::report::artifact::ArtifactRef;

/// The version of the webhook body, its first field. A receiver checks it; a change of a
/// field's name, type or meaning is a new version (`docs/contracts/webhook-v1.json` is the
/// sample `tests/it/contracts.rs` pins).
pub const WEBHOOK_BODY_VERSION: u32 = 1;

/// The body of a webhook delivery: a contract with receivers, version
/// [`WEBHOOK_BODY_VERSION`], built field by field (no ledger row is serialized into it).
#[derive(Debug, Serialize)]
pub struct WebhookBody<'a> {
    /// Always [`WEBHOOK_BODY_VERSION`].
    pub version: BodyVersion,
    #[serde(flatten)]
    pub head: BodyHead<'a>,
    pub html: &'a RawValue,
    pub text: &'a RawValue,
    /// The CSV attachment's content, when the report has one (also named in `attachments`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<&'a RawValue>,
    /// The files an email of this job attaches, each with its key in the artifact store.
    pub attachments: Vec<AttachmentBody>,
}

/// What every webhook body says of its job and delivery, after its `version` (both versions'
/// fields, in this order).
#[derive(Debug, Serialize)]
pub struct BodyHead<'a> {
    pub job: &'a JobKey,
    pub delivery: &'a DeliveryKey,
    pub report: &'a ReportId,
    pub title: &'a str,
    pub date: NaiveDate,
    pub window: WindowBody,
    /// A reissued revision's number (absent for revision 1), and the revision it supersedes:
    /// a receiver replaces what that one sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<&'a JobKey>,
    pub artifact: ArtifactBody<'a>,
}

/// The version of the body a webhook gets instead when the report's inlined parts would make
/// it larger than `webhook.max_body_bytes`: version 1's fields but `html`, `text` and `csv`,
/// and `links` to them (`docs/contracts/webhook-v2-linked.json`).
pub const LINKED_BODY_VERSION: u32 = 2;

/// The body of a webhook delivery of a report too large to inline: its references and links,
/// version [`LINKED_BODY_VERSION`].
#[derive(Debug, Serialize)]
pub struct LinkedBody<'a> {
    /// Always [`LINKED_BODY_VERSION`].
    pub version: LinkedVersion,
    #[serde(flatten)]
    pub head: BodyHead<'a>,
    /// Signed links to the parts, served while the artifact is kept.
    pub links: PartLinks,
    /// The size the body would have had with its parts inlined, and the limit it passed.
    pub inline_bytes: u64,
    pub max_body_bytes: u64,
    pub attachments: Vec<AttachmentBody>,
}

/// Where each part of an artifact can be fetched.
#[derive(Debug, Serialize)]
pub struct PartLinks {
    pub html: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
}

/// The `version` field of a [`LinkedBody`]: [`LINKED_BODY_VERSION`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkedVersion;

impl Serialize for LinkedVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(LINKED_BODY_VERSION)
    }
}

/// The `version` field: serializes as [`WEBHOOK_BODY_VERSION`], and can be nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyVersion;

impl Serialize for BodyVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(WEBHOOK_BODY_VERSION)
    }
}

/// Where the artifact the body carries is stored: its object keys and the sha256 over its
/// parts, so a receiver can fetch or verify what it was sent.
#[derive(Debug, Serialize)]
pub struct ArtifactBody<'a> {
    pub html_key: &'a str,
    pub text_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv_key: Option<&'a str>,
    pub sha256: &'a str,
    pub bytes: i64,
}

impl<'a> ArtifactBody<'a> {
    pub fn of(artifact: &'a ArtifactRef) -> ArtifactBody<'a> {
        ArtifactBody {
            html_key: &artifact.html_key,
            text_key: &artifact.text_key,
            csv_key: artifact.csv_key.as_deref(),
            sha256: &artifact.sha256,
            bytes: artifact.bytes,
        }
    }
}

/// One attachment as a webhook body references it.
#[derive(Debug, Serialize)]
pub struct AttachmentBody {
    pub filename: String,
    pub content_type: &'static str,
    /// Its object key in the artifact store (part of the artifact's sha256).
    pub key: String,
    pub bytes: usize,
}

impl AttachmentBody {
    /// The CSV attachment of a job, if its artifact has one.
    pub fn csv_of(job: &JobKey, artifact: &ArtifactRef, csv: Option<&str>) -> Vec<AttachmentBody> {
        match (&artifact.csv_key, csv) {
            (Some(key), Some(csv)) => vec![AttachmentBody {
                filename: job.csv_filename(),
                content_type: "text/csv; charset=utf-8",
                key: key.clone(),
                bytes: csv.len(),
            }],
            _ => Vec::new(),
        }
    }
}

/// An artifact's parts as JSON strings, escaped once for all the webhooks of its job (the
/// HTML is most of a body, and escaping it was a twentieth of a delivery's CPU).
#[derive(Debug)]
pub struct EscapedParts {
    pub html: Box<RawValue>,
    pub text: Box<RawValue>,
    pub csv: Option<Box<RawValue>>,
}

impl EscapedParts {
    pub fn of(
        rendered: &crate::report::render::Rendered,
    ) -> Result<EscapedParts, serde_json::Error> {
        Ok(EscapedParts {
            html: serde_json::value::to_raw_value(&rendered.html)?,
            text: serde_json::value::to_raw_value(&rendered.text)?,
            csv: match &rendered.csv {
                Some(csv) => Some(serde_json::value::to_raw_value(csv)?),
                None => None,
            },
        })
    }
}

#[derive(Debug, Serialize)]
pub struct WindowBody {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone)]
pub struct WebhookSender {
    client: reqwest::Client,
}

impl WebhookSender {
    pub fn new(
        timeout: Duration,
        ca: Option<&crate::runtime::tls::CaBundle>,
    ) -> Result<WebhookSender, super::DeliverError> {
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
            // No retry inside the client: each send is one attempt the ledger records, and
            // going again is the pool's decision. (reqwest's default policy would copy every
            // request's headers up front in case it resends it.)
            .retry(reqwest::retry::never().max_retries_per_request(0))
            .user_agent(concat!("dawnpost/", env!("CARGO_PKG_VERSION")));
        let client = crate::runtime::tls::trust(builder, ca)?.build()?;
        Ok(WebhookSender { client })
    }

    /// POSTs `body` to `url` (a configured webhook's parsed URL, or its text) and classifies
    /// the reply.
    pub async fn send<U: reqwest::IntoUrl>(
        &self,
        url: U,
        secret: Option<&Secret>,
        delivery_key: &(dyn std::fmt::Display + Sync),
        body: Vec<u8>,
        now: DateTime<Utc>,
    ) -> Outcome {
        let ts = now.timestamp();
        let delivery_key = delivery_key.to_string();
        let mut req = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("idempotency-key", &delivery_key)
            .header("webhook-id", &delivery_key)
            .header("webhook-timestamp", ts.to_string());
        if let Some(secret) = secret {
            req = req.header("webhook-signature", secret.sign(&delivery_key, ts, &body));
        }
        match req.body(body).send().await {
            Ok(resp) => {
                let status = resp.status();
                let code = i64::from(status.as_u16());
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, now));
                let snippet = reply_snippet(resp).await;
                let class = match status.as_u16() {
                    200..=299 => ResponseClass::Accepted,
                    429 => ResponseClass::RateLimited,
                    408 | 425 => ResponseClass::Transient,
                    500..=599 => ResponseClass::Transient,
                    300..=399 => ResponseClass::Permanent,
                    400..=499 => ResponseClass::Permanent,
                    _ => ResponseClass::Unknown,
                };
                let reason = match status.as_u16() {
                    410 => "HTTP 410: the endpoint is gone".to_string(),
                    300..=399 => format!("HTTP {code}: redirects are not followed"),
                    _ => format!("HTTP {code}"),
                };
                let mut outcome = Outcome::new(class, Some(code), reason);
                outcome.retry_after = retry_after;
                if !snippet.is_empty() {
                    outcome = outcome.with_diagnostics(snippet);
                }
                outcome
            }
            Err(e) => {
                let detail = crate::domain::redact::http_error(&e);
                if let Some(why) = crate::runtime::tls::untrusted_certificate(&e) {
                    // A misconfiguration (a private CA not trusted, a wrong host name): nothing
                    // was sent, and no retry mends it.
                    Outcome::new(ResponseClass::Permanent, None, why).with_diagnostics(detail)
                } else if e.is_connect() {
                    Outcome::new(ResponseClass::Transient, None, "connection failed")
                        .with_diagnostics(detail)
                } else if e.is_timeout() {
                    Outcome::new(
                        ResponseClass::Ambiguous,
                        None,
                        "timed out after the request was sent",
                    )
                    .with_diagnostics(detail)
                } else {
                    Outcome::new(
                        ResponseClass::Ambiguous,
                        None,
                        "the connection failed after the request was sent",
                    )
                    .with_diagnostics(detail)
                }
            }
        }
    }
}

/// The most of a reply's body kept (and read).
pub const REPLY_LIMIT: usize = 512;

/// The start of a reply's body, for diagnostics: at most [`REPLY_LIMIT`] bytes are read, the
/// rest is never fetched.
async fn reply_snippet(mut resp: reqwest::Response) -> String {
    let mut kept = Vec::new();
    while kept.len() < REPLY_LIMIT {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = REPLY_LIMIT - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    bounded(String::from_utf8_lossy(&kept).into_owned(), REPLY_LIMIT)
}
