//! Sources: where a report's data comes from. Each fetch returns the JSON the template sees as
//! `data`, or a failure that says whether trying again can help.
//!
//! - `file`: a JSON file. Missing is transient (it may not be written yet); invalid is permanent.
//! - `http`: a GET with `{{window.start}}` / `{{window.end}}` in the URL. 5xx, 408, 429 and
//!   timeouts are transient; other 4xx and invalid JSON are permanent.
//! - `sql`: a read-only query against the database named by `url_env` (SQLite or PostgreSQL),
//!   with the window bound as `$1` (start) and `$2` (end), RFC 3339 text. Rows become an array
//!   of objects; integers, reals, text, booleans and NULL map to JSON (cast other types in SQL).

use std::str::FromStr;
use std::time::Duration;

use serde_json::{Map, Value};
use sqlx::{Column, Row, TypeInfo, ValueRef};

use crate::config::{DEFAULT_SOURCE_LIMIT, SourceSpec};
use crate::domain::redact::http_error;
use crate::domain::window::{Window, rfc3339};

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
        SourceSpec::File { path } => read_file(path.clone(), max_bytes).await,
        SourceSpec::Http { url, .. } => fetch_http(url, window, limit, http, max_bytes).await,
        SourceSpec::Sql { url_env, query, .. } => {
            let (url, sql) = sql_of(url_env, query).await?;
            fetch_sql(&url, &sql, window, limit, max_bytes, Shape::Rows).await
        }
    }
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
enum Shape {
    Rows,
    FirstCell,
}

/// A file source's data, read on one blocking thread.
async fn read_file(path: std::path::PathBuf, max_bytes: u64) -> Result<Value, SourceError> {
    let read = tokio::task::spawn_blocking(move || read_json_file(&path, max_bytes));
    read.await
        .map_err(|e| SourceError::Transient(format!("reading the file stopped: {e}")))?
}

/// A file source's data, read here (the caller is on a blocking thread) and at most
/// `max_bytes` of it: a file that grows past the limit while it is read fails like a larger one.
pub(crate) fn read_json_file(path: &std::path::Path, max_bytes: u64) -> Result<Value, SourceError> {
    use std::io::Read;
    let cannot =
        |e: std::io::Error| SourceError::Transient(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let announced = file.metadata().map(|m| m.len()).unwrap_or(0);
    if announced > max_bytes {
        return Err(too_large(&path.display().to_string(), max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(&path.display().to_string(), max_bytes));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| SourceError::Permanent(format!("{} is not valid JSON: {e}", path.display())))
}

/// More data than `source.limit` allows.
fn too_large(what: &str, max_bytes: u64) -> SourceError {
    SourceError::Permanent(format!(
        "{what}: more than {max_bytes} bytes (source.limit): raise the limit or narrow the source"
    ))
}

/// The source URL for a window.
pub(crate) fn http_url(template: &str, window: &Window) -> String {
    let enc = |t| url::form_urlencoded::byte_serialize(rfc3339(t).as_bytes()).collect::<String>();
    template
        .replace("{{window.start}}", &enc(window.start))
        .replace("{{window.end}}", &enc(window.end))
}

async fn fetch_http(
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
        fetch_postgres(q).await
    } else if q.url.starts_with("sqlite:") {
        fetch_sqlite(q).await
    } else {
        Err(SourceError::Permanent(
            "the source database URL is neither postgres:// nor sqlite:".into(),
        ))
    }
}

fn connect_err(e: sqlx::Error) -> SourceError {
    SourceError::Transient(format!("cannot connect to the source database: {e}"))
}

fn query_err(e: sqlx::Error) -> SourceError {
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

/// A read-only transaction whose statement timeout stops the query on the server too, not
/// only this side's wait for it.
async fn fetch_postgres(q: &Query<'_>) -> Result<Value, SourceError> {
    use sqlx::Connection;
    let Query {
        url,
        sql,
        binds,
        timeout,
        max_bytes,
        shape,
    } = *q;
    let opts = sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| SourceError::Permanent(e.to_string()))?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(30),
        sqlx::PgConnection::connect_with(&opts),
    )
    .await
    .map_err(|_| SourceError::Transient("connecting to the source database timed out".into()))?
    .map_err(connect_err)?;
    let mut tx = conn.begin().await.map_err(connect_err)?;
    sqlx::query("SET TRANSACTION READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(query_err)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SET LOCAL statement_timeout = {}",
        timeout.as_std().as_millis().max(1)
    )))
    .execute(&mut *tx)
    .await
    .map_err(query_err)?;
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
    for b in binds {
        query = query.bind(b);
    }
    let rows = query.fetch(&mut *tx);
    let to_json = match shape {
        Shape::Rows => pg_row,
        Shape::FirstCell => pg_first,
    };
    let out = collect_rows(rows, to_json, max_bytes).await?;
    tx.rollback().await.map_err(connect_err)?;
    Ok(out)
}

