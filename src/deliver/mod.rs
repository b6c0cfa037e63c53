//! Delivery transports: email (lettre) and webhooks (reqwest). Each send returns an [`Outcome`]
//! classified as ARCHITECTURE.md's "Failure classes" describe; the retry policy decides what
//! follows.

pub mod email;
pub mod webhook;

use chrono::Duration;

use crate::outcome::ResponseClass;

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
    Tls(#[from] crate::tls::TlsError),
}

pub use crate::words::error_chain;

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

/// The most transport detail kept per attempt.
pub const DIAGNOSTICS_LIMIT: usize = 2048;

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

    pub fn with_diagnostics(mut self, d: impl Into<String>) -> Outcome {
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

pub use crate::redact::redact_address;

/// Replaces every occurrence of `addr` in `text`, in any case (servers echo addresses as they
/// like), by its redacted form.
pub fn scrub(text: &str, addr: &str) -> String {
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
}
