//! The ledger: every job, delivery, attempt and redrive, on SQLite (the embedded default) or
//! PostgreSQL (several workers). This module is the only place with SQL.
//!
//! Every transition (ARCHITECTURE.md, "State machines") is a conditional update
//! (`WHERE state = <expected>`), so a late or duplicate writer can never move work backwards.
//! Leases carry a fencing token that grows by one on every lease; every later write of a lease
//! must present it, so a worker whose lease expired and was rescued cannot complete or
//! reschedule that work afterwards. The files of this folder are the code map's `ledger/`
//! entry; `sqlite` and `postgres` hold what only one backend has: connecting, how a write
//! transaction begins, row locks, planner settings.

#[macro_use]
mod states;

/// Runs `$body` with `$p` bound to the backend's pool and `$d` to its dialect module, so SQL
/// common to both backends is written once and backend-specific SQL lives in its own file.
macro_rules! on_backend {
    ($self:expr, |$p:ident, $d:ident| $body:expr) => {
        match &$self.backend {
            crate::ledger::Backend::Sqlite($p) => {
                #[allow(unused_imports)]
                use crate::ledger::backend::sqlite as $d;
                $body
            }
            crate::ledger::Backend::Postgres($p) => {
                #[allow(unused_imports)]
                use crate::ledger::backend::postgres as $d;
                $body
            }
        }
    };
}

/// The `column` (`key`, `number`) of the jobs whose deliveries may be in flight: a delivery is
/// leased (`sending`) only while its job is live, and deliveries have no index of their own by
/// state (a finish would change an indexed column, so it would never be a HOT update). One arm
/// per index of live jobs (`jobs_delivering`, `jobs_leased`, `jobs_due`), so each is read
/// through its own: the last arm's test is `jobs_due`'s predicate, in the form SQLite can match
/// it by. The arms together are [`JobState::LIVE`] (a unit test checks).
macro_rules! live_jobs {
    ($column:literal) => {
        sql!(
            "(SELECT ",
            $column,
            " FROM jobs WHERE state = 'delivering'
              UNION ALL SELECT ",
            $column,
            " FROM jobs WHERE state = 'rendering'
              UNION ALL SELECT ",
            $column,
            " FROM jobs WHERE ",
            $crate::ledger::states::JOBS_CLAIMABLE,
            ")"
        )
    };
}

/// The keys of the live jobs ([`live_jobs!`]).
const LIVE_JOB_KEYS: &str = live_jobs!("key");
/// The numbers of the live jobs: what deliveries' statements test (the primary key's
/// prefix), since no index holds deliveries' job keys.
const LIVE_JOB_NUMBERS: &str = live_jobs!("number");

mod audit;
mod backend;
mod browse;
mod decisions;
mod deliveries;
mod deploy;
mod group_commit;
mod group_commit_pg;
mod group_commit_sql;
mod handles;
mod ingest;
mod jobs;
mod leases;
mod nodes;
mod notices;
mod probes;
mod recipients;
mod reissue;
mod rescue;
mod retention;
mod runbooks;
mod schema;
mod signal;
mod test_sends;
mod ticks;
mod types;

use std::path::Path;

use sqlx::{PgPool, SqlitePool};

use crate::domain::keys::Key;
use crate::domain::redact::redact_url;
use audit::RedriveRecord;
pub use audit::Unaudited;
pub use audit::{Audit, Redrive, Via};
use backend::tx::{Arg, Statement};
pub use decisions::{Decided, DecisionRow, ToDecide};
pub(crate) use deploy::Blockers;
pub use deploy::{HeldLease, Migrated};
pub use group_commit::Committed;
pub use group_commit::{GroupCommit, LeaseTo};
pub use leases::{Claimed, DeliveryLease, JobLease, Lease, LeaseParams, LeasedDelivery, LeasedJob};
pub use nodes::Beat;
pub use nodes::{Node, leader};
pub use notices::Told;
pub(crate) use notices::{Addressed, NewNotice, NoticeAttempt, NoticeMessage, SendNext};
pub use notices::{NoticeRow, NoticeSend};
pub use probes::{AfterProbe, ProbeRow};
pub use recipients::{
    BounceRow, Cause, Lifted, NewSuppression, Recorded, SoftPolicy, Suppression, scope,
};
pub use rescue::{Bounds, RescueBudget};
pub use runbooks::RunbookSpec;
pub use runbooks::RunbookState;
pub use runbooks::{Runbook, RunbookStep};
pub(crate) use runbooks::{StepRecord, Transition};
pub use schema::MigrationInfo;
pub use schema::Opening;
pub use schema::SchemaFit;
pub use signal::WorkListener;
pub use states::{DeliveryState, JobState};
pub use test_sends::{NewTestSend, TestSend};
pub use types::*;

