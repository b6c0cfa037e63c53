//! The shared ledger for several worker processes. Claims use `FOR UPDATE SKIP LOCKED`, so
//! concurrent workers never wait on, or take, each other's rows.

use std::str::FromStr;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};

use crate::domain::redact::redact_url;
use crate::ledger::LedgerError;
use crate::ledger::PerBackend;

pub(in crate::ledger) const BEGIN: &str = "BEGIN";

/// Runs first in a rescue's transaction: an expired lease whose row another transaction still
/// holds (its node paused or stalled between two statements of an outcome write) is waited
/// for at most this long; the rescue then fails, and a later round takes it once the server
/// has ended that transaction ([`IDLE_IN_TRANSACTION`]).
pub(in crate::ledger) const RESCUE_WAIT: Option<&str> = Some("SET LOCAL lock_timeout = '2s'");

/// How long the server lets one of the ledger's sessions sit idle inside a transaction before
/// it ends the session and rolls the transaction back. A ledger transaction sends its
/// statements back to back; one idle this long belongs to a paused or stalled node, and its
/// row locks would otherwise hold up every other node's rescue of its leases. A URL that sets
/// `idle_in_transaction_session_timeout` itself keeps its own.
const IDLE_IN_TRANSACTION: &str = "10s";

/// Runs before a lease, in its transaction. Leases walk the queue index (state, ready_at, key)
/// in order and stop at their limit. Right after a burst of new work the statistics are stale
/// (autovacuum has not analysed yet), PostgreSQL believes the queue holds a handful of rows,
/// and it sorted the whole queue on every lease instead; with sorting off it always walks the
/// index. (SQLite walks the queue index in order without being told.)
pub(in crate::ledger) const LEASE_PLAN: &str = "SET LOCAL enable_sort = off";

/// A list of job keys as one bind: a text array (`= ANY($n)`).
pub(in crate::ledger) fn key_list(keys: &[&crate::domain::keys::JobKey]) -> Vec<String> {
    keys.iter().map(|k| k.to_string()).collect()
}

/// This backend's text of a statement.
pub(in crate::ledger) fn pick(statement: PerBackend) -> &'static str {
    statement.postgres
}

/// Connects, optionally inside `schema` (created if missing). What the schema must be is
/// [`crate::ledger::schema`]'s.
pub(in crate::ledger) async fn connect(
    url: &str,
    schema: Option<&str>,
    max_connections: u32,
) -> Result<PgPool, LedgerError> {
    let open_err = |e: sqlx::Error| LedgerError::Open {
        url: redact_url(url),
        reason: e.to_string(),
    };
    let mut options = PgConnectOptions::from_str(url).map_err(open_err)?;
    if plain_on_loopback(url, options.get_host()) {
        options = options.ssl_mode(PgSslMode::Disable);
    }
    if !url.contains("idle_in_transaction_session_timeout") {
        options = options.options([("idle_in_transaction_session_timeout", IDLE_IN_TRANSACTION)]);
    }
    if let Some(schema) = schema {
        if !schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(LedgerError::Open {
                url: redact_url(url),
                reason: format!("invalid schema name {schema:?}"),
            });
        }
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(open_err)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}"
        )))
        .execute(&admin)
        .await?;
        admin.close().await;
        options = options.options([("search_path", schema)]);
    }
    let pool = match PgPoolOptions::new()
        .max_connections(max_connections.max(2))
        .before_acquire(|conn, _| {
            Box::pin(async move { Ok(crate::ledger::out_of_transaction(conn)) })
        })
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.clone())
        .await
    {
        Ok(pool) => pool,
        Err(e) => {
            return Err(LedgerError::Open {
                url: redact_url(url),
                reason: why_not(&options, e).await,
            });
        }
    };
    Ok(pool)
}

/// The write check of `/readyz`, in one transaction: an update (of no row) that a read-only
/// server, a standby or a role without write grants refuses, and a transaction id, whose commit
/// record must be written and flushed to the WAL.
pub(in crate::ledger) async fn check_writable(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE jobs SET updated_at = updated_at WHERE false")
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Why the pool could not open, in words. sqlx retries a refused connection until its acquire
/// timeout and then says only "pool timed out while waiting for an open connection", dropping
/// the server's reason (every slot taken, a bad password, no such database) and a closed port
/// alike: one direct connection, bounded, finds out which.
async fn why_not(options: &PgConnectOptions, e: sqlx::Error) -> String {
    use sqlx::Connection;
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return words(&e);
    }
    let direct = sqlx::PgConnection::connect_with(options);
    match tokio::time::timeout(Duration::from_secs(5), direct).await {
        Ok(Err(e)) => words(&e),
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            "no connection of the pool could be opened within 10 s, though one opens now: the server is overloaded or its connection slots come and go".to_string()
        }
        Err(_) => format!(
            "the server at {}:{} does not answer within 5 s",
            options.get_host(),
            options.get_port()
        ),
    }
}

/// A connection error as a person reads it: the server's own words and SQLSTATE, and what to
/// check.
fn words(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default().to_string();
            let check = match code.as_str() {
                "53300" => "; every connection slot is taken: check the server's max_connections (or the role's CONNECTION LIMIT) and what holds them (pg_stat_activity), or lower database.max_connections",
                "28P01" | "28000" => "; check the user and password in the URL",
                "3D000" => "; create the database, or fix its name in the URL",
                "57P03" => "; the server is starting up or shutting down: retry shortly",
                _ => "",
            };
            format!(
                "the server refused the connection: {} (SQLSTATE {code}){check}",
                db.message()
            )
        }
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "nothing listens there (connection refused): is PostgreSQL running, on that host and port?".to_string()
        }
        other => crate::domain::words::error_chain(other),
    }
}

/// Whether to skip TLS: a loopback server and no `sslmode` asked for (in the URL or
/// `PGSSLMODE`). libpq's default, `prefer`, would negotiate TLS that protects nothing on
/// loopback and costs ~100 ms of handshake and certificate loading per connection, which every
/// command pays. `sslmode=require` (or any mode) in the URL keeps TLS.
fn plain_on_loopback(url: &str, host: &str) -> bool {
    let asked = url.contains("sslmode=") || std::env::var_os("PGSSLMODE").is_some();
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !asked && loopback
}

/// Drops a schema made by [`connect`]; for tests that clean up after themselves.
pub(in crate::ledger) async fn drop_schema(pool: &PgPool, schema: &str) -> Result<(), LedgerError> {
    if schema
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE"
        )))
        .execute(pool)
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::plain_on_loopback;

    #[test]
    fn tls_is_skipped_only_on_loopback_when_no_mode_is_asked() {
        assert!(plain_on_loopback("postgres://u@127.0.0.1/db", "127.0.0.1"));
        assert!(plain_on_loopback("postgres://u@localhost/db", "localhost"));
        assert!(plain_on_loopback("postgres://u@[::1]/db", "::1"));
        assert!(!plain_on_loopback(
            "postgres://u@127.0.0.1/db?sslmode=require",
            "127.0.0.1"
        ));
        assert!(!plain_on_loopback(
            "postgres://u@db.internal/db",
            "db.internal"
        ));
        assert!(!plain_on_loopback("postgres://u@10.0.0.5/db", "10.0.0.5"));
    }
}
