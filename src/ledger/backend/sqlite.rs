//! The embedded ledger: one SQLite file in WAL mode with a busy timeout. Write transactions
//! begin IMMEDIATE so two writers queue on the lock instead of deadlocking on an upgrade.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::ledger::LedgerError;
use crate::ledger::PerBackend;

pub(in crate::ledger) const BEGIN: &str = "BEGIN IMMEDIATE";

/// A transaction, as SQLite's writers take one (its write lock at once): every ledger
/// transaction's start, and `d::begin` of a statement group written once for both backends.
pub(in crate::ledger) async fn begin(
    _: &crate::ledger::Ledger,
    pool: &SqlitePool,
) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, LedgerError> {
    Ok(pool.begin_with(BEGIN).await?)
}

/// Runs first in a rescue's transaction; SQLite's writers queue on its one lock instead.
pub(in crate::ledger) const RESCUE_WAIT: Option<&str> = None;

/// Whether a transaction must lock the rows it reads before it writes what depends on them:
/// not on SQLite, whose writing transaction holds the whole database.
pub(in crate::ledger) const ROW_LOCKS: bool = false;

/// A list of job keys as one bind: a JSON array (`json_each($n)`).
pub(in crate::ledger) fn key_list(keys: &[&crate::domain::keys::JobKey]) -> String {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into())
}

/// This backend's text of a statement.
pub(in crate::ledger) fn pick(statement: PerBackend) -> &'static str {
    statement.sqlite
}

/// How long a statement waits for another connection's write lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections to a ledger file. SQLite lets one connection write at a time, so more of them
/// buy only reads beside the writes (the console's, a command's). Each keeps a page cache and
/// prepared statements of its own (~20 KB each on average, the group commit's multi-row ones
/// the largest), so each costs memory: at 8, the daemon draining 10,000 jobs peaked ~15 MB
/// higher and drained no faster (`cargo bench --bench scale`, `cargo bench --bench pipeline`).
const CONNECTIONS: u32 = 4;

/// Replaces SQLite's default busy handler (which sleeps 1, 2, 5, 10… ms between tries) with
/// short naps: the write lock is held for one statement or one batch, well under a
/// millisecond, by this process's other connections, and a statement that slept past its
/// release left the pool's slots idle (~40% of statements slept at least 1 ms under load).
async fn short_busy_waits(conn: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    // SAFETY: the handle is locked out from sqlx's worker thread for this call, and
    // `busy_nap` is a plain function that touches no Rust state and cannot unwind.
    let rc =
        unsafe { libsqlite3_sys::sqlite3_busy_handler(db, Some(busy_nap), std::ptr::null_mut()) };
    if rc == libsqlite3_sys::SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "cannot set the SQLite busy handler (code {rc})"
        )))
    }
}

/// The nap before busy try `count` (from 0), or `None` once the tries have waited about
/// [`BUSY_TIMEOUT`] in all: 20 naps of 20 µs, 80 of 200 µs, then 2 ms each.
fn busy_nap_before(count: u32) -> Option<Duration> {
    const SHORT: (u32, Duration) = (20, Duration::from_micros(20));
    const MEDIUM: (u32, Duration) = (80, Duration::from_micros(200));
    const LONG: Duration = Duration::from_millis(2);
    let first_naps = SHORT.1 * SHORT.0 + MEDIUM.1 * MEDIUM.0;
    let long_naps = BUSY_TIMEOUT.saturating_sub(first_naps).as_micros() / LONG.as_micros();
    match count {
        c if c < SHORT.0 => Some(SHORT.1),
        c if c < SHORT.0 + MEDIUM.0 => Some(MEDIUM.1),
        c if u128::from(c - SHORT.0 - MEDIUM.0) < long_naps => Some(LONG),
        _ => None,
    }
}

unsafe extern "C" fn busy_nap(_: *mut std::ffi::c_void, count: std::ffi::c_int) -> std::ffi::c_int {
    match busy_nap_before(u32::try_from(count).unwrap_or(u32::MAX)) {
        Some(nap) => {
            std::thread::sleep(nap);
            1
        }
        None => 0,
    }
}

