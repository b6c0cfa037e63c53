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

/// Implements [`crate::config::SourceSettings`] for a settings type of the kind whose `KIND`
/// is in scope: its kind, `Any`, and `==` as its sameness; `items` add or override the rest
/// (`timeout`, `sample`).
macro_rules! source_settings {
    ($t:ty { $($item:item)* }) => {
        impl crate::config::SourceSettings for $t {
            fn kind(&self) -> &'static str {
                KIND
            }

            fn as_any(&self) -> &dyn std::any::Any {
                self
            }

            fn same(&self, other: &dyn crate::config::SourceSettings) -> bool {
                crate::config::same_settings(self, other)
            }

            $($item)*
        }
    };
}

mod file;
mod http;
mod sql;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use crate::config::{DEFAULT_SOURCE_LIMIT, SourceConfig, SourceSpec};
use crate::domain::duration::Span;
use crate::domain::window::Window;

pub(crate) use file::read_json_file;
pub use file::{FileProbe, FileSource};
pub(crate) use http::http_client;
pub use http::{HttpProbe, HttpSource};
pub(crate) use sql::SqlRows;
pub use sql::{SqlProbe, SqlSource};

/// One kind of source: it reads its keys ([`SourceConfig`]), fetches a window's data and, if
/// it [`probes`](SourceConfig::probes), asks whether a window's data is ready.
pub trait Source: SourceConfig {
    /// The data of `spec` (this kind's settings) for `at`'s window, within its bounds.
    fn fetch<'a>(&'a self, spec: &'a SourceSpec, at: Fetch<'a>) -> Fetching<'a>;

    /// Whether the data of `at`'s job is ready, as `probe` (this kind's probe settings) asks,
    /// within `at.limit`. Asked only of a kind that probes.
    fn ask<'a>(&'a self, _probe: &'a SourceSpec, _at: Ask<'a>) -> Asking<'a> {
        let why = format!(
            "a source of kind {:?} cannot say when data is ready",
            self.kind()
        );
        Box::pin(async move { Answer::new(ProbeOutcome::Failed, why) })
    }
}

/// A future [`Source::ask`] returns.
pub type Asking<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// What one readiness probe is for and within: the job's local date and window, the time it
/// may take and the HTTP client.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub date: chrono::NaiveDate,
    pub window: &'a Window,
    pub limit: Span,
    pub http: &'a reqwest::Client,
}

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    Ready,
    NotReady,
    /// An error or a timeout: counts as not ready.
    Failed,
}

impl ProbeOutcome {
    pub const ALL: [ProbeOutcome; 3] = [
        ProbeOutcome::Ready,
        ProbeOutcome::NotReady,
        ProbeOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeOutcome::Ready => "ready",
            ProbeOutcome::NotReady => "not_ready",
            ProbeOutcome::Failed => "failed",
        }
    }

    /// How a person reads it.
    pub fn shown(self) -> &'static str {
        match self {
            ProbeOutcome::Ready => "ready",
            ProbeOutcome::NotReady => "not ready",
            ProbeOutcome::Failed => "failed",
        }
    }
}

/// A probe's finding and what it answered, for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: ProbeOutcome,
    pub text: String,
}

impl Answer {
    pub(crate) fn new(outcome: ProbeOutcome, text: impl Into<String>) -> Answer {
        Answer {
            outcome,
            text: text.into(),
        }
    }
}

/// A future a [`Source`] returns.
pub type Fetching<'a> = Pin<Box<dyn Future<Output = Result<Value, SourceError>> + Send + 'a>>;

/// What one fetch is for and within: the job's window, the HTTP client, the time it may take
/// (the source's own means cut it there) and the most bytes of data it may read.
#[derive(Clone, Copy)]
pub struct Fetch<'a> {
    pub window: &'a Window,
    pub http: &'a reqwest::Client,
    pub limit: Span,
    pub max_bytes: u64,
}

/// Every kind of source this version reads.
static KINDS: &[&dyn Source] = &[&file::File, &http::Http, &sql::Sql];

pub fn kinds() -> &'static [&'static dyn Source] {
    KINDS
}

/// `spec`'s settings as kind `kind`'s type `T`.
fn settings_of<'s, T: 'static>(spec: &'s SourceSpec, kind: &str) -> Result<&'s T, SourceError> {
    spec.settings::<T>().ok_or_else(|| {
        SourceError::Permanent(format!(
            "the source is not a {kind} source but a {}",
            spec.kind()
        ))
    })
}

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
    let Some(kind) = KINDS.iter().find(|k| k.kind() == spec.kind()) else {
        let why = format!("this version reads no source of kind {:?}", spec.kind());
        return Err(SourceError::Permanent(why));
    };
    let at = Fetch {
        window,
        http,
        limit: Span::from_std(limit),
        max_bytes,
    };
    kind.fetch(spec, at).await
}

/// More data than `source.limit` allows.
pub(super) fn too_large(what: &str, max_bytes: u64) -> SourceError {
    SourceError::Permanent(format!(
        "{what}: more than {max_bytes} bytes (source.limit): raise the limit or narrow the source"
    ))
}
