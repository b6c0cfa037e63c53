//! Sources: where a report's data comes from. Each fetch returns the JSON the template sees as
//! `data`, or a failure that says whether trying again can help. One file per kind:
//!
//! - `file` (`file.rs`): a JSON file. Missing is transient (it may not be written yet); invalid
//!   is permanent.
//! - `http` (`http.rs`): a GET with `{{window.start}}` / `{{window.end}}` in the URL. 5xx, 408,
//!   429 and timeouts are transient; other 4xx and invalid JSON are permanent.
//! - `sql` (`sql/`): a read-only query against the database named by `url_env` (SQLite or
//!   PostgreSQL), with the window bound as `$1` (start) and `$2` (end), RFC 3339 text. Rows
//!   become an array of objects; integers, reals, text, booleans and NULL map to JSON (cast
//!   other types in SQL).

mod file;
mod http;
mod sql;

use std::time::Duration;

use serde_json::Value;

use crate::config::{DEFAULT_SOURCE_LIMIT, SourceSpec};
use crate::domain::window::Window;

pub(crate) use file::read_json_file;
pub(crate) use http::{http_client, http_url};
pub(crate) use sql::{SqlRows, first_cell};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// A source that may answer on a later attempt (a timeout, a 5xx, a connection refused).
    #[error("source failed: {0}")]
    Transient(String),
    #[error("source failed: {0}")]
    Permanent(String),
}

impl SourceError {
    /// What went wrong, without the class.
    pub fn message(&self) -> &str {
        match self {
            SourceError::Transient(m) | SourceError::Permanent(m) => m,
        }
    }
}

/// Fetches a report's data for a window.
pub async fn fetch(
    spec: &SourceSpec,
    window: &Window,
    http: &reqwest::Client,
) -> Result<Value, SourceError> {
    // A file has no timeout of its own: a minute, as a bound for a hung file system.
    let own = spec
        .timeout()
        .map_or(Duration::from_secs(60), |t| t.as_std());
    fetch_within(spec, window, http, own, DEFAULT_SOURCE_LIMIT).await
}

/// [`fetch`], cut at `deadline` or the source's own timeout, whichever comes first: a hung
/// source is a transient failure, never a worker held forever. At most `max_bytes` are read
/// (a body, a file, the rows of a query as JSON); more is a permanent failure that says so.
pub async fn fetch_within(
    spec: &SourceSpec,
    window: &Window,
    http: &reqwest::Client,
    deadline: Duration,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    let limit = spec
        .timeout()
        .map_or(deadline, |own| deadline.min(own.as_std()));
    // The source's own means cut it at `limit` with its own error (reqwest's timeout,
    // PostgreSQL's statement_timeout, SQLite's interrupt); this is the backstop.
    let backstop = limit.saturating_add(Duration::from_secs(1));
    let fetch = fetch_limited(spec, window, http, limit, max_bytes);
    match tokio::time::timeout(backstop, fetch).await {
        Ok(result) => result,
        Err(_) => Err(SourceError::Transient(format!(
            "no data within {}: the fetch was cut at its deadline",
            crate::domain::duration::Span::from_std(backstop)
        ))),
    }
}

async fn fetch_limited(
    spec: &SourceSpec,
    window: &Window,
    http: &reqwest::Client,
    limit: Duration,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    let limit = crate::domain::duration::Span::from_std(limit);
    match spec {
        SourceSpec::File { path } => file::read_file(path.clone(), max_bytes).await,
        SourceSpec::Http { url, .. } => http::fetch(url, window, limit, http, max_bytes).await,
        SourceSpec::Sql { url_env, query, .. } => {
            sql::fetch(url_env, query, window, limit, max_bytes).await
        }
    }
}

/// More data than `source.limit` allows.
pub(super) fn too_large(what: &str, max_bytes: u64) -> SourceError {
    SourceError::Permanent(format!(
        "{what}: more than {max_bytes} bytes (source.limit): raise the limit or narrow the source"
    ))
}
