//! The `sql` kind: a read-only query (in a file) against the database named by `url_env`,
//! SQLite (`sqlite.rs`) or PostgreSQL (`postgres.rs`), with the window bound in order; its rows
//! as JSON objects, at most `source.limit` of them as JSON. Also what a readiness probe and a
//! `[[family]]`'s query rows read.

mod postgres;
mod sqlite;

use serde_json::{Map, Value};
use sqlx::{Column, Row, TypeInfo, ValueRef};

use super::{
    Answer, Ask, Asking, Fetch, Fetching, ProbeOutcome, Source, SourceError, settings_of, too_large,
};
use crate::config::{ConfigError, Fields, SourceConfig, SourceContext, SourceSpec};
use crate::domain::duration::Span;
use crate::domain::window::{Window, rfc3339};

const KIND: &str = "sql";

/// `{ kind = "sql", url_env, query, timeout }`: a read-only query (in a file) against the
/// database named by the variable `url_env`, cut after `timeout` (default 60s; PostgreSQL also
/// gets it as `statement_timeout`). The database URL stays in the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlSource {
    pub url_env: String,
    pub query: std::path::PathBuf,
    pub timeout: Span,
}

source_settings!(SqlSource {
    fn timeout(&self) -> Option<Span> {
        Some(self.timeout)
    }
});

/// `ready_when = { kind = "sql", url_env, query }`: ready when the query (the window bound as
/// for a source) answers true, or a number other than zero, in its first cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlProbe {
    pub url_env: String,
    pub query: std::path::PathBuf,
}

source_settings!(SqlProbe {});

/// `url_env` and `query` (a file that exists, resolved against the root).
fn database_and_query(
    f: &mut Fields<'_, '_>,
    ctx: &SourceContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<(String, std::path::PathBuf)> {
    let url_env = f.env_name_required("url_env", errors);
    let query = f.req::<std::path::PathBuf>("query", errors).and_then(|q| {
        let path = crate::config::resolve(ctx.root, &q);
        let exists = path.is_file();
        if !exists {
            let message = format!("query file {} does not exist", path.display());
            errors.push(f.place.error("query", message));
        }
        exists.then_some(path)
    });
    Some((url_env?, query?))
}

/// SQL's truth: `true`, or a number other than zero (SQLite has no boolean type).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

/// The `sql` kind.
pub(super) struct Sql;

impl SourceConfig for Sql {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn read(
        &self,
        f: &mut Fields<'_, '_>,
        ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let timeout = (f.opt::<Span>("timeout", errors)).unwrap_or(Span::from_secs(60));
        let (url_env, query) = database_and_query(f, ctx, errors)?;
        Some(SourceSpec::new(SqlSource {
            url_env,
            query,
            timeout,
        }))
    }

    fn probes(&self) -> bool {
        true
    }

    fn read_probe(
        &self,
        f: &mut Fields<'_, '_>,
        ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let (url_env, query) = database_and_query(f, ctx, errors)?;
        Some(SourceSpec::new(SqlProbe { url_env, query }))
    }
}

impl Source for Sql {
    fn fetch<'a>(&'a self, spec: &'a SourceSpec, at: Fetch<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let s = settings_of::<SqlSource>(spec, KIND)?;
            fetch(&s.url_env, &s.query, at.window, at.limit, at.max_bytes).await
        })
    }

    fn ask<'a>(&'a self, probe: &'a SourceSpec, at: Ask<'a>) -> Asking<'a> {
        Box::pin(async move {
            let Some(p) = probe.settings::<SqlProbe>() else {
                return Answer::new(ProbeOutcome::Failed, "not an sql probe");
            };
            match first_cell(&p.url_env, &p.query, at.window, at.limit).await {
                Ok(Some(v)) if truthy(&v) => {
                    Answer::new(ProbeOutcome::Ready, format!("the query answered {v}"))
                }
                Ok(Some(v)) => {
                    Answer::new(ProbeOutcome::NotReady, format!("the query answered {v}"))
                }
                Ok(None) => Answer::new(ProbeOutcome::NotReady, "the query returned no rows"),
                Err(e) => Answer::new(ProbeOutcome::Failed, e.message()),
            }
        })
    }
}

