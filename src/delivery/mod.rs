//! Delivery: the destination seam and its kinds — email (lettre) and webhooks (reqwest), each
//! send returning an [`Outcome`] classified as ARCHITECTURE.md's "Failure classes" describe;
//! the retry policy that decides what follows; webhook signing; signed links to an artifact too
//! large to send; and the owners' notices.
//!
//! Every kind of destination is one [`Destination`] (`destination.rs`, the seam) in [`KINDS`],
//! and the rest of the code asks it instead of naming kinds; the configuration reads each
//! kind's keys through it too ([`readers`]). A kind is one file (or folder) of this folder that
//! implements the trait, and one line in [`KINDS`].

mod chat;
pub mod destination;
pub mod email;
pub mod links;
pub mod notice;
#[cfg(test)]
mod probe;
pub mod retry;
pub mod signing;
pub mod slack;
pub mod teams;
pub mod webhook;

use chrono::Duration;

use crate::config::{DestinationConfig, Owners, Report};
use crate::domain::keys::DestinationKind;
use destination::Destination;

use crate::domain::outcome::ResponseClass;
use crate::domain::redact::redact_address;

/// Every kind this version sends. Adding a kind is a file and a line here.
const KINDS: &[&dyn Destination] = &[
    &email::Email,
    &webhook::Webhook,
    &slack::Slack,
    &teams::Teams,
    #[cfg(test)]
    &probe::Probe,
];

/// Every kind this version sends.
pub fn kinds() -> &'static [&'static dyn Destination] {
    KINDS
}

/// What this version reads a configuration with: every kind's keys, and an SQL
/// `[[family]]`'s rows from its database.
pub fn readers() -> crate::config::Readers<'static> {
    crate::config::Readers {
        destinations: KINDS.iter().map(|d| *d as &dyn DestinationConfig).collect(),
        sources: (crate::report::source::kinds().iter())
            .map(|k| *k as &dyn crate::config::SourceConfig)
            .collect(),
        rows: &crate::report::source::SqlRows,
    }
}

/// The kind named `kind`, if this version sends it.
pub fn of(kind: DestinationKind) -> Option<&'static dyn Destination> {
    KINDS.iter().copied().find(|d| d.kind() == kind)
}

/// A report's destinations, each kind's in turn.
pub fn of_report(report: &Report) -> Vec<(DestinationKind, String)> {
    KINDS
        .iter()
        .flat_map(|d| d.of_report(report).iter().map(|to| (d.kind(), to.clone())))
        .collect()
}

/// A report's owners' destinations, each kind's in turn.
pub(crate) fn of_owners(owners: &Owners) -> Vec<(DestinationKind, String)> {
    KINDS
        .iter()
        .flat_map(|d| d.of_owners(owners).iter().map(|to| (d.kind(), to.clone())))
        .collect()
}

/// The longest any kind's send may take, by its transport's own timeout.
pub(crate) fn longest_timeout(settings: &crate::config::Settings) -> std::time::Duration {
    (KINDS.iter().map(|d| d.timeout(settings)))
        .max()
        .unwrap_or_default()
}

/// What each kind the report sends to finds in its sample's render (`check`): why it cannot
/// be sent (errors), and the limits it passes (warnings).
pub fn checked(
    report: &Report,
    rendered: &crate::report::render::Rendered,
    config: &crate::config::Config,
) -> (Vec<String>, Vec<String>) {
    let parts = crate::report::render::part_sizes(rendered);
    let kinds = || (KINDS.iter()).filter(|d| !d.of_report(report).is_empty());
    let errors = kinds()
        .flat_map(|d| d.invalid(report, rendered, config))
        .collect();
    let warnings = kinds()
        .flat_map(|d| d.checked(rendered, &parts, config))
        .collect();
    (errors, warnings)
}

/// The parts the kinds `report` sends to make themselves when its template has none.
pub fn default_parts(report: &Report) -> Vec<crate::report::render::DefaultPart> {
    (KINDS.iter())
        .filter(|d| !d.of_report(report).is_empty())
        .filter_map(|d| d.default_part())
        .collect()
}