/// A row type both backends decode.
pub(super) trait BothRow:
    Send
    + Unpin
    + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
    + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
{
}

impl<R> BothRow for R where
    R: Send
        + Unpin
        + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
{
}

use crate::config::DEFAULT_PG_CONNECTIONS;

/// PostgreSQL's clock now, in milliseconds since the epoch (`clock_timestamp()`: the moment
/// the statement runs, not its transaction's start).
const SERVER_TIME: &str = "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

/// What went wrong in the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("cannot open the ledger at {url}: {reason}")]
    Open { url: String, reason: String },
    #[error("ledger query failed: {0}")]
    Db(#[from] sqlx::Error),
    /// No pooled connection came free within the pool's acquire timeout, and why (PostgreSQL:
    /// the server's own reason when it refuses new connections).
    #[error("no ledger connection came free within 10 s: {reason}")]
    Starved { reason: String },
    #[error("ledger migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The lease was rescued or taken over: this worker must drop the work.
    #[error("lease on {key} (token {token}) is no longer held")]
    LeaseLost { key: String, token: i64 },
    /// A transition asked of work that is not in the state it needs.
    #[error("{what} {key} is {actual}, not {expected}")]
    WrongState {
        what: &'static str,
        key: String,
        expected: &'static str,
        actual: String,
    },
    #[error("no {what} {key}")]
    NotFound { what: &'static str, key: String },
    #[error("corrupt ledger row: {0}")]
    Corrupt(String),
    /// A write of a newer work format while a node that does not read it is live.
    #[error(
        "{what} needs every live node to read work format {format}; a node of an older version is live (dawnpost nodes)"
    )]
    OlderNodes { what: &'static str, format: i64 },
    /// The health check of `/readyz`: no answer, or no tables.
    #[error("the ledger is unreachable or not migrated")]
    Unreachable,
    /// The health check of `/readyz`: a write was refused (a full disk, a read-only server, no grants).
    #[error("the ledger cannot write: {0}")]
    CannotWrite(String),
    /// The schema does not fit this binary: what it has, what is needed, what to run.
    #[error("{0}")]
    Schema(String),
}

pub type Result<T> = std::result::Result<T, LedgerError>;

/// Whether a pooled connection may be handed out again (both backends' `before_acquire`): not
/// when sqlx still counts a transaction open on it. That happens when a COMMIT fails — on
/// SQLite with SQLITE_FULL or an I/O error: SQLite rolls the transaction back itself, so the
/// ROLLBACK that follows fails too, the count stays at one, and every later `BEGIN IMMEDIATE`
/// on the connection would be refused ("begin_with at non-zero transaction depth"). Such a
/// connection is closed and a fresh one opened.
fn out_of_transaction<C: sqlx::Connection>(conn: &C) -> bool {
    let clean = !conn.is_in_transaction();
    if !clean {
        tracing::warn!("closing a ledger connection left inside a failed transaction");
    }
    clean
}

impl Ledger {
    /// A connection of the PostgreSQL pool for a statement; when none comes free in time, the
    /// server's reason ([`backend::postgres::acquire`]), which sqlx itself drops.
    pub(in crate::ledger) async fn pg_connection(
        &self,
        pool: &sqlx::PgPool,
    ) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>> {
        backend::postgres::acquire(pool, &self.starved).await
    }
}

