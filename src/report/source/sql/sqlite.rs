//! SQLite as a source database: a read-only connection whose statement is interrupted at the
//! deadline.

use std::str::FromStr;

use serde_json::Value;
use sqlx::Row;

use super::{Query, Shape, collect_rows, connect_err, first_json, row_json};
use crate::report::source::SourceError;

/// A read-only connection. SQLite has no statement timeout: the statement is interrupted at
/// the deadline, or its thread would run on after the fetch was cut.
pub(super) async fn fetch(q: &Query<'_>) -> Result<Value, SourceError> {
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
