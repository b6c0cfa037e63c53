//! PostgreSQL as a source database: a read-only transaction whose `statement_timeout` cuts the
//! query on the server too.

use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;
use sqlx::Row;

use super::{Query, Shape, collect_rows, connect_err, first_json, query_err, row_json};
use crate::report::source::SourceError;

/// A read-only transaction whose statement timeout stops the query on the server too, not
/// only this side's wait for it.
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
