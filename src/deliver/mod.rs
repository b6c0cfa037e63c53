//! Delivery transports: email (lettre) and webhooks (reqwest). Each send returns an [`Outcome`]
//! classified as DESIGN §4 describes; the retry policy decides what follows.

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

/// An error and its causes in one line, each said once: `a: b: c`. Many errors print their
/// cause after their own words (`Connection error: …`), so a level's text loses the text of
/// the level below it before they are joined.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut texts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        texts.push(c.to_string());
        cause = c.source();
    }
    let mut own: Vec<String> = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let mut mine = text.as_str();
        if let Some(below) = texts.get(i + 1)
            && let Some(head) = mine.strip_suffix(below.as_str())
        {
            mine = head.trim_end().trim_end_matches(':').trim_end();
        }
        let repeated_below = texts.get(i + 1).is_some_and(|b| b.starts_with(mine));
        if !mine.is_empty() && !repeated_below && own.last().map(String::as_str) != Some(mine) {
            own.push(mine.to_string());
        }
    }
    own.join(": ")
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

    #[derive(Debug, thiserror::Error)]
    #[error("Connection error: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("Connection error: invalid peer certificate")]
    struct Inner;

    #[test]
    fn a_chain_says_each_cause_once() {
        assert_eq!(
            error_chain(&Outer(Inner)),
            "Connection error: invalid peer certificate"
        );
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
}
