//! `[server]`: where the HTTP server listens, the variables holding its tokens and secrets,
//! its connection bounds, and the base of the links it serves.

use std::net::SocketAddr;

use super::ConfigError;
use super::fields::Fields;
use crate::domain::duration::Span;

#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Default `127.0.0.1:8080`.
    pub bind: SocketAddr,
    /// Default `DAWNPOST_OPS_TOKEN`.
    pub ops_token_env: String,
    /// Default `DAWNPOST_INGEST_SECRET`.
    pub ingest_secret_env: String,
    /// The console's read-only token. Default `DAWNPOST_VIEWER_TOKEN`.
    pub viewer_token_env: String,
    /// How long a request head may take to arrive (and a kept-alive connection may idle).
    /// Default 10s.
    pub header_timeout: Span,
    /// How long a request body may take to arrive after its head. Default 10s (a body is at most 64 KiB).
    pub body_timeout: Span,
    /// Connections open at once; one more is refused 503. Default 512.
    pub max_connections: u32,
    /// The base of the links this server serves (a report too large for a destination is
    /// sent as a bounded copy and a link to it). No links without it.
    pub public_url: Option<url::Url>,
    /// The variable holding the key links are signed with. Default `DAWNPOST_LINK_SECRET`.
    pub link_secret_env: String,
}

/// Reads `[server]` into `s`.
pub(super) fn read(mut f: Fields<'_, '_>, s: &mut ServerSettings, errors: &mut Vec<ConfigError>) {
    if let Some(bind) = f.opt::<String>("bind", errors) {
        match bind.parse::<SocketAddr>() {
            Ok(a) => s.bind = a,
            Err(_) => errors.push(f.place.error(
                "bind",
                format!("{bind:?} is not an address such as 127.0.0.1:8080"),
            )),
        }
    }
    if let Some(env) = f.env_name("ops_token_env", errors) {
        s.ops_token_env = env;
    }
    if let Some(env) = f.env_name("ingest_secret_env", errors) {
        s.ingest_secret_env = env;
    }
    if let Some(env) = f.env_name("viewer_token_env", errors) {
        s.viewer_token_env = env;
    }
    if let Some(t) = f.positive("header_timeout", errors) {
        s.header_timeout = t;
    }
    if let Some(t) = f.positive("body_timeout", errors) {
        s.body_timeout = t;
    }
    if let Some(n) = f.at_least_one("max_connections", errors) {
        s.max_connections = n;
    }
    if let Some(u) = f.opt::<String>("public_url", errors) {
        match url::Url::parse(&u) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                s.public_url = Some(url);
            }
            _ => errors.push(f.place.error(
                "public_url",
                format!("{u:?} is not an http or https URL (e.g. \"https://dawnpost.example\")"),
            )),
        }
    }
    if let Some(env) = f.env_name("link_secret_env", errors) {
        s.link_secret_env = env;
    }
    f.finish(errors);
}

impl ServerSettings {
    /// What becomes of a report too large for a destination (`to` names who gets what):
    /// a bounded copy and a link, or, without `public_url`, nothing.
    pub(crate) fn too_large_fate(&self, to: &str) -> String {
        match &self.public_url {
            Some(_) => format!("{to} get a bounded copy and a link to the whole report instead"),
            None => format!(
                "{to} cannot be sent it: set [server] public_url and link_secret_env to send a bounded copy and a link"
            ),
        }
    }
}