/// The rows of the query in file `query` against the database named by `url_env`, for
/// `window`, cut at `timeout` and past `max_bytes` of JSON.
async fn fetch(
    url_env: &str,
    query: &std::path::Path,
    window: &Window,
    timeout: crate::domain::duration::Span,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    let (url, sql) = sql_of(url_env, query).await?;
    fetch_sql(&url, &sql, window, timeout, max_bytes, Shape::Rows).await
}

/// The first column of the first row of the query in file `query`, against the database named
/// by the variable `url_env`, with the window bound as for an sql source; `None` without rows.
/// Cut at `timeout` (on the server too, on PostgreSQL).
pub(crate) async fn first_cell(
    url_env: &str,
    query: &std::path::Path,
    window: &Window,
    timeout: crate::domain::duration::Span,
) -> Result<Option<Value>, SourceError> {
    let (url, sql) = sql_of(url_env, query).await?;
    let cells = fetch_sql(&url, &sql, window, timeout, 1 << 20, Shape::FirstCell).await?;
    Ok(match cells {
        Value::Array(mut cells) if !cells.is_empty() => Some(cells.swap_remove(0)),
        _ => None,
    })
}

/// Reads the rows of `[[family]]` tables whose rows come from a query: the query in its file,
/// against the database named by its variable, read-only, no binds, cut at its timeout, at most
/// `config::MAX_ROWS_FILE` bytes of rows as JSON. Each read runs on a thread of its own with
/// its own runtime, so configuration can be loaded from any context, async or not.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SqlRows;

impl crate::config::RowReader for SqlRows {
    fn sql_rows(
        &self,
        url_env: &str,
        query: &std::path::Path,
        timeout: crate::domain::duration::Span,
    ) -> Result<Vec<Map<String, Value>>, String> {
        let (url_env, query) = (url_env.to_string(), query.to_path_buf());
        let read = move || -> Result<Value, SourceError> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SourceError::Transient(format!("cannot start a runtime: {e}")))?;
            runtime.block_on(async {
                let (url, sql) = sql_of(&url_env, &query).await?;
                let q = Query {
                    url: &url,
                    sql: &sql,
                    binds: &[],
                    timeout,
                    max_bytes: crate::config::MAX_ROWS_FILE,
                    shape: Shape::Rows,
                };
                let read = query_within(&q);
                tokio::time::timeout(timeout.as_std(), read)
                    .await
                    .map_err(|_| {
                        SourceError::Transient(format!("the query took longer than {timeout}"))
                    })?
            })
        };
        let rows = std::thread::spawn(read)
            .join()
            .map_err(|_| "the query's thread failed".to_string())?
            .map_err(|e| e.message().to_string())?;
        match rows {
            Value::Array(rows) => Ok(rows
                .into_iter()
                .filter_map(|r| match r {
                    Value::Object(m) => Some(m),
                    _ => None,
                })
                .collect()),
            _ => Ok(Vec::new()),
        }
    }
}

/// The database URL in variable `url_env` and the query in file `query`.
async fn sql_of(url_env: &str, query: &std::path::Path) -> Result<(String, String), SourceError> {
    let url = std::env::var(url_env).map_err(|_| {
        SourceError::Permanent(format!("environment variable {url_env} is not set"))
    })?;
    let sql = tokio::fs::read_to_string(query).await.map_err(|e| {
        SourceError::Permanent(format!("cannot read query {}: {e}", query.display()))
    })?;
    Ok((url, sql))
}

/// What a query's rows become: objects of every column, or each row's first column.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    Rows,
    FirstCell,
}

async fn fetch_sql(
    url: &str,
    sql: &str,
    window: &Window,
    timeout: crate::domain::duration::Span,
    max_bytes: u64,
    shape: Shape,
) -> Result<Value, SourceError> {
    let bounds = [rfc3339(window.start), rfc3339(window.end)];
    query_within(&Query {
        url,
        sql,
        binds: &bounds,
        timeout,
        max_bytes,
        shape,
    })
    .await
}

/// One read of a source database: `sql` against the database at `url`, with `binds` bound in
/// order, cut at `timeout` and past `max_bytes` of JSON.
struct Query<'a> {
    url: &'a str,
    sql: &'a str,
    binds: &'a [String],
    timeout: crate::domain::duration::Span,
    max_bytes: u64,
    shape: Shape,
}