impl LedgerError {
    /// A statement gave up waiting for a row another transaction holds (PostgreSQL's
    /// `lock_timeout`, SQLSTATE 55P03).
    pub(crate) fn is_lock_timeout(&self) -> bool {
        matches!(self, LedgerError::Db(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03"))
    }
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A statement whose text differs between the backends, beside the function that runs it; the
/// dialect module `on_backend!` hands the body (`d::pick`) takes its side.
#[derive(Debug, Clone, Copy)]
pub(super) struct PerBackend {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// The newest work format this binary reads and writes: what each job's and delivery's
/// `format` column records. A claim takes only work of a format up to this one, so a newer
/// node's work waits for a node that knows it. New jobs and deliveries take the column's
/// default, format 1 (all a new row needs, so after a rollback the older nodes lease every
/// unfinished one); a transition of a newer format is written only while every live node reads
/// it (`ledger.nodes().write_format`).
///
/// 1: the states `ready`, `rendering`, `delivering`, `done`, `quarantined`, `cancelled`.
/// 2: a job may also end `skipped` ([`SKIPPED_FORMAT`]).
/// 3: a job may also be `waiting` for its data ([`WAITING_FORMAT`]).
/// 4: a job may be a reissued revision (`report:date.rN`, origin `reissue`; [`REISSUE_FORMAT`]).
/// 5: a delivery may end `suppressed` ([`SUPPRESSED_FORMAT`]).
pub const WORK_FORMAT: i64 = 5;

/// The format in which a delivery may end `suppressed`: written only while every live node
/// reads it (until then a delivery to a suppressed recipient is quarantined, saying why), and
/// the delivery records it.
pub const SUPPRESSED_FORMAT: i64 = 5;

/// The format of a reissued revision: its key and origin are new to older versions, so a
/// reissue is refused while one is live, and the revision keeps the format.
pub(crate) const REISSUE_FORMAT: i64 = 4;

/// The format of a job that waits for its data: a node moves a job to `waiting` only while
/// every live node reads that state (an older node would not know the row), and the job keeps
/// that format, so an older node never takes it.
pub(crate) const WAITING_FORMAT: i64 = 3;

/// The format in which a job may be `skipped`: a node skips a job only while every live node
/// reads it, and the skipped job records it.
pub const SKIPPED_FORMAT: i64 = 2;

/// The oldest work format: the most a write may use until the ledger has seen the live nodes.
pub(crate) const FIRST_WORK_FORMAT: i64 = 1;

/// A reading of the ledger's clock, and the monotonic instants its statement was sent and
/// answered at (no wait for a connection between them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    pub at: chrono::DateTime<chrono::Utc>,
    pub sent: std::time::Instant,
    pub answered: std::time::Instant,
}

/// A handle on the ledger; cheap to clone.
#[derive(Debug, Clone)]
pub struct Ledger {
    backend: Backend,
    /// The newest format every live node reads (shared by the clones).
    write_format: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// Why the pool last had no connection to give, found out at most once in a while
    /// (shared by the clones).
    starved: backend::postgres::Starvation,
}

impl Ledger {
    /// Opens (creating if needed) and migrates the ledger at `url`, as tests and tools do. A
    /// relative SQLite path resolves against `root`.
    pub async fn connect(url: &str, root: &Path) -> Result<Ledger> {
        Self::connect_sized(url, root, DEFAULT_PG_CONNECTIONS).await
    }

    /// [`Ledger::connect`] with at most `pg_connections` connections on PostgreSQL.
    pub(crate) async fn connect_sized(
        url: &str,
        root: &Path,
        pg_connections: u32,
    ) -> Result<Ledger> {
        Self::open(url, root, pg_connections, Opening::Migrate).await
    }

    /// Opens the ledger at `url` as `opening` says (SQLite always migrates: it is one node's).
    pub async fn open(
        url: &str,
        root: &Path,
        pg_connections: u32,
        opening: Opening,
    ) -> Result<Ledger> {
        let ledger = Self::open_pool(url, root, pg_connections).await?;
        ledger.prepare_schema(opening).await?;
        Ok(ledger)
    }

    async fn open_pool(url: &str, root: &Path, pg_connections: u32) -> Result<Ledger> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(backend::postgres::connect(url, None, pg_connections).await?)
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite(backend::sqlite::connect(url, root).await?)
        } else {
            return Err(LedgerError::Open {
                url: redact_url(url),
                reason: "unsupported URL: use sqlite://PATH or postgres://…".into(),
            });
        };
        Ok(Ledger::on(backend))
    }

    fn on(backend: Backend) -> Ledger {
        Ledger {
            backend,
            write_format: std::sync::Arc::new(FIRST_WORK_FORMAT.into()),
            starved: Default::default(),
        }
    }

    /// Opens a PostgreSQL ledger inside its own schema (created if missing): how tests isolate.
    pub async fn connect_postgres_schema(url: &str, schema: &str) -> Result<Ledger> {
        let ledger = Ledger::on(Backend::Postgres(
            backend::postgres::connect(url, Some(schema), DEFAULT_PG_CONNECTIONS).await?,
        ));
        ledger.prepare_schema(Opening::Migrate).await?;
        Ok(ledger)
    }

    /// Drops a schema made by [`Ledger::connect_postgres_schema`].
    pub async fn drop_postgres_schema(&self, schema: &str) -> Result<()> {
        match &self.backend {
            Backend::Postgres(p) => backend::postgres::drop_schema(p, schema).await,
            Backend::Sqlite(_) => Ok(()),
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    pub async fn close(&self) {
        on_backend!(self, |p, _d| p.close().await)
    }

    /// The ledger's own clock, which the nodes sharing it keep (PostgreSQL's
    /// `clock_timestamp()`); `None` on SQLite, whose machine's clock is the reference. The
    /// round trip is timed from when a pooled connection is in hand: a wait for one is not
    /// part of the reading.
    pub(crate) async fn server_time(&self) -> Result<Option<ClockReading>> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(p) => {
                let mut conn = self.pg_connection(p).await?;
                let sent = std::time::Instant::now();
                let ms: i64 = sqlx::query_scalar(SERVER_TIME)
                    .fetch_one(&mut *conn)
                    .await?;
                let answered = std::time::Instant::now();
                Ok(Some(ClockReading {
                    at: crate::domain::clock::from_millis(ms),
                    sent,
                    answered,
                }))
            }
        }
    }

    /// Whether the ledger can serve the daemon: it answers, its tables exist (migrations
    /// applied), and it takes a write; else what is wrong, in words.
    pub async fn ready(&self) -> Result<()> {
        let read = on_backend!(self, |p, _d| {
            sqlx::query("SELECT COUNT(*) FROM jobs WHERE key = ''")
                .execute(p)
                .await
                .is_ok()
                && sqlx::query("SELECT COUNT(*) FROM ingest_events WHERE webhook_id = ''")
                    .execute(p)
                    .await
                    .is_ok()
        });
        if !read {
            return Err(LedgerError::Unreachable);
        }
        let wrote = match &self.backend {
            Backend::Sqlite(p) => backend::sqlite::check_writable(p).await,
            Backend::Postgres(p) => backend::postgres::check_writable(p).await,
        };
        wrote.map_err(|e| LedgerError::CannotWrite(crate::domain::words::error_chain(&e)))
    }

    /// Runs a query of rows `R` with one bind (`$1`) and converts each row to `T`.
    async fn select<R, T, B>(&self, sql: &'static str, bind: B) -> Result<Vec<T>>
    where
        R: BothRow,
        T: TryFrom<R, Error = LedgerError>,
        B: for<'q> sqlx::Encode<'q, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>
            + for<'q> sqlx::Encode<'q, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + Send,
    {
        let recs: Vec<R> = on_backend!(self, |p, _d| {
            sqlx::query_as(sql).bind(bind).fetch_all(p).await?
        });
        recs.into_iter().map(T::try_from).collect()
    }

    /// Runs `head (k1, k2, …)` for the job keys (`bind::job_keys_in`, as many statements as
    /// the keys need) and converts each row to `T`. `head` ends in `IN (`.
    async fn select_by_job_keys<R, T>(
        &self,
        head: &'static str,
        keys: &[&crate::domain::keys::JobKey],
    ) -> Result<Vec<T>>
    where
        R: BothRow,
        T: TryFrom<R, Error = LedgerError>,
    {
        let mut recs: Vec<R> = Vec::with_capacity(keys.len());
        on_backend!(self, |p, _d| {
            for chunk in keys.chunks(backend::bind::KEYS_PER_STATEMENT) {
                let mut qb = backend::bind::job_keys_in(head, chunk);
                recs.extend(qb.build_query_as::<R>().fetch_all(p).await?);
            }
        });
        recs.into_iter().map(T::try_from).collect()
    }

    /// Runs a `SELECT state, COUNT(*) … GROUP BY state` and parses its states.
    async fn count_rows_by_state<S>(
        &self,
        sql: &'static str,
        parse: fn(&str) -> Result<S>,
    ) -> Result<Vec<(S, i64)>> {
        let rows: Vec<(String, i64)> =
            on_backend!(self, |p, _d| sqlx::query_as(sql).fetch_all(p).await?);
        rows.into_iter().map(|(s, n)| Ok((parse(&s)?, n))).collect()
    }

    /// Runs one fenced update of `lease`'s work: `sql` names the lease's key `$1` and its token
    /// `$2` and must test both; `args` bind from `$3` on. Refused with
    /// [`LedgerError::LeaseLost`] unless it changed exactly the leased row.
    async fn fenced_update<K: Key>(
        &self,
        sql: &'static str,
        lease: &Lease<K>,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let key = lease.key().to_string();
        let st = args.iter().cloned().fold(
            Statement::new(sql).bind(key.as_str()).bind(lease.token()),
            Statement::bind,
        );
        let n = self.execute(&st).await?;
        fenced(n, lease)
    }
}

impl Ledger {
    /// Runs one fenced update of a delivery lease's row: `sql` names the delivery's job number
    /// `$1`, its ordinal `$2` and the lease's token `$3`, and must test all three; `args` bind
    /// from `$4` on. Refused with [`LedgerError::LeaseLost`] unless it changed exactly that row.
    async fn fenced_send(
        &self,
        sql: &'static str,
        lease: &DeliveryLease,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let place = lease.place();
        let head = Statement::new(sql)
            .bind(place.job_number)
            .bind(i64::from(place.ordinal))
            .bind(lease.token());
        let st = args.iter().cloned().fold(head, Statement::bind);
        let n = self.execute(&st).await?;
        fenced(n, lease)
    }
}

/// `Ok` when a fenced write changed the leased row, else [`LedgerError::LeaseLost`].
fn fenced<K: Key>(rows: u64, lease: &Lease<K>) -> Result<()> {
    if rows == 1 {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

fn lease_lost<K: Key>(lease: &Lease<K>) -> LedgerError {
    LedgerError::LeaseLost {
        key: lease.key().shown(),
        token: lease.token(),
    }
}
