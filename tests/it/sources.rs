//! Sources against real peers: an HTTP server on 127.0.0.1, SQLite files and PostgreSQL.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Path as AxPath, Query};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use common::at;
use dawnpost::Span;
use dawnpost::config::SourceSpec;
use dawnpost::domain::window::Window;
use dawnpost::report::source::{FileSource, HttpSource, SourceError, SqlSource, fetch};
use serde_json::json;

fn window() -> Window {
    Window {
        start: at(2026, 10, 24, 22, 0),
        end: at(2026, 10, 25, 23, 0),
    }
}

async fn serve() -> std::net::SocketAddr {
    async fn handler(
        AxPath(kind): AxPath<String>,
        Query(q): Query<HashMap<String, String>>,
    ) -> axum::response::Response {
        match kind.as_str() {
            "data" => axum::Json(json!({"from": q.get("from"), "to": q.get("to"), "rows": [1, 2]}))
                .into_response(),
            "down" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            "missing" => StatusCode::NOT_FOUND.into_response(),
            "garbage" => "this is not json".into_response(),
            _ => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "{}".into_response()
            }
        }
    }
    let app = axum::Router::new().route("/{kind}", axum::routing::get(handler));
    crate::common::peers::serve(app).await
}

fn http(addr: std::net::SocketAddr, kind: &str) -> SourceSpec {
    SourceSpec::new(HttpSource {
        url: format!("http://{addr}/{kind}?from={{{{window.start}}}}&to={{{{window.end}}}}"),
        timeout: "1s".parse::<Span>().expect("span"),
    })
}

