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
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::transport::smtp::AsyncSmtpTransportBuilder;
use lettre::transport::smtp::PoolConfig;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

mod config;
pub mod dsn;
pub mod message;
pub mod providers;
pub mod ses;

pub use config::Options;

use super::destination::{
    Build, Confirm, Destination, NotConfirmed, Notice, Parcel, Preview, Sender, Sending, Shown,
    permanent,
};
use super::{DeliverError, Outcome, SendTarget, scrub};
use crate::config::{EmailSettings, EmailTransport};
use crate::domain::keys::{DeliveryKey, DestinationKind};
use crate::domain::outcome::ResponseClass;
use crate::report::render::{GMAIL_CLIP_BYTES, Rendered, human_size};

/// How much longer than `email.timeout` a whole send may take before it counts as ambiguous:
/// room for lettre's own connect timeout to fire first.
const CONNECT_SLACK: Duration = Duration::from_secs(2);

/// The email kind: a report's `email` recipients and its `owners`, each sent through the
/// SMTP relay (or written as a `.eml` file).
pub struct Email;

/// The email kind's name.
pub const KIND: DestinationKind = DestinationKind::named("email");

/// A report's email options as configured (none when it sends no email).
fn options(report: &crate::config::Report) -> Option<&Options> {
    report.destinations.detail::<Options>(KIND)
}

/// What a report with `unsubscribe = true` needs to offer it.
const ONE_CLICK_NEEDS: &str = "unsubscribe = true needs [server] public_url and link_secret_env: \
     the one-click unsubscribe link is signed under them";

/// The one-click unsubscribe URL of delivery `to`, when its report offers one (refused without
/// the links to sign it).
fn one_click(
    report: &crate::config::Report,
    links: Option<&super::links::Links>,
    to: &DeliveryKey,
) -> Result<Option<String>, &'static str> {
    if !options(report).is_some_and(|o| o.unsubscribe) {
        return Ok(None);
    }
    let links = links.ok_or(ONE_CLICK_NEEDS)?;
    let address = crate::domain::bounce::address(to.destination())
        .unwrap_or_else(|| to.destination().to_ascii_lowercase());
    Ok(Some(links.unsubscribe(report.id.as_str(), &address)))
}

impl Destination for Email {
    fn recipient(&self, destination: &str) -> Option<String> {
        crate::domain::bounce::address(destination)
    }

    fn invalid(
        &self,
        report: &crate::config::Report,
        _rendered: &Rendered,
        config: &crate::config::Config,
    ) -> Vec<String> {
        let offers = options(report).is_some_and(|o| o.unsubscribe);
        match offers && config.settings.server.public_url.is_none() {
            true => vec![ONE_CLICK_NEEDS.to_string()],
            false => Vec::new(),
        }
    }

    fn send_target(&self, _destination: &str, relay: &SendTarget) -> SendTarget {
        relay.clone()
    }

    fn timeout(&self, settings: &crate::config::Settings) -> std::time::Duration {
        settings.email.timeout.as_std()
    }

    fn sender(&self, build: &Build<'_>) -> Result<Box<dyn Sender>, DeliverError> {
        let s = &build.config.settings;
        Ok(Box::new(EmailSending {
            sender: EmailSender::from_settings(
                &s.email,
                build.ca,
                &build.config.root,
                build.concurrency,
            )?,
            from: s.email.from.clone(),
            reply_to: s.email.reply_to.clone(),
            list_domain: s.email.list_domain().to_string(),
            max_message_bytes: s.email.max_message_bytes,
            links: build.links.clone(),
        }))
    }

    /// An address needs no kind before it.
    fn shown(&self, destination: &str) -> String {
        crate::domain::redact::redact_address(destination)
    }

    fn target_shown(&self, target: &str, reports: usize) -> String {
        format!("the SMTP relay {target} ({reports} report(s))")
    }