/// `q`'s rows, from whichever database its URL names.
async fn query_within(q: &Query<'_>) -> Result<Value, SourceError> {
    if q.url.starts_with("postgres://") || q.url.starts_with("postgresql://") {
        postgres::fetch(q).await
    } else if q.url.starts_with("sqlite:") {
        sqlite::fetch(q).await
    } else {
        Err(SourceError::Permanent(
            "the source database URL is neither postgres:// nor sqlite:".into(),
        ))
    }
}

pub(super) fn connect_err(e: sqlx::Error) -> SourceError {
    SourceError::Transient(format!("cannot connect to the source database: {e}"))
}

pub(super) fn query_err(e: sqlx::Error) -> SourceError {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Protocol(_) => {
            SourceError::Transient(format!("source query: {e}"))
        }
        // PostgreSQL 57014 query_canceled (the statement timeout cut it), SQLite 9 interrupted
        // (the deadline's progress handler did): a later try may be faster.
        sqlx::Error::Database(ref db) if matches!(db.code().as_deref(), Some("57014" | "9")) => {
            SourceError::Transient(format!("source query: {e}"))
        }
        other => SourceError::Permanent(format!("source query: {other}")),
    }
}

/// The rows of a query as a JSON array, read one at a time: past `max_bytes` of JSON the
/// query is dropped (and with it the rest of its rows) and the fetch fails.
pub(super) async fn collect_rows<R>(
    mut rows: impl futures_util::Stream<Item = Result<R, sqlx::Error>> + Unpin,
    to_json: fn(&R) -> Result<Value, SourceError>,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    use futures_util::TryStreamExt;
    let (mut out, mut bytes) = (Vec::new(), 0u64);
    while let Some(row) = rows.try_next().await.map_err(query_err)? {
        let value = to_json(&row)?;
        bytes = bytes.saturating_add(serde_json::to_vec(&value).map_or(0, |v| v.len() as u64));
        if bytes > max_bytes {
            return Err(too_large("the query's rows", max_bytes));
        }
        out.push(value);
    }
    Ok(Value::Array(out))
}

/// One result row as a JSON object, column by column: NULL is null, and `cell` reads a column
/// of a type it knows (`None`: a type the query must cast).
pub(super) fn row_json<R>(
    row: &R,
    cell: impl Fn(&R, usize, &str) -> Option<Result<Value, sqlx::Error>>,
) -> Result<Value, SourceError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
{
    let mut obj = Map::new();
    for (i, col) in row.columns().iter().enumerate() {
        obj.insert(
            col.name().to_string(),
            column_json(row, i, col.name(), &cell)?,
        );
    }
    Ok(Value::Object(obj))
}

/// The first column of a result row (null if it has none), as [`row_json`] reads it.
pub(super) fn first_json<R>(
    row: &R,
    cell: impl Fn(&R, usize, &str) -> Option<Result<Value, sqlx::Error>>,
) -> Result<Value, SourceError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
{
    match row.columns().first() {
        Some(col) => column_json(row, 0, col.name(), &cell),
        None => Ok(Value::Null),
    }
}

fn column_json<R>(
    row: &R,
    i: usize,
    name: &str,
    cell: &impl Fn(&R, usize, &str) -> Option<Result<Value, sqlx::Error>>,
) -> Result<Value, SourceError>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
{
    let raw = row
        .try_get_raw(i)
        .map_err(|e| SourceError::Permanent(e.to_string()))?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let ty = raw.type_info().name().to_string();
    cell(row, i, &ty)
        .ok_or_else(|| {
            SourceError::Permanent(format!(
                "column {name:?} has type {ty}: cast it to text or a number in the query"
            ))
        })?
        .map_err(|e| SourceError::Permanent(format!("column {name:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_truth_is_true_or_a_non_zero_number() {
        for (v, ready) in [
            (serde_json::json!(true), true),
            (serde_json::json!(1), true),
            (serde_json::json!(0.5), true),
            (serde_json::json!(false), false),
            (serde_json::json!(0), false),
            (serde_json::json!(null), false),
            (serde_json::json!("true"), false),
        ] {
            assert_eq!(truthy(&v), ready, "{v}");
        }
    }
}
