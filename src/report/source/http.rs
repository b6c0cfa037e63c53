//! The `http` kind: a GET of a URL with the window in it, its body JSON, at most
//! `source.limit` of it.

use std::time::Duration;

use serde_json::Value;

use super::{
    Answer, Ask, Asking, Fetch, Fetching, ProbeOutcome, Source, SourceError, settings_of, too_large,
};
use crate::config::{ConfigError, Fields, SourceConfig, SourceContext, SourceSpec};
use crate::domain::duration::Span;
use crate::domain::redact::http_error;
use crate::domain::window::{Window, rfc3339};

const KIND: &str = "http";

/// `{ kind = "http", url, timeout }`: the URL may hold `{{window.start}}` and `{{window.end}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSource {
    pub url: String,
    pub timeout: Span,
}

source_settings!(HttpSource {
    fn timeout(&self) -> Option<Span> {
        Some(self.timeout)
    }
});

/// `ready_when = { kind = "http", url }`: ready when a GET of the URL (which may hold the
/// window) answers 2xx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProbe {
    pub url: String,
}

source_settings!(HttpProbe {});

/// The `http` kind.
pub(super) struct Http;

impl SourceConfig for Http {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn read(
        &self,
        f: &mut Fields<'_, '_>,
        _ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let timeout = (f.opt::<Span>("timeout", errors)).unwrap_or(Span::from_secs(30));
        let url = window_url(f, errors)?;
        Some(SourceSpec::new(HttpSource { url, timeout }))
    }

    fn probes(&self) -> bool {
        true
    }

    fn read_probe(
        &self,
        f: &mut Fields<'_, '_>,
        _ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let url = window_url(f, errors)?;
        Some(SourceSpec::new(HttpProbe { url }))
    }
}

/// `url`: an http(s) URL that may hold `{{window.start}}` and `{{window.end}}`.
fn window_url(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<String> {
    let url = f.req::<String>("url", errors)?;
    match crate::config::window_url(&url) {
        Ok(()) => Some(url),
        Err(message) => {
            errors.push(f.place.error("url", message));
            None
        }
    }
}

impl Source for Http {
    fn fetch<'a>(&'a self, spec: &'a SourceSpec, at: Fetch<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let s = settings_of::<HttpSource>(spec, KIND)?;
            fetch(&s.url, at.window, at.limit, at.http, at.max_bytes).await
        })
    }

    fn ask<'a>(&'a self, probe: &'a SourceSpec, at: Ask<'a>) -> Asking<'a> {
        Box::pin(async move {
            let Some(p) = probe.settings::<HttpProbe>() else {
                return Answer::new(ProbeOutcome::Failed, "not an http probe");
            };
            let url = http_url(&p.url, at.window);
            let shown = crate::domain::redact::redact_endpoint(&url);
            match at.http.get(&url).timeout(at.limit.as_std()).send().await {
                Ok(resp) if resp.status().is_success() => Answer::new(
                    ProbeOutcome::Ready,
                    format!("GET {shown}: HTTP {}", resp.status()),
                ),
                Ok(resp) => Answer::new(
                    ProbeOutcome::NotReady,
                    format!("GET {shown}: HTTP {}", resp.status()),
                ),
                Err(e) => Answer::new(
                    ProbeOutcome::Failed,
                    format!("GET {shown}: {}", http_error(&e)),
                ),
            }
        })
    }
}

/// The HTTP client of `http` sources (each request bounded by the source's own timeout).
/// The platform's roots are trusted, and `ca`'s besides (`tls.ca_file`).
pub(crate) fn http_client(
    ca: Option<&crate::runtime::tls::CaBundle>,
) -> Result<reqwest::Client, crate::runtime::tls::TlsError> {
    let builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("dawnpost/", env!("CARGO_PKG_VERSION")));
    Ok(crate::runtime::tls::trust(builder, ca)?.build()?)
}

/// The source URL for a window.
pub(crate) fn http_url(template: &str, window: &Window) -> String {
    let enc = |t| url::form_urlencoded::byte_serialize(rfc3339(t).as_bytes()).collect::<String>();
    template
        .replace("{{window.start}}", &enc(window.start))
        .replace("{{window.end}}", &enc(window.end))
}

async fn fetch(
    template: &str,
    window: &Window,
    timeout: crate::domain::duration::Span,
    http: &reqwest::Client,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    let url = http_url(template, window);
    let shown = crate::domain::redact::redact_endpoint(&url);
    let resp = http
        .get(&url)
        .timeout(timeout.as_std())
        .send()
        .await
        .map_err(|e| match crate::runtime::tls::untrusted_certificate(&e) {
            // A misconfiguration (a private CA not trusted): no retry mends it.
            Some(why) => SourceError::Permanent(format!("GET {shown}: {why}")),
            None => SourceError::Transient(format!("GET {shown}: {}", http_error(&e))),
        })?;
    let status = resp.status();
    if status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429) {
        return Err(SourceError::Transient(format!(
            "GET {shown}: HTTP {status}"
        )));
    }
    if !status.is_success() {
        return Err(SourceError::Permanent(format!(
            "GET {shown}: HTTP {status}"
        )));
    }
    if resp.content_length().is_some_and(|n| n > max_bytes) {
        return Err(too_large(&format!("GET {shown}"), max_bytes));
    }
    let mut resp = resp;
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        SourceError::Transient(format!("GET {shown}: reading the body: {}", http_error(&e)))
    })? {
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large(&format!("GET {shown}"), max_bytes));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body)
        .map_err(|e| SourceError::Permanent(format!("GET {shown}: invalid JSON: {e}")))
}
