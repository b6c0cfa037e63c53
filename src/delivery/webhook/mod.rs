//! Webhooks: a JSON POST per destination URL, signed per the Standard Webhooks spec
//! (`webhook-id` = the delivery key), with `Idempotency-Key` = the delivery key, so a retry is
//! recognisable as the same delivery.
//!
//! Replies: 2xx accepted; 429 rate limited (Retry-After honoured); 408, 425 and 5xx transient;
//! 410 and every other 4xx permanent; redirects are not followed (permanent). A failure to
//! connect is transient; a timeout or reset after the request went out is ambiguous.

use std::time::Duration;

use chrono::{DateTime, Utc};

mod body;
mod config;

pub use body::*;
pub use config::{Hook, Hooks};

use super::destination::{
    Build, Confirm, Destination, NotConfirmed, Notice, Parcel, Preview, Sender, Sending, Shown,
    permanent,
};
use super::links::Part;
use super::{Outcome, SendTarget, bounded};
use crate::delivery::retry::parse_retry_after;
use crate::delivery::signing::Secret;
use crate::domain::keys::{DeliveryKey, DestinationKind};
use crate::domain::outcome::ResponseClass;

/// The webhook kind: a report's `[[report.webhook]]` entries and its `owner_webhook`, each a
/// Standard Webhooks POST.
pub(crate) struct Webhook;

/// The webhook kind's name.
pub const KIND: DestinationKind = DestinationKind::named("webhook");

/// The webhook configured as `url` among `destinations`.
fn hook<'d>(destinations: &'d crate::config::Destinations, url: &str) -> Option<&'d Hook> {
    (destinations.detail::<Hooks>(KIND)?.iter()).find(|h| h.url.as_str() == url)
}

impl Destination for Webhook {
    fn send_target(&self, destination: &str, _relay: &SendTarget) -> SendTarget {
        SendTarget::webhook(destination)
    }

    fn timeout(&self, settings: &crate::config::Settings) -> std::time::Duration {
        settings.webhook.timeout.as_std()
    }

    fn sender(&self, build: &Build<'_>) -> Result<Box<dyn Sender>, super::DeliverError> {
        let s = &build.config.settings;
        Ok(Box::new(WebhookSending {
            sender: WebhookSender::new(s.webhook.timeout.as_std(), build.ca)?,
            max_body_bytes: s.webhook.max_body_bytes,
            links: build.links.clone(),
        }))
    }

    /// One owner webhook a report: its key does not carry the URL (which may hold a token).
    fn notice_send(&self, message: &str, _destination: &str) -> String {
        format!("{message}/webhook")
    }

    /// The least a body is: the inlined parts, JSON-escaped.
    fn preview(&self, s: &Shown<'_>) -> Result<Option<Preview>, String> {
        let json = |t: &str| serde_json::to_string(t).map_or(t.len(), |j| j.len());
        let r = s.rendered;
        let least = json(&r.html) + json(&r.text) + r.csv.as_deref().map_or(0, json);
        let shown = crate::report::render::human_size(least);
        let limit = s.config.settings.webhook.max_body_bytes;
        let over = u64::try_from(least).unwrap_or(u64::MAX) > limit;
        let warnings = (over.then(|| {
            format!(
                "a webhook body (at least {shown}) is over [webhook] max_body_bytes ({}): {}",
                crate::config::shown_size(limit),
                s.config.settings.server.too_large_fate("its webhooks")
            )
        }))
        .into_iter()
        .collect();
        Ok(Some(Preview {
            file: None,
            size: format!("webhook body at least {shown}"),
            warnings,
        }))
    }

    /// `max_body_bytes`, by the parts alone (escaping only makes them larger).
    fn checked(
        &self,
        _rendered: &crate::report::render::Rendered,
        (sizes, parts): &(String, u64),
        config: &crate::config::Config,
    ) -> Vec<String> {
        let limit = config.settings.webhook.max_body_bytes;
        (*parts > limit)
            .then(|| {
                format!(
                    "the sample's webhook body ({sizes}) is over [webhook] max_body_bytes ({}): {}",
                    crate::config::shown_size(limit),
                    config.settings.server.too_large_fate("its webhooks")
                )
            })
            .into_iter()
            .collect()
    }
}

