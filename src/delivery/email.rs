//! Email: one message per recipient, multipart/alternative (text and HTML) — inside
//! multipart/mixed with the CSV attachment when the report has one —, a Subject from the
//! title and date, a Message-ID derived from the delivery key (the same on every retry) and an
//! `X-Dawnpost-Delivery` header carrying the key.
//!
//! `transport = "smtp"` uses lettre's pooled `AsyncSmtpTransport` over rustls; every send is
//! bounded by `email.timeout` as a whole (lettre's own timeout covers only the connect).
//! `transport = "file"` writes `<outbox_dir>/<delivery key>.eml`, replacing it on a retry.
//!
//! SMTP replies: 2xx accepted; 421/450/451/452 rate limited; other 4xx transient; 5xx
//! permanent; connection and TLS failures and a connect timeout transient; a send that outlives
//! its bound is ambiguous (the relay may have accepted it after DATA), and its retry carries the
//! same Message-ID.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::AsyncSmtpTransportBuilder;
use lettre::transport::smtp::PoolConfig;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sha2::{Digest, Sha256};

use super::DeliverError;
use super::{Outcome, scrub};
use crate::config::{EmailSettings, EmailTransport};
use crate::domain::keys::DeliveryKey;
use crate::domain::outcome::ResponseClass;
use crate::report::render::Rendered;

/// How much longer than `email.timeout` a whole send may take before it counts as ambiguous:
/// room for lettre's own connect timeout to fire first.
const CONNECT_SLACK: Duration = Duration::from_secs(2);

/// The header that carries the delivery key.
pub const DELIVERY_HEADER: &str = "X-Dawnpost-Delivery";

/// Where emails go.
#[derive(Clone)]
pub enum EmailSender {
    File {
        dir: PathBuf,
    },
    Smtp {
        /// The pooled transport. Replaced after a send is cut off by the timeout: lettre would
        /// otherwise put that connection, mid-transaction, back into its pool.
        transport: Arc<RwLock<AsyncSmtpTransport<Tokio1Executor>>>,
        builder: Box<AsyncSmtpTransportBuilder>,
        timeout: Duration,
    },
}

impl std::fmt::Debug for EmailSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmailSender::File { dir } => write!(f, "EmailSender::File({})", dir.display()),
            EmailSender::Smtp { timeout, .. } => {
                write!(f, "EmailSender::Smtp(timeout {timeout:?})")
            }
        }
    }
}

impl EmailSender {
    /// Builds the transport the settings name; secrets come from the variables they name.
    pub fn from_settings(
        s: &EmailSettings,
        ca: Option<&crate::runtime::tls::CaBundle>,
        root: &std::path::Path,
        concurrency: u32,
    ) -> Result<EmailSender, DeliverError> {
        match s.transport {
            EmailTransport::File => {
                let dir = crate::config::resolve(root, &s.outbox_dir);
                std::fs::create_dir_all(&dir).map_err(|source| DeliverError::Outbox {
                    path: dir.clone(),
                    source,
                })?;
                Ok(EmailSender::File { dir })
            }
            EmailTransport::Smtp => {
                // lettre's own timeout covers the connect only: a connect that times out never
                // reached DATA (transient). The whole send is bounded by `timeout` + CONNECT_SLACK
                // in `send`; that bound firing may be after DATA (ambiguous).
                let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(&s.smtp_url)
                    .map_err(|e| DeliverError::SmtpUrl(e.to_string()))?
                    .timeout(Some(s.timeout.as_std()))
                    .pool_config(PoolConfig::new().max_size(concurrency.max(1)));
                // A name in the URL's path (lettre's own) wins; else the setting or its default.
                if !has_path_name(&s.smtp_url) {
                    builder = builder.hello_name(ClientId::Domain(s.helo_name()));
                }
                if let Some(ca) = ca
                    && let Some(tls) = tls_with_ca(&s.smtp_url, ca)?
                {
                    builder = builder.tls(tls);
                }
                if let (Some(user_env), Some(pass_env)) = (&s.smtp_user_env, &s.smtp_password_env) {
                    let var = |name: &String| {
                        std::env::var(name).map_err(|_| DeliverError::MissingEnv(name.clone()))
                    };
                    let (user, pass) = (var(user_env)?, var(pass_env)?);
                    builder = builder.credentials(Credentials::new(user, pass));
                }
                Ok(EmailSender::Smtp {
                    transport: Arc::new(RwLock::new(builder.clone().build())),
                    builder: Box::new(builder),
                    timeout: s.timeout.as_std() + CONNECT_SLACK,
                })
            }
        }
    }