/// A read-only connection. SQLite has no statement timeout: the statement is interrupted at
/// the deadline, or its thread would run on after the fetch was cut.
async fn fetch_sqlite(q: &Query<'_>) -> Result<Value, SourceError> {
    use sqlx::Connection;
    let Query {
        url,
        sql,
        binds,
        timeout,
        max_bytes,
        shape,
    } = *q;
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| SourceError::Permanent(e.to_string()))?
        .read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts)
        .await
        .map_err(connect_err)?;
    let deadline = std::time::Instant::now().checked_add(timeout.as_std());
    conn.lock_handle()
        .await
        .map_err(connect_err)?
        .set_progress_handler(10_000, move || {
            deadline.is_none_or(|d| std::time::Instant::now() < d)
        });
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
    for b in binds {
        query = query.bind(b);
    }
    let rows = query.fetch(&mut conn);
    let to_json = match shape {
        Shape::Rows => sqlite_row,
        Shape::FirstCell => sqlite_first,
    };
    let out = collect_rows(rows, to_json, max_bytes).await;
    let _ = conn.close().await;
    out
}

/// The rows of a query as a JSON array, read one at a time: past `max_bytes` of JSON the
/// query is dropped (and with it the rest of its rows) and the fetch fails.
async fn collect_rows<R>(
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

fn pg_row(row: &sqlx::postgres::PgRow) -> Result<Value, SourceError> {
    row_json(row, pg_cell)
}

fn pg_first(row: &sqlx::postgres::PgRow) -> Result<Value, SourceError> {
    first_json(row, pg_cell)
}

fn pg_cell(row: &sqlx::postgres::PgRow, i: usize, ty: &str) -> Option<Result<Value, sqlx::Error>> {
    Some(match ty {
        "INT2" => row.try_get::<i16, _>(i).map(Value::from),
        "INT4" => row.try_get::<i32, _>(i).map(Value::from),
        "INT8" => row.try_get::<i64, _>(i).map(Value::from),
        "FLOAT4" => row.try_get::<f32, _>(i).map(|f| Value::from(f64::from(f))),
        "FLOAT8" => row.try_get::<f64, _>(i).map(Value::from),
        "BOOL" => row.try_get::<bool, _>(i).map(Value::from),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => row.try_get::<String, _>(i).map(Value::from),
        "JSON" | "JSONB" => row.try_get::<serde_json::Value, _>(i),
        _ => return None,
    })
}

fn sqlite_row(row: &sqlx::sqlite::SqliteRow) -> Result<Value, SourceError> {
    row_json(row, sqlite_cell)
}

fn sqlite_first(row: &sqlx::sqlite::SqliteRow) -> Result<Value, SourceError> {
    first_json(row, sqlite_cell)
}

fn sqlite_cell(
    row: &sqlx::sqlite::SqliteRow,
    i: usize,
    ty: &str,
) -> Option<Result<Value, sqlx::Error>> {
    Some(match ty {
        "INTEGER" => row.try_get::<i64, _>(i).map(Value::from),
        "REAL" => row.try_get::<f64, _>(i).map(Value::from),
        "BOOLEAN" => row.try_get::<bool, _>(i).map(Value::from),
        "TEXT" => row.try_get::<String, _>(i).map(Value::from),
        _ => return None,
    })
}

/// One result row as a JSON object, column by column: NULL is null, and `cell` reads a column
/// of a type it knows (`None`: a type the query must cast).
fn row_json<R>(
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
fn first_json<R>(
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