/// The webhook kind's sender: the client, and the largest body it posts whole.
struct WebhookSending {
    sender: WebhookSender,
    /// `webhook.max_body_bytes`: past it, a receiver gets the artifact's links instead.
    max_body_bytes: u64,
    /// Links to reports too large to send (`[server] public_url`); none without it.
    links: Option<super::links::Links>,
}

impl Sender for WebhookSending {
    fn send<'a>(
        &'a self,
        parcel: &'a Parcel<'a>,
        to: &'a DeliveryKey,
        confirm: Confirm<'a>,
    ) -> Sending<'a, Result<Outcome, NotConfirmed>> {
        Box::pin(async move {
            let hook = hook(&parcel.report.destinations, to.destination());
            let (secret, body) = match secret_of(hook).and_then(|s| Ok((s, self.body(parcel, to)?)))
            {
                Ok(ready) => ready,
                Err(outcome) => return Ok(outcome),
            };
            confirm().await?;
            let secret = secret.as_ref();
            // The linked body (version 2) is what a report too large to inline gets.
            let linked = body.starts_with(br#"{"version":2,"#);
            let outcome = match hook {
                // Parsed once, when the configuration was loaded.
                Some(hook) => {
                    (self.sender)
                        .send(hook.url.clone(), secret, to, body, parcel.now)
                        .await
                }
                None => {
                    (self.sender)
                        .send(to.destination(), secret, to, body, parcel.now)
                        .await
                }
            };
            Ok(if linked { outcome.linked() } else { outcome })
        })
    }

    fn notify<'a>(&'a self, notice: &'a Notice<'a>) -> Sending<'a, Outcome> {
        Box::pin(async move {
            // A report has one owner webhook: the one configured now signs.
            let hooks = notice
                .owners
                .and_then(|o| o.destinations.detail::<Hooks>(KIND));
            let hook = hooks.and_then(|h| h.first());
            let secret = match secret_of(hook) {
                Ok(secret) => secret,
                Err(outcome) => return outcome,
            };
            let body = notice.webhook_body.as_bytes().to_vec();
            (self.sender)
                .send(
                    notice.destination,
                    secret.as_ref(),
                    &notice.key,
                    body,
                    notice.now,
                )
                .await
        })
    }
}

/// The signing secret a webhook names, read from its environment variable.
fn secret_of(hook: Option<&Hook>) -> Result<Option<Secret>, Outcome> {
    let Some(env) = hook.and_then(|w| w.secret_env.as_ref()) else {
        return Ok(None);
    };
    let value = std::env::var(env)
        .map_err(|_| permanent(format!("environment variable {env} is not set")))?;
    Secret::parse(&value)
        .map(Some)
        .map_err(|e| permanent(format!("{env}: {e}")))
}

impl WebhookSending {
    /// The body posted to `to`: the report inlined, or its links when that passes
    /// `webhook.max_body_bytes`.
    fn body(&self, parcel: &Parcel<'_>, to: &DeliveryKey) -> Result<Vec<u8>, Outcome> {
        let escaped = parcel.memo.get_or_init(KIND, || {
            EscapedParts::of(parcel.rendered).map_err(|e| e.to_string())
        });
        let escaped = (escaped.as_ref().as_ref())
            .map_err(|e| permanent(format!("cannot encode the body: {e}")))?;
        let body = WebhookBody {
            version: BodyVersion,
            head: head(parcel, to),
            html: &escaped.html,
            text: &escaped.text,
            csv: escaped.csv.as_deref(),
            attachments: AttachmentBody::of(parcel),
            charts: ChartBody::of(parcel, self.links.as_ref()),
        };
        // Sized for the escaped parts up front: grown from empty, a body of tens of KB was
        // reallocated and copied a dozen times, per delivery.
        let parts = escaped.html.get().len()
            + escaped.text.get().len()
            + escaped.csv.as_ref().map_or(0, |c| c.get().len());
        let mut encoded = Vec::with_capacity(parts + 2048);
        serde_json::to_writer(&mut encoded, &body)
            .map_err(|e| permanent(format!("cannot encode the body: {e}")))?;
        match encoded.len() as u64 > self.max_body_bytes {
            true => self.linked_body(parcel, to, encoded.len() as u64),
            false => Ok(encoded),
        }
    }