    /// Sends one message and classifies the result.
    pub async fn send(
        &self,
        message: &Message,
        delivery_key: &(dyn std::fmt::Display + Sync),
        to: &str,
    ) -> Outcome {
        match self {
            EmailSender::File { dir } => {
                let name = file_name(&delivery_key.to_string());
                let path = dir.join(&name);
                let tmp = dir.join(format!(".{name}.tmp"));
                let result = async {
                    tokio::fs::write(&tmp, message.formatted()).await?;
                    tokio::fs::rename(&tmp, &path).await
                }
                .await;
                match result {
                    Ok(()) => Outcome::new(ResponseClass::Accepted, None, "written to the outbox"),
                    Err(e) => Outcome::new(
                        ResponseClass::Transient,
                        None,
                        format!("cannot write the outbox: {e}"),
                    ),
                }
            }
            EmailSender::Smtp {
                transport,
                builder,
                timeout,
            } => {
                let current = transport.read().unwrap_or_else(|e| e.into_inner()).clone();
                match tokio::time::timeout(*timeout, current.send(message.clone())).await {
                    Err(_) => {
                        // The cut-off connection is out of step with the relay: start a fresh
                        // pool so no later send reuses it. The old pool closes when unused.
                        *transport.write().unwrap_or_else(|e| e.into_inner()) =
                            builder.clone().build();
                        Outcome::new(
                            ResponseClass::Ambiguous,
                            None,
                            format!(
                                "no reply within {}s; the relay may have accepted it",
                                timeout.as_secs()
                            ),
                        )
                    }
                    Ok(Ok(response)) => {
                        let code = i64::from(u16::from(response.code()));
                        let text = response.message().collect::<Vec<_>>().join(" ");
                        Outcome::new(
                            ResponseClass::Accepted,
                            Some(code),
                            format!("{code} accepted"),
                        )
                        .with_diagnostics(scrub(&text, to))
                    }
                    Ok(Err(e)) => classify(&e, to),
                }
            }
        }
    }
}

/// Whether an `smtp_url` names the EHLO name in its path (`smtp://relay:25/mail.example.com`).
fn has_path_name(smtp_url: &str) -> bool {
    url::Url::parse(smtp_url).is_ok_and(|u| u.path().len() > 1)
}

/// The TLS mode `smtp_url` asks for (`smtps://` wrapper, `?tls=required` or `opportunistic`
/// STARTTLS), trusting `ca` besides the platform's roots; `None` for plain SMTP.
fn tls_with_ca(
    smtp_url: &str,
    ca: &crate::runtime::tls::CaBundle,
) -> Result<Option<Tls>, DeliverError> {
    let bad = |m: String| DeliverError::SmtpUrl(m);
    let url = url::Url::parse(smtp_url).map_err(|e| bad(e.to_string()))?;
    let host = url.host_str().unwrap_or_default().to_string();
    let mode = url
        .query_pairs()
        .find(|(k, _)| k == "tls")
        .map(|(_, v)| v.to_string());
    let cert = Certificate::from_pem(ca.pem())
        .map_err(|e| bad(format!("{}: {e}", ca.path().display())))?;
    let params = || {
        TlsParameters::builder(host.clone())
            .add_root_certificate(cert.clone())
            .build_rustls()
            .map_err(|e| bad(format!("{}: {e}", ca.path().display())))
    };
    Ok(match (url.scheme(), mode.as_deref()) {
        ("smtps", _) => Some(Tls::Wrapper(params()?)),
        (_, Some("required")) => Some(Tls::Required(params()?)),
        (_, Some("opportunistic")) => Some(Tls::Opportunistic(params()?)),
        _ => None,
    })
}