/// The rates the kinds' send targets keep when no `[[rate_limit]]` names them, as entries that
/// come after the configured ones.
pub(crate) fn default_rates() -> Vec<crate::config::RateLimitSpec> {
    (KINDS.iter())
        .filter_map(|d| d.default_rate())
        .filter_map(|(pattern, per_second, burst)| {
            let matcher = globset::Glob::new(pattern).ok()?.compile_matcher();
            Some(crate::config::RateLimitSpec {
                host: pattern.to_string(),
                matcher,
                per_second,
                burst,
            })
        })
        .collect()
}

/// What follows an ambiguous attempt of `key` (a delivery of `report`): its kind's policy, if
/// its kind has one.
pub(crate) fn on_ambiguous(
    report: &Report,
    key: &crate::domain::keys::DeliveryKey,
) -> Option<destination::OnAmbiguous> {
    of(*key.kind())?.on_ambiguous(report, key.destination())
}

/// What each kind the report sends to shows of its render (`preview`).
/// The person delivery `key` reaches, as a suppression names them; `None` for a kind that
/// reaches no one person.
pub(crate) fn recipient(key: &crate::domain::keys::DeliveryKey) -> Option<String> {
    of(*key.kind())?.recipient(key.destination())
}

pub(crate) fn previews(
    shown: &destination::Shown<'_>,
) -> Result<Vec<(DestinationKind, destination::Preview)>, String> {
    let mut out = Vec::new();
    for d in KINDS
        .iter()
        .filter(|d| !d.of_report(shown.report).is_empty())
    {
        if let Some(p) = d.preview(shown)? {
            out.push((d.kind(), p));
        }
    }
    Ok(out)
}