#[tokio::test]
async fn http_source_binds_the_window_and_classifies_failures() {
    let addr = serve().await;
    let client = reqwest::Client::new();
    let data = fetch(&http(addr, "data"), &window(), &client)
        .await
        .expect("data");
    assert_eq!(data["from"], "2026-10-24T22:00:00Z");
    assert_eq!(data["to"], "2026-10-25T23:00:00Z");
    assert_eq!(data["rows"], json!([1, 2]));
    assert!(
        matches!(fetch(&http(addr, "down"), &window(), &client).await, Err(SourceError::Transient(m)) if m.contains("503"))
    );
    assert!(
        matches!(fetch(&http(addr, "missing"), &window(), &client).await, Err(SourceError::Permanent(m)) if m.contains("404"))
    );
    assert!(
        matches!(fetch(&http(addr, "garbage"), &window(), &client).await, Err(SourceError::Permanent(m)) if m.contains("invalid JSON"))
    );
    assert!(
        matches!(fetch(&http(addr, "slow"), &window(), &client).await, Err(SourceError::Transient(m)) if m.contains("timed out"))
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    assert!(matches!(
        fetch(&http(closed, "data"), &window(), &client).await,
        Err(SourceError::Transient(_))
    ));
}

#[tokio::test]
async fn file_source_missing_is_transient_and_invalid_is_permanent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = reqwest::Client::new();
    let path = dir.path().join("data.json");
    let spec = SourceSpec::new(FileSource { path: path.clone() });
    assert!(matches!(
        fetch(&spec, &window(), &client).await,
        Err(SourceError::Transient(_))
    ));
    std::fs::write(&path, "{ nope").expect("write");
    assert!(matches!(
        fetch(&spec, &window(), &client).await,
        Err(SourceError::Permanent(_))
    ));
    std::fs::write(&path, r#"{"rows": []}"#).expect("write");
    assert_eq!(
        fetch(&spec, &window(), &client).await.expect("data"),
        json!({"rows": []})
    );
}

#[tokio::test]
async fn sql_source_on_sqlite_reads_the_window_as_objects() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("ops.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect");
    sqlx::query("CREATE TABLE shipments (id INTEGER, shipped_at TEXT, carrier TEXT, kg REAL, late BOOLEAN, note TEXT)")
        .execute(&mut conn)
        .await
        .expect("create");
    for (id, at, carrier, kg, late) in [
        (1, "2026-10-24T21:59:59Z", "DHL", 1.5, false),
        (2, "2026-10-24T22:00:00Z", "DHL", 2.5, true),
        (3, "2026-10-25T12:00:00Z", "UPS", 3.0, false),
        (4, "2026-10-25T23:00:00Z", "UPS", 4.0, false),
    ] {
        sqlx::query("INSERT INTO shipments VALUES ($1, $2, $3, $4, $5, NULL)")
            .bind(id)
            .bind(at)
            .bind(carrier)
            .bind(kg)
            .bind(late)
            .execute(&mut conn)
            .await
            .expect("insert");
    }
    conn.close().await.expect("close");
    let query = dir.path().join("q.sql");
    std::fs::write(
        &query,
        "SELECT id, carrier, kg, late, note FROM shipments WHERE shipped_at >= $1 AND shipped_at < $2 ORDER BY id",
    )
    .expect("write");
    let env = "DAWNPOST_TEST_SQLITE_SOURCE_URL";
    // SAFETY: set once, read by this test only.
    unsafe { std::env::set_var(env, format!("sqlite://{}", db.display())) };
    let spec = SourceSpec::new(SqlSource {
        url_env: env.into(),
        query: query.clone(),
        timeout: Span::from_secs(30),
    });
    let data = fetch(&spec, &window(), &reqwest::Client::new())
        .await
        .expect("rows");
    assert_eq!(
        data,
        json!([
            {"id": 2, "carrier": "DHL", "kg": 2.5, "late": 1, "note": null},
            {"id": 3, "carrier": "UPS", "kg": 3.0, "late": 0, "note": null}
        ])
    );
    // Read-only: a query that writes fails, and permanently.
    std::fs::write(&query, "DELETE FROM shipments RETURNING id").expect("write");
    assert!(matches!(
        fetch(&spec, &window(), &reqwest::Client::new()).await,
        Err(SourceError::Permanent(_))
    ));
    let unset = SourceSpec::new(SqlSource {
        url_env: "DAWNPOST_TEST_SURELY_UNSET".into(),
        query: query.clone(),
        timeout: Span::from_secs(30),
    });
    assert!(
        matches!(fetch(&unset, &window(), &reqwest::Client::new()).await, Err(SourceError::Permanent(m)) if m.contains("DAWNPOST_TEST_SURELY_UNSET"))
    );
    // A query that would run for minutes is cut at the source's timeout: a transient failure
    // that the retry policy handles, not a worker held forever.
    std::fs::write(
        &query,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000000) SELECT MAX(i) AS m FROM n WHERE $1 < $2",
    )
    .expect("write");
    let slow = SourceSpec::new(SqlSource {
        url_env: env.into(),
        query,
        timeout: Span::from_millis(300),
    });
    let started = std::time::Instant::now();
    let cut = fetch(&slow, &window(), &reqwest::Client::new()).await;
    // SQLite has no statement timeout: the deadline interrupts the statement itself, so no
    // thread runs on after the fetch was cut.
    assert!(
        matches!(&cut, Err(SourceError::Transient(m)) if m.contains("interrupted")),
        "{cut:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn sql_source_on_postgres_binds_the_window() {
    let Ok(url) = std::env::var(common::POSTGRES_ENV) else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
    let table = format!("dp_src_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {table} (id INT4, shipped_at TIMESTAMPTZ, carrier TEXT, kg FLOAT8, late BOOL, meta JSONB)"
    )))
    .execute(&mut conn)
    .await
    .expect("create");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} VALUES
           (1, '2026-10-24T21:59:59Z', 'DHL', 1.5, false, NULL),
           (2, '2026-10-24T22:00:00Z', 'DHL', 2.5, true, '{{\"dock\": 4}}'),
           (3, '2026-10-25T23:00:00Z', 'UPS', 4.0, false, NULL)"
    )))
    .execute(&mut conn)
    .await
    .expect("insert");
    let dir = tempfile::tempdir().expect("tempdir");
    let query = dir.path().join("q.sql");
    std::fs::write(
        &query,
        format!(
            "SELECT id, carrier, kg, late, meta, shipped_at::text AS shipped_at FROM {table}
             WHERE shipped_at >= $1::timestamptz AND shipped_at < $2::timestamptz ORDER BY id"
        ),
    )
    .expect("write");
    let env = "DAWNPOST_TEST_PG_SOURCE_URL";
    // SAFETY: set once, read by this test only.
    unsafe { std::env::set_var(env, &url) };
    let spec = SourceSpec::new(SqlSource {
        url_env: env.into(),
        query: query.clone(),
        timeout: Span::from_secs(30),
    });
    let result = fetch(&spec, &window(), &reqwest::Client::new()).await;
    std::fs::write(&query, format!("DELETE FROM {table} RETURNING id")).expect("write");
    let write_attempt = fetch(&spec, &window(), &reqwest::Client::new()).await;
    // The server's statement timeout cuts a hung query: transient, so the policy retries it.
    std::fs::write(&query, "SELECT pg_sleep(30) AS s WHERE $1::text < $2::text").expect("write");
    let slow = SourceSpec::new(SqlSource {
        url_env: env.into(),
        query: query.clone(),
        timeout: Span::from_millis(300),
    });
    let started = std::time::Instant::now();
    let cut = fetch(&slow, &window(), &reqwest::Client::new()).await;
    let cut_after = started.elapsed();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&mut conn)
        .await
        .expect("drop");
    let data = result.expect("rows");
    assert_eq!(data.as_array().map(Vec::len), Some(1));
    assert_eq!(data[0]["id"], 2);
    assert_eq!(data[0]["carrier"], "DHL");
    assert_eq!(data[0]["kg"], 2.5);
    assert_eq!(data[0]["late"], true);
    assert_eq!(data[0]["meta"], json!({"dock": 4}));
    assert!(
        data[0]["shipped_at"]
            .as_str()
            .is_some_and(|s| s.starts_with("2026-10-24 22:00:00"))
    );
    assert!(
        matches!(write_attempt, Err(SourceError::Permanent(m)) if m.contains("read-only")),
        "a read-only transaction"
    );
    assert!(
        matches!(&cut, Err(SourceError::Transient(m)) if m.contains("statement timeout")),
        "{cut:?}"
    );
    assert!(
        cut_after < std::time::Duration::from_secs(10),
        "{cut_after:?}"
    );
}