/// The write check of `/readyz`: rewrites the database header's user version with its own
/// value, in a write transaction, so a file that cannot take a write (a full disk, a read-only
/// mount) fails it as the ledger's own writes do.
pub(in crate::ledger) async fn check_writable(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin_with(BEGIN).await?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "PRAGMA user_version = {version}"
    )))
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

pub(in crate::ledger) async fn connect(url: &str, root: &Path) -> Result<SqlitePool, LedgerError> {
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
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    // No memory-mapped reads (`mmap_size` stays 0): each connection maps the file on its own,
    // and the kernel counts a mapped page in the process's RSS once per mapping, so the daemon's
    // RSS grew by up to the ledger's size per connection (the scale bench's drain peaked at
    // 160 MB against 110 without); reads from the page cache measured no slower.
    let pool = SqlitePoolOptions::new()
        .max_connections(if path == ":memory:" { 1 } else { CONNECTIONS })
        .after_connect(|conn, _| Box::pin(async move { short_busy_waits(conn).await }))
        .before_acquire(|conn, _| {
            Box::pin(async move { Ok(crate::ledger::out_of_transaction(conn)) })
        })
        .connect_with(options)
        .await
        .map_err(|e| LedgerError::Open {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_naps_start_short_and_add_up_to_the_timeout() {
        let naps: Vec<Duration> = (0..).map_while(busy_nap_before).collect();
        assert_eq!(naps[0], Duration::from_micros(20));
        assert!(naps.windows(2).all(|w| w[0] <= w[1]), "never shorter");
        let total: Duration = naps.iter().sum();
        let slack = Duration::from_millis(5);
        assert!(
            total + slack >= BUSY_TIMEOUT && total <= BUSY_TIMEOUT + slack,
            "{total:?}"
        );
    }

    #[tokio::test]
    async fn a_file_ledger_is_read_without_mappings_over_a_few_connections() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = connect("sqlite://ledger.db", dir.path())
            .await
            .expect("connect");
        let mut held = Vec::new();
        for n in 1..=CONNECTIONS {
            let mut conn = pool.acquire().await.expect("a connection");
            let mmap: i64 = sqlx::query_scalar("PRAGMA mmap_size")
                .fetch_one(&mut *conn)
                .await
                .expect("mmap_size");
            assert_eq!(mmap, 0, "connection {n} maps the file");
            held.push(conn);
        }
        let more = tokio::time::timeout(Duration::from_millis(200), pool.acquire()).await;
        assert!(more.is_err(), "a connection past {CONNECTIONS}");
    }

    #[tokio::test]
    async fn sqlite_is_built_without_global_memory_locks() {
        // `.cargo/config.toml` sets how the bundled SQLite is compiled: no memory statistics
        // and no shared page-cache group, each of which a global mutex guards.
        let pool = connect("sqlite::memory:", Path::new("."))
            .await
            .expect("connect");
        let options: Vec<String> = sqlx::query_scalar("PRAGMA compile_options")
            .fetch_all(&pool)
            .await
            .expect("compile_options");
        assert!(
            options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
            "{options:?}"
        );
        assert!(
            !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
            "{options:?}"
        );
        assert_eq!(
            unsafe { libsqlite3_sys::sqlite3_memory_used() },
            0,
            "SQLite counts its memory"
        );
    }

    #[tokio::test]
    async fn a_write_waits_for_another_connections_lock_then_goes_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = connect("sqlite://ledger.db", dir.path())
            .await
            .expect("connect");
        let mut holder = pool.acquire().await.expect("a connection");
        sqlx::query(BEGIN)
            .execute(&mut *holder)
            .await
            .expect("lock");
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move {
                sqlx::query("CREATE TABLE waited (x INTEGER)")
                    .execute(&pool)
                    .await
            }
        });
        // Held for a while: the write is still waiting (not failed with SQLITE_BUSY).
        let mut waiting = Box::pin(waiting);
        let early = tokio::time::timeout(Duration::from_millis(100), &mut waiting).await;
        assert!(
            early.is_err(),
            "finished while the lock was held: {early:?}"
        );
        sqlx::query("COMMIT")
            .execute(&mut *holder)
            .await
            .expect("release");
        waiting
            .await
            .expect("join")
            .expect("the write goes through once the lock is released");
    }
}
