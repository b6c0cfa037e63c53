//! The shared ledger for several worker processes. Claims use `FOR UPDATE SKIP LOCKED`, so
//! concurrent workers never wait on, or take, each other's rows.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::{PgPool, Postgres};

use crate::domain::redact::redact_url;
use crate::ledger::LedgerError;
use crate::ledger::PerBackend;

pub(in crate::ledger) const BEGIN: &str = "BEGIN";

/// A transaction on a connection [`acquire`] found (`Pool::begin_with` without sqlx's own wait
/// for the connection): every ledger transaction's start, and `d::begin` of a statement group
/// written once for both backends.
pub(in crate::ledger) async fn begin(
    ledger: &crate::ledger::Ledger,
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, Postgres>, LedgerError> {
    let conn = ledger.pg_connection(pool).await?;
    let begin = sqlx::SqlSafeStr::into_sql_str(BEGIN);
    Ok(sqlx::Transaction::begin(conn, Some(begin)).await?)
}

/// Runs first in a rescue's transaction: an expired lease whose row another transaction still
/// holds (its node paused or stalled between two statements of an outcome write) is waited
/// for at most this long; the rescue then fails, and a later round takes it once the server
/// has ended that transaction ([`IDLE_IN_TRANSACTION`]).
pub(in crate::ledger) const RESCUE_WAIT: Option<&str> = Some("SET LOCAL lock_timeout = '2s'");

/// Whether a transaction must lock the rows it reads before it writes what depends on them:
/// on PostgreSQL, where another transaction may change a row between two statements.
pub(in crate::ledger) const ROW_LOCKS: bool = true;

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
        .acquire_timeout(ACQUIRE_TIMEOUT)
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

/// How long the pool waits for a connection before a statement fails.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one of [`acquire`]'s asks of the pool may take. An ask that finds no idle
/// connection sets out to open one, and sqlx keeps it trying (and holding a place in the pool)
/// until it opens or the ask times out — while the server refuses every new connection, that
/// is the whole wait, and the connections this node does have serve only the few statements
/// not stuck so. Short asks give those places back.
const ACQUIRE_ASK: Duration = Duration::from_secs(2);

/// While the server refuses new connections, how often [`acquire`] looks for a connection of
/// this node's own come free, and how often one direct connection checks whether the server
/// takes them again.
const FREE_POLL: Duration = Duration::from_millis(10);
const REFUSAL_RECHECK: Duration = Duration::from_secs(1);

/// A connection for a statement within [`ACQUIRE_TIMEOUT`], else why there is none. While the
/// server refuses new connections (every slot taken: SQLSTATE 53300), a statement waits for one
/// of the connections this node already has and opens none itself: one direct connection a
/// second finds out when the server takes them again, and then the pool opens them as before.
pub(in crate::ledger) async fn acquire(
    pool: &PgPool,
    starvation: &Starvation,
) -> Result<PoolConnection<Postgres>, LedgerError> {
    let deadline = Instant::now() + ACQUIRE_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LedgerError::Starved {
                reason: starvation.reason(pool).await,
            });
        }
        if starvation.refusing() {
            if let Some(conn) = pool.try_acquire() {
                return Ok(conn);
            }
            tokio::time::sleep(FREE_POLL.min(left)).await;
            starvation.recheck(pool, REFUSAL_RECHECK).await;
            continue;
        }
        match tokio::time::timeout(ACQUIRE_ASK.min(left), pool.acquire()).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(sqlx::Error::PoolTimedOut)) | Err(_) => {
                starvation.recheck(pool, REFUSAL_RECHECK).await;
            }
            Ok(Err(e)) => return Err(LedgerError::Db(e)),
        }
    }
}

/// What the last direct connection found when the pool had none to give: whether the server
/// refuses new connections and why, and when. Shared by a ledger's clones.
#[derive(Debug, Clone, Default)]
pub(in crate::ledger) struct Starvation(Arc<Checks>);