    /// The body of a webhook whose inlined parts (`inline_bytes` in all) pass
    /// `webhook.max_body_bytes`: the artifact's references and links to its parts.
    fn linked_body(
        &self,
        parcel: &Parcel<'_>,
        to: &DeliveryKey,
        inline_bytes: u64,
    ) -> Result<Vec<u8>, Outcome> {
        let limit = self.max_body_bytes;
        let links = self.links.as_ref().ok_or_else(|| {
            permanent(format!(
                "the body is {inline_bytes} bytes with the report inlined, over webhook.max_body_bytes ({}): set [server] public_url and link_secret_env to send links instead",
                crate::config::shown_size(limit)
            ))
        })?;
        let link = |part| links.link(parcel.job, &parcel.artifact.sha256, part);
        let body = LinkedBody {
            version: LinkedVersion,
            head: head(parcel, to),
            links: PartLinks {
                html: link(Part::Html),
                text: link(Part::Text),
                csv: parcel.rendered.csv.as_ref().map(|_| link(Part::Csv)),
            },
            inline_bytes,
            max_body_bytes: limit,
            attachments: AttachmentBody::of(parcel),
            charts: ChartBody::of(parcel, self.links.as_ref()),
        };
        serde_json::to_vec(&body).map_err(|e| permanent(format!("cannot encode the body: {e}")))
    }
}

/// The fields of both webhook bodies that name the job, its delivery and its artifact.
fn head<'a>(parcel: &'a Parcel<'a>, to: &'a DeliveryKey) -> BodyHead<'a> {
    let job = parcel.job;
    BodyHead {
        job,
        delivery: to,
        report: job.report(),
        title: &parcel.report.title,
        date: job.date(),
        window: WindowBody {
            start: crate::domain::window::rfc3339(parcel.window.start),
            end: crate::domain::window::rfc3339(parcel.window.end),
        },
        revision: (job.revision() > 1).then(|| job.revision()),
        supersedes: parcel.supersedes,
        artifact: ArtifactBody::of(parcel.artifact),
    }
}

#[derive(Debug, Clone)]
pub(crate) struct WebhookSender {
    client: reqwest::Client,
}

/// The HTTP client every kind that POSTs JSON sends with: cut at `timeout`, no redirect
/// followed, no retry inside it, trusting `[tls] ca_file` too.
pub(crate) fn client(
    timeout: Duration,
    ca: Option<&crate::runtime::tls::CaBundle>,
) -> Result<reqwest::Client, super::DeliverError> {
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none())
        // No retry inside the client: each send is one attempt the ledger records, and
        // going again is the pool's decision. (reqwest's default policy would copy every
        // request's headers up front in case it resends it.)
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .user_agent(concat!("dawnpost/", env!("CARGO_PKG_VERSION")));
    Ok(crate::runtime::tls::trust(builder, ca)?.build()?)
}

impl WebhookSender {
    pub fn new(
        timeout: Duration,
        ca: Option<&crate::runtime::tls::CaBundle>,
    ) -> Result<WebhookSender, super::DeliverError> {
        Ok(WebhookSender {
            client: client(timeout, ca)?,
        })
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
            Err(e) => failed(&e).with_diagnostics(crate::domain::redact::http_error(&e)),
        }
    }
}

/// A request that got no answer: a certificate not trusted is permanent (nothing was sent, and
/// no retry mends it), a failure to connect transient, a timeout or a reset after the request
/// went out ambiguous. The caller adds the (redacted) detail.
pub(crate) fn failed(e: &reqwest::Error) -> Outcome {
    if let Some(why) = crate::runtime::tls::untrusted_certificate(e) {
        Outcome::new(ResponseClass::Permanent, None, why)
    } else if e.is_connect() {
        Outcome::new(ResponseClass::Transient, None, "connection failed")
    } else if e.is_timeout() {
        let why = "timed out after the request was sent";
        Outcome::new(ResponseClass::Ambiguous, None, why)
    } else {
        let why = "the connection failed after the request was sent";
        Outcome::new(ResponseClass::Ambiguous, None, why)
    }
}

/// The most of a reply's body kept (and read).
pub(crate) const REPLY_LIMIT: usize = 512;

/// The start of a reply's body, for diagnostics: at most [`REPLY_LIMIT`] bytes are read, the
/// rest is never fetched.
pub(crate) async fn reply_snippet(mut resp: reqwest::Response) -> String {
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