/// Every source stops reading at its limit: more data is a permanent failure that names the
/// limit, whether the body is announced (Content-Length), streamed, a file, or query rows.
#[tokio::test]
async fn every_source_kind_stops_at_its_limit() {
    use dawnpost::report::source::fetch_within;
    use sqlx::Connection;
    let over = |r: &Result<serde_json::Value, SourceError>| matches!(r, Err(SourceError::Permanent(m)) if m.contains("source.limit"));
    let client = reqwest::Client::new();
    let deadline = Duration::from_secs(5);
    // HTTP: the `data` body is about 80 bytes.
    let addr = serve().await;
    let spec = http(addr, "data");
    assert!(
        fetch_within(&spec, &window(), &client, deadline, 1 << 20)
            .await
            .is_ok()
    );
    let small = fetch_within(&spec, &window(), &client, deadline, 16).await;
    assert!(over(&small), "{small:?}");
    // A file.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.json");
    std::fs::write(&path, format!("[{}1]", "1,".repeat(1000))).expect("write");
    let file = SourceSpec::new(FileSource { path });
    assert!(
        fetch_within(&file, &window(), &client, deadline, 1 << 20)
            .await
            .is_ok()
    );
    let small = fetch_within(&file, &window(), &client, deadline, 100).await;
    assert!(over(&small), "{small:?}");
    // A file whose size says nothing (a pipe): the read itself stops past the limit.
    let fifo = dir.path().join("stream.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new().write(true).open(&fifo)?;
            w.write_all(format!("[{}1]", "1,".repeat(100_000)).as_bytes())
        })
    };
    let piped = SourceSpec::new(FileSource { path: fifo });
    let streamed = fetch_within(&piped, &window(), &client, deadline, 100).await;
    assert!(over(&streamed), "{streamed:?}");
    assert!(
        writer.join().is_ok_and(|w| w.is_err()),
        "the rest is never read"
    );
    // Query rows, counted as the JSON they become.
    let db = dir.path().join("rows.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", db.display()))
        .await
        .expect("connect");
    sqlx::query("CREATE TABLE t (n INTEGER)")
        .execute(&mut conn)
        .await
        .expect("create");
    sqlx::query("INSERT INTO t WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000) SELECT i FROM c")
        .execute(&mut conn)
        .await
        .expect("insert");
    conn.close().await.expect("close");
    let query = dir.path().join("q.sql");
    std::fs::write(&query, "SELECT n FROM t WHERE $1 < $2").expect("write");
    let env = "DAWNPOST_TEST_SQLITE_LIMIT_URL";
    // SAFETY: set once, read by this test only.
    unsafe { std::env::set_var(env, format!("sqlite://{}", db.display())) };
    let sql = SourceSpec::new(SqlSource {
        url_env: env.into(),
        query,
        timeout: Span::from_secs(30),
    });
    assert!(
        fetch_within(&sql, &window(), &client, deadline, 1 << 20)
            .await
            .is_ok()
    );
    let small = fetch_within(&sql, &window(), &client, deadline, 1000).await;
    assert!(over(&small), "{small:?}");
}