#[derive(Debug, Default)]
struct Checks {
    /// The last finding's `refused`, read by every statement without a lock.
    refusing: AtomicBool,
    last: tokio::sync::Mutex<Option<Finding>>,
}

#[derive(Debug)]
struct Finding {
    at: Instant,
    refused: bool,
    why: String,
    logged: Instant,
}

/// How often a finding that lasts is logged again.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(30);

impl Starvation {
    /// Whether the last check found the server refusing new connections.
    fn refusing(&self) -> bool {
        self.0.refusing.load(Ordering::Relaxed)
    }

    /// Why the pool had no connection to give, from the last check (made now if none was).
    pub(in crate::ledger) async fn reason(&self, pool: &PgPool) -> String {
        self.recheck(pool, REFUSAL_RECHECK).await;
        let last = self.0.last.lock().await;
        last.as_ref().map_or_else(String::new, |f| f.why.clone())
    }

    /// One direct connection, unless one was made within `fresh` (however many statements ask
    /// together, one checks). A refusal is logged when it begins, every
    /// [`REFUSAL_LOG_EVERY`] while it lasts, and its end once.
    async fn recheck(&self, pool: &PgPool, fresh: Duration) {
        let mut last = self.0.last.lock().await;
        if last
            .as_ref()
            .is_some_and(|f| f.at.elapsed() < fresh.max(FREE_POLL))
        {
            return;
        }
        let (refused, why) = match direct(&pool.connect_options()).await {
            Err(refused) => (true, refused),
            Ok(()) if pool.size() >= pool.options().get_max_connections() => (
                false,
                format!(
                    "all {} of this node's ledger connections were in use, and the server takes new ones: look for slow statements (pg_stat_activity), or raise database.max_connections",
                    pool.size()
                ),
            ),
            Ok(()) => (
                false,
                "the server refused new connections until now, and takes them again".to_string(),
            ),
        };
        let now = Instant::now();
        let was = last.take();
        let was_refused = was.as_ref().is_some_and(|f| f.refused);
        let logged = match was {
            Some(f)
                if f.refused == refused
                    && f.why == why
                    && f.logged.elapsed() < REFUSAL_LOG_EVERY =>
            {
                f.logged
            }
            _ => {
                if refused {
                    tracing::warn!(reason = %why, "the ledger's server refuses new connections: statements wait for one of this node's own");
                } else if was_refused {
                    tracing::info!("the ledger's server takes new connections again");
                } else {
                    tracing::warn!(reason = %why, "the ledger's pool had no connection free within 2 s");
                }
                now
            }
        };
        self.0.refusing.store(refused, Ordering::Relaxed);
        *last = Some(Finding {
            at: now,
            refused,
            why,
            logged,
        });
    }
}

/// One direct connection, bounded: `Ok` when the server takes it (it is closed at once), else
/// why not, in words.
async fn direct(options: &PgConnectOptions) -> Result<(), String> {
    use sqlx::Connection;
    let direct = sqlx::PgConnection::connect_with(options);
    match tokio::time::timeout(Duration::from_secs(5), direct).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(words(&e)),
        Err(_) => Err(format!(
            "the server at {}:{} does not answer within 5 s",
            options.get_host(),
            options.get_port()
        )),
    }
}

/// Why the pool could not open, in words. sqlx retries a refused connection until its acquire
/// timeout and then says only "pool timed out while waiting for an open connection", dropping
/// the server's reason (every slot taken, a bad password, no such database) and a closed port
/// alike: one direct connection, bounded, finds out which.
async fn why_not(options: &PgConnectOptions, e: sqlx::Error) -> String {
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return words(&e);
    }
    match direct(options).await {
        Err(refused) => refused,
        Ok(()) => "no connection of the pool could be opened within 10 s, though one opens now: the server is overloaded or its connection slots come and go".to_string(),
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