/// Maps a lettre error to an outcome.
pub fn classify(e: &lettre::transport::smtp::Error, to: &str) -> Outcome {
    let detail = scrub(&crate::domain::words::error_chain(e), to);
    if let Some(code) = e.status() {
        let n = u16::from(code);
        let class = match n {
            421 | 450 | 451 | 452 => ResponseClass::RateLimited,
            400..=499 => ResponseClass::Transient,
            500..=599 => ResponseClass::Permanent,
            _ => ResponseClass::Unknown,
        };
        let reason = match n {
            552 | 523 => format!("SMTP {n}: the message is larger than the relay accepts"),
            _ => format!("SMTP {n}"),
        };
        return Outcome::new(class, Some(i64::from(n)), reason).with_diagnostics(detail);
    }
    if let Some(why) = crate::runtime::tls::untrusted_certificate(e) {
        // A misconfiguration (a private CA not trusted, a wrong host name): no retry mends it.
        return Outcome::new(ResponseClass::Permanent, None, why).with_diagnostics(detail);
    }
    if e.is_timeout() {
        // lettre times out only the connect: nothing was sent.
        return Outcome::new(ResponseClass::Transient, None, "SMTP connect timed out")
            .with_diagnostics(detail);
    }
    if e.is_tls() {
        return Outcome::new(ResponseClass::Transient, None, "TLS failure")
            .with_diagnostics(detail);
    }
    Outcome::new(ResponseClass::Transient, None, "SMTP connection failed").with_diagnostics(detail)
}

/// The Subject of a report's email: `Warehouse 17 daily operations — 2026-11-29`.
pub fn subject(title: &str, date: &str) -> String {
    format!("{title} — {date}")
}

/// The Subject of job `job`'s emails: a reissued revision's says it is a correction.
pub fn subject_of(title: &str, job: &crate::domain::keys::JobKey) -> String {
    let plain = subject(title, &crate::domain::keys::IsoDate(job.date()).to_string());
    match job.revision() {
        1 => plain,
        n => format!("Correction (revision {n}): {plain}"),
    }
}

/// The Message-ID of a delivery: the same for every retry.
pub fn message_id(delivery_key: &(dyn std::fmt::Display + Sync), from: &Mailbox) -> String {
    let digest = hex::encode(Sha256::digest(delivery_key.to_string().as_bytes()));
    format!("<{}.dawnpost@{}>", &digest[..32], from.email.domain())
}

/// `<delivery key>.eml` with characters unsafe in file names replaced.
pub fn file_name(delivery_key: &str) -> String {
    let safe: String = delivery_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.eml")
}

/// What a report's emails carry besides their content: the headers receivers expect of an
/// automated list (RFC 2919 `List-Id`, RFC 3834 `Auto-Submitted`, RFC 2369
/// `List-Unsubscribe`) and an optional `Reply-To`.
#[derive(Debug, Clone, Copy)]
pub struct ListHeaders<'a> {
    /// `List-Id: <REPORT.dawnpost.DOMAIN>`.
    pub report: &'a str,
    pub domain: &'a str,
    pub reply_to: Option<&'a Mailbox>,
    /// A `mailto:` URL.
    pub unsubscribe: Option<&'a str>,
}

/// The message to one recipient: the report's text and HTML as alternatives (inside
/// multipart/mixed with the CSV attachment when it has one), under [`head`]'s headers.
pub fn build_message(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    rendered: &Rendered,
    list: &ListHeaders<'_>,
) -> Result<Message, lettre::error::Error> {
    let builder = head(from, to, subject, delivery_key, date, list);
    let alternative = MultiPart::alternative()
        .singlepart(
            SinglePart::builder()
                .header(ContentType::TEXT_PLAIN)
                .body(rendered.text.clone()),
        )
        .singlepart(
            SinglePart::builder()
                .header(ContentType::TEXT_HTML)
                .body(rendered.html.clone()),
        );
    let message = match &rendered.csv {
        None => builder.multipart(alternative)?,
        Some(csv) => {
            // A constant that parses; lettre has no error of its own for it.
            let csv_type = ContentType::parse("text/csv; charset=utf-8")
                .map_err(|_| lettre::error::Error::CannotParseFilename)?;
            let attachment = lettre::message::Attachment::new(delivery_key.job().csv_filename())
                .body(csv.clone(), csv_type);
            builder.multipart(
                MultiPart::mixed()
                    .multipart(alternative)
                    .singlepart(attachment),
            )?
        }
    };
    Ok(with_list_headers(message, delivery_key, list))
}