    /// The message to the report's first recipient, as `.eml`.
    fn preview(&self, s: &Shown<'_>) -> Result<Option<Preview>, String> {
        let Some(to) = self.of_report(s.report).first() else {
            return Ok(None);
        };
        let to: lettre::Address = (to.parse()).map_err(|e| format!("{}: {e}", self.shown(to)))?;
        let settings = &s.config.settings.email;
        let key = DeliveryKey::new(s.job.clone(), KIND, to.to_string());
        let links = super::links::Links::from_settings(&s.config.settings.server);
        let one_click = one_click(s.report, links.ok().flatten().as_ref(), &key)
            .ok()
            .flatten();
        let list = message::ListHeaders {
            report: s.report.id.as_str(),
            domain: settings.list_domain(),
            reply_to: settings.reply_to.as_ref(),
            unsubscribe: options(s.report).and_then(|o| o.list_unsubscribe.as_deref()),
            one_click: one_click.as_deref(),
            attach: s.report.attach,
        };
        let subject = message::subject_of(&s.report.title, s.job, s.rendered);
        let message = message::build_message(
            &settings.from,
            &to,
            &subject,
            &key,
            s.now.into(),
            s.rendered,
            &list,
        )
        .map_err(|e| format!("cannot build the email: {e}"))?;
        let bytes = message.formatted();
        let mut warnings = Vec::new();
        if s.rendered.html.len() > GMAIL_CLIP_BYTES {
            warnings.push(format!(
                "the HTML part ({}) is over Gmail's clipping size (102 KB): Gmail shows its start \
                 and a \"View entire message\" link",
                human_size(s.rendered.html.len())
            ));
        }
        let limit = settings.max_message_bytes;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
            warnings.push(format!(
                "the email ({} encoded) is over [email] max_message_bytes ({}): {}",
                human_size(bytes.len()),
                crate::config::shown_size(limit),
                s.config.settings.server.too_large_fate("its recipients")
            ));
        }
        Ok(Some(Preview {
            size: format!("email {} encoded", human_size(bytes.len())),
            file: Some(("eml", bytes)),
            warnings,
        }))
    }

    /// Gmail's clipping size, and (by the parts alone, which encoding only makes larger)
    /// `max_message_bytes`.
    fn checked(
        &self,
        rendered: &Rendered,
        (sizes, parts): &(String, u64),
        config: &crate::config::Config,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if rendered.html.len() > GMAIL_CLIP_BYTES {
            out.push(format!(
                "the sample's HTML part ({}) is over Gmail's clipping size (102 KB)",
                human_size(rendered.html.len())
            ));
        }
        let limit = config.settings.email.max_message_bytes;
        if *parts > limit {
            out.push(format!(
                "the sample's email ({sizes}) is over [email] max_message_bytes ({}): {}",
                crate::config::shown_size(limit),
                config.settings.server.too_large_fate("its recipients")
            ));
        }
        out
    }
}

/// The email kind's sender: the transport, and what every message carries.
struct EmailSending {
    sender: EmailSender,
    from: Mailbox,
    reply_to: Option<Mailbox>,
    /// The domain of every email's `List-Id`.
    list_domain: String,
    /// `email.max_message_bytes`: past it, a recipient gets a bounded copy and a link.
    max_message_bytes: u64,
    /// Links to reports too large to send (`[server] public_url`); none without it.
    links: Option<super::links::Links>,
}

impl Sender for EmailSending {
    fn send<'a>(
        &'a self,
        parcel: &'a Parcel<'a>,
        to: &'a DeliveryKey,
        confirm: Confirm<'a>,
    ) -> Sending<'a, Result<Outcome, NotConfirmed>> {
        Box::pin(async move {
            let (message, linked) = match self.message(parcel, to) {
                Ok(made) => made,
                Err(outcome) => return Ok(outcome),
            };
            confirm().await?;
            let outcome = self.sender.send(&message, to, to.destination()).await;
            Ok(if linked { outcome.linked() } else { outcome })
        })
    }

    fn notify<'a>(&'a self, notice: &'a Notice<'a>) -> Sending<'a, Outcome> {
        Box::pin(async move {
            match self.notice_message(notice) {
                Ok(message) => {
                    (self.sender)
                        .send(&message, &notice.key, notice.destination)
                        .await
                }
                Err(why) => permanent(why),
            }
        })
    }
}

