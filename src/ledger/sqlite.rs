//! The embedded ledger: one SQLite file in WAL mode with a busy timeout. Write transactions
//! begin IMMEDIATE so two writers queue on the lock instead of deadlocking on an upgrade.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::LedgerError;
use super::sql::PerBackend;

/// Locks one job's row (`$1`) for the rest of the transaction before a retention write or a
/// delivery redrive checks its state. SQLite needs none: `BEGIN IMMEDIATE` holds the only
/// write lock.
pub(super) const LOCK_JOB: Option<&str> = None;

pub(super) const BEGIN: &str = "BEGIN IMMEDIATE";

/// Runs before a lease; SQLite walks the queue index in order without being told.
pub(super) const LEASE_PLAN: Option<&str> = None;

/// This backend's text of a statement.
pub(super) fn pick(statement: PerBackend) -> &'static str {
    statement.sqlite
}

pub(super) async fn connect(url: &str, root: &Path) -> Result<SqlitePool, LedgerError> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = path.split('?').next().unwrap_or(path);
    let options = if path == ":memory:" {
        SqliteConnectOptions::from_str("sqlite::memory:").map_err(LedgerError::Db)?
    } else {
        // A relative path is relative to the project root.
        let file = if Path::new(path).is_absolute() {
            Path::new(path).to_path_buf()
        } else {
            root.join(path)
        };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| LedgerError::Open {
                url: url.to_string(),
                reason: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        SqliteConnectOptions::new().filename(file)
    };
    let options = options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(if path == ":memory:" { 1 } else { 8 })
        .connect_with(options)
        .await
        .map_err(|e| LedgerError::Open {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
    Ok(pool)
}