/// The bounded copy of a report too large for email: one text part, `text` (a notice with the
/// link to the whole report, then as much of its text part as fits), under the same headers —
/// the same Message-ID — as the whole message would have had.
pub fn build_linked_message(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    text: String,
    list: &ListHeaders<'_>,
) -> Result<Message, lettre::error::Error> {
    let message =
        head(from, to, subject, delivery_key, date, list).singlepart(SinglePart::plain(text))?;
    Ok(with_list_headers(message, delivery_key, list))
}

/// From, To, Subject, Date, the Message-ID the delivery key makes, and Reply-To.
fn head(
    from: &Mailbox,
    to: &lettre::Address,
    subject: &str,
    delivery_key: &DeliveryKey,
    date: SystemTime,
    list: &ListHeaders<'_>,
) -> lettre::message::MessageBuilder {
    let mut builder = Message::builder()
        .from(from.clone())
        .to(Mailbox::new(None, to.clone()))
        .subject(subject)
        .date(date)
        .message_id(Some(message_id(delivery_key, from)));
    if let Some(r) = list.reply_to {
        builder = builder.reply_to(r.clone());
    }
    // A correction threads under the first revision's message to the same recipient.
    let job = delivery_key.job();
    if job.revision() > 1 {
        let first = DeliveryKey::new(
            job.with_revision(1),
            delivery_key.kind(),
            delivery_key.destination(),
        );
        let original = message_id(&first, from);
        builder = builder.in_reply_to(original.clone()).references(original);
    }
    builder
}

/// The delivery key's header, `Auto-Submitted`, `List-Id` and `List-Unsubscribe`.
fn with_list_headers(
    mut message: Message,
    delivery_key: &DeliveryKey,
    list: &ListHeaders<'_>,
) -> Message {
    let headers = message.headers_mut();
    let mut raw = |name: &'static str, value: String| {
        headers.insert_raw(HeaderValue::new(
            HeaderName::new_from_ascii_str(name),
            value,
        ));
    };
    raw(DELIVERY_HEADER, delivery_key.to_string());
    raw("Auto-Submitted", "auto-generated".into());
    raw(
        "List-Id",
        format!("<{}.dawnpost.{}>", list.report, list.domain),
    );
    if let Some(u) = list.unsubscribe {
        raw("List-Unsubscribe", format!("<{u}>"));
    }
    message
}

/// At least the encoded size of the message [`build_message`] makes of `rendered`: every part
/// in base64 (4/3, in lines of 76 and CRLF), and 16 KiB for headers and boundaries. Under the
/// relay's limit, the message is too, and needs no encoding to be measured.
pub fn size_bound(rendered: &Rendered) -> u64 {
    let parts =
        rendered.html.len() + rendered.text.len() + rendered.csv.as_ref().map_or(0, String::len);
    let base64 = (parts as u64).div_ceil(3) * 4;
    base64 + base64.div_ceil(76) * 2 + (16 << 10)
}

/// The text of a bounded copy: a notice with the link to the whole report (`size` its encoded
/// size, `limit` the relay's), then the report's text part, cut at a line's end to
/// `max_bytes`.
pub fn linked_text(text: &str, link: &str, (size, limit): (u64, u64), max_bytes: usize) -> String {
    let mut out = format!(
        "This report is too large to send by email ({} as a message; the limit is {}).\n\
         The whole report, with its plain text and CSV, is here:\n\n{link}\n\n",
        crate::report::render::human_size(usize::try_from(size).unwrap_or(usize::MAX)),
        crate::report::render::human_size(usize::try_from(limit).unwrap_or(usize::MAX)),
    );
    if text.len() <= max_bytes {
        out.push_str(text);
        return out;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = text[..end].rfind('\n').map_or(end, |i| i + 1);
    out.push_str(&text[..end]);
    out.push_str("\n[… cut here: the rest is in the whole report, at the link above.]\n");
    out
}