impl EmailSending {
    /// The message to `to`: the whole report, or its bounded copy with a link when the whole
    /// passes `email.max_message_bytes` (then `true`).
    fn message(&self, parcel: &Parcel<'_>, to: &DeliveryKey) -> Result<(Message, bool), Outcome> {
        let address: lettre::Address = to.destination().parse().map_err(|_| {
            permanent(format!(
                "invalid address {}",
                crate::domain::redact::redact_address(to.destination())
            ))
        })?;
        let subject = message::subject_of(&parcel.report.title, parcel.job, parcel.rendered);
        let one_click = one_click(parcel.report, self.links.as_ref(), to).map_err(permanent)?;
        let list = message::ListHeaders {
            report: parcel.report.id.as_str(),
            domain: &self.list_domain,
            reply_to: self.reply_to.as_ref(),
            unsubscribe: options(parcel.report).and_then(|o| o.list_unsubscribe.as_deref()),
            one_click: one_click.as_deref(),
            attach: parcel.report.attach,
        };
        let (from, date) = (&self.from, parcel.now.into());
        let built =
            message::build_message(from, &address, &subject, to, date, parcel.rendered, &list);
        let whole = built.map_err(|e| permanent(format!("cannot build the message: {e}")))?;
        let Some(size) = self.over(parcel, &whole) else {
            return Ok((whole, false));
        };
        let text = self.linked_text(parcel, size)?;
        message::build_linked_message(from, &address, &subject, to, date, text, &list)
            .map(|m| (m, true))
            .map_err(|e| permanent(format!("cannot build the message: {e}")))
    }

    /// The encoded size of `message` when it passes `email.max_message_bytes`: measured only
    /// when a bound of it does, and once for all the job's recipients (theirs differ by an
    /// address).
    fn over(&self, parcel: &Parcel<'_>, message: &Message) -> Option<u64> {
        let limit = self.max_message_bytes;
        *parcel.memo.get_or_init(KIND, || {
            if message::size_bound(parcel.rendered) <= limit {
                return None;
            }
            let size = message.formatted().len() as u64;
            (size > limit.saturating_sub(1 << 10)).then_some(size)
        })
    }

    /// The text of a bounded copy of the job's report, with its link; without links (no
    /// `[server] public_url`) the email cannot be sent, and says what would let it.
    fn linked_text(&self, parcel: &Parcel<'_>, size: u64) -> Result<String, Outcome> {
        let limit = self.max_message_bytes;
        let links = self.links.as_ref().ok_or_else(|| {
            permanent(format!(
                "the message is {} as sent, over email.max_message_bytes ({}): set [server] public_url and link_secret_env to send a bounded copy with a link instead",
                crate::report::render::human_size(usize::try_from(size).unwrap_or(usize::MAX)),
                crate::config::shown_size(limit)
            ))
        })?;
        let link = links.link(
            parcel.job,
            &parcel.artifact.sha256,
            super::links::Part::Html,
        );
        // Base64 takes 4/3 and its line breaks a little more: five eighths of the limit fit.
        let room = usize::try_from(limit / 8 * 5).unwrap_or(usize::MAX);
        Ok(message::linked_text(
            &parcel.rendered.text,
            &link,
            (size, limit),
            room,
        ))
    }

    /// The plain-text email of an owners' notice: its Message-ID from the send's key, the
    /// same on every retry.
    fn notice_message(&self, notice: &Notice<'_>) -> Result<Message, String> {
        let to: lettre::Address = (notice.destination.parse()).map_err(|_| {
            format!(
                "{} is not an address",
                crate::domain::redact::redact_address(notice.destination)
            )
        })?;
        let mut message = Message::builder()
            .from(self.from.clone())
            .to(Mailbox::new(None, to))
            .subject(notice.subject)
            .message_id(Some(message::message_id(&notice.key, &self.from)))
            .header(ContentType::TEXT_PLAIN)
            .body(notice.body.to_string())
            .map_err(|e| format!("cannot build the message: {e}"))?;
        let headers = message.headers_mut();
        for (name, value) in [
            ("X-Dawnpost-Notice", notice.message.to_string()),
            ("Auto-Submitted", "auto-generated".to_string()),
        ] {
            headers.insert_raw(HeaderValue::new(
                HeaderName::new_from_ascii_str(name),
                value,
            ));
        }
        Ok(message)
    }
}

/// The header that carries the delivery key.
pub(crate) const DELIVERY_HEADER: &str = "X-Dawnpost-Delivery";

/// Where emails go.
#[derive(Clone)]
pub(crate) enum EmailSender {
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
                let name = message::file_name(&delivery_key.to_string());
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
pub(crate) fn classify(e: &lettre::transport::smtp::Error, to: &str) -> Outcome {
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