/// How many of a report's destinations each kind has, for a summary (`2 email, 1 webhook`).
pub fn counted(report: &Report) -> String {
    KINDS
        .iter()
        .map(|d| format!("{} {}", d.of_report(report).len(), d.kind()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A transport that cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("email.outbox_dir {path}: {source}")]
    Outbox {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("email.smtp_url: {0}")]
    SmtpUrl(String),
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    #[error("the webhook client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("tls.ca_file: {0}")]
    Tls(#[from] crate::runtime::tls::TlsError),
    #[error("[server] link_secret_env: {0}")]
    Links(#[from] links::LinkError),
}

/// Where a delivery's sends go: the SMTP relay's `host:port` for every email, the URL's
/// `host:port` for a webhook. The one name the 429 throttle and the `[[rate_limit]]` entries
/// key a delivery by (dead letters group by where it is *received*:
/// `domain::keys::receiver`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SendTarget(String);

impl SendTarget {
    /// The relay of an `smtp://` or `smtps://` URL (ports 25 and 465 by default).
    pub fn relay(smtp_url: &str) -> SendTarget {
        SendTarget(match url::Url::parse(smtp_url) {
            Ok(u) => {
                let default = if u.scheme() == "smtps" { 465 } else { 25 };
                format!(
                    "{}:{}",
                    u.host_str().unwrap_or("").to_ascii_lowercase(),
                    u.port().unwrap_or(default)
                )
            }
            Err(_) => smtp_url.to_ascii_lowercase(),
        })
    }

    /// A target named by its kind (`slack:slack_ops_webhook`), lowercase.
    pub(crate) fn named(name: &str) -> SendTarget {
        SendTarget(name.to_ascii_lowercase())
    }

    /// A webhook URL's `host:port` (the URL itself, lowercase, if it does not parse).
    pub fn webhook(url: &str) -> SendTarget {
        SendTarget(crate::domain::keys::host_port(url).unwrap_or_else(|| url.to_ascii_lowercase()))
    }

    /// Where sends of `kind` to `destination` go, emails going through `relay`; a kind this
    /// version does not send goes to where it is received.
    pub fn to(kind: DestinationKind, destination: &str, relay: &SendTarget) -> SendTarget {
        match of(kind) {
            Some(d) => d.send_target(destination, relay),
            None => SendTarget(crate::domain::keys::receiver(destination)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SendTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How one attempt ended, as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub class: ResponseClass,
    /// HTTP status or SMTP reply code.
    pub code: Option<i64>,
    /// The receiver's Retry-After, parsed.
    pub retry_after: Option<Duration>,
    /// Short and redacted: never a full recipient address, never a secret.
    pub reason: String,
    /// Bounded transport detail (at most [`DIAGNOSTICS_LIMIT`] bytes).
    pub diagnostics: Option<String>,
}

/// What an attempt's reason ends with when it sent a bounded copy with a link instead of the
/// whole report (a message too large for its destination).
pub const SENT_LINKED: &str = "sent a bounded copy with a link instead of the whole report";

/// Whether an attempt's reason says it sent a link instead of the whole report.
pub fn sent_linked(reason: &str) -> bool {
    reason.ends_with(SENT_LINKED)
}

/// The most transport detail kept per attempt.
pub(crate) const DIAGNOSTICS_LIMIT: usize = 2048;

impl Outcome {
    pub fn new(class: ResponseClass, code: Option<i64>, reason: impl Into<String>) -> Outcome {
        Outcome {
            class,
            code,
            retry_after: None,
            reason: reason.into(),
            diagnostics: None,
        }
    }

    /// This attempt sent a bounded copy with a link to the whole report instead of the whole:
    /// its reason says so, in words [`sent_linked`] finds.
    pub(crate) fn linked(mut self) -> Outcome {
        self.reason = format!("{}; {SENT_LINKED}", self.reason);
        self
    }

    pub(crate) fn with_diagnostics(mut self, d: impl Into<String>) -> Outcome {
        self.diagnostics = Some(bounded(d.into(), DIAGNOSTICS_LIMIT));
        self
    }
}

/// Cuts a string to at most `limit` bytes on a character boundary.
pub fn bounded(mut s: String, limit: usize) -> String {
    if s.len() > limit {
        let mut cut = limit;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Replaces every occurrence of `addr` in `text`, in any case (servers echo addresses as they
/// like), by its redacted form.
pub(crate) fn scrub(text: &str, addr: &str) -> String {
    if addr.is_empty() {
        return text.to_string();
    }
    let (lower_text, lower_addr) = (text.to_ascii_lowercase(), addr.to_ascii_lowercase());
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (at, _) in lower_text.match_indices(&lower_addr) {
        out.push_str(&text[rest..at]);
        out.push_str(&redact_address(addr));
        rest = at + addr.len();
    }
    out.push_str(&text[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_registered_once_under_its_own_name() {
        let mut names: Vec<DestinationKind> = KINDS.iter().map(|d| d.kind()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
        for d in KINDS {
            assert_eq!(of(d.kind()).map(|o| o.kind()), Some(d.kind()));
        }
        assert!(of(DestinationKind::named("fax")).is_none());
    }

    #[test]
    fn redacts_addresses() {
        assert_eq!(redact_address("ops-17@example.com"), "o***@example.com");
        assert_eq!(
            scrub("550 <lead@example.com> unknown", "lead@example.com"),
            "550 <l***@example.com> unknown"
        );
        assert_eq!(
            scrub("550 <LEAD@Example.COM> unknown", "lead@example.com"),
            "550 <l***@example.com> unknown"
        );
        assert_eq!(bounded("héllo".into(), 2), "h…");
    }

    #[test]
    fn a_relay_is_its_host_and_port_with_the_scheme_default() {
        assert_eq!(
            SendTarget::relay("smtps://mail.example").as_str(),
            "mail.example:465"
        );
        assert_eq!(
            SendTarget::relay("smtp://Mail.Example").as_str(),
            "mail.example:25"
        );
        assert_eq!(
            SendTarget::relay("smtp://m.example:2525").as_str(),
            "m.example:2525"
        );
        assert_eq!(
            SendTarget::webhook("http://h.example/x").as_str(),
            "h.example:80"
        );
    }
}
