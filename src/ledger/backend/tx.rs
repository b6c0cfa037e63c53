//! One transaction on either backend, so that logic spanning several statements is written once:
//! [`Tx`] runs a [`Statement`] — its SQL and its binds, built together by one function — on
//! SQLite or PostgreSQL. Where a backend needs a step the other does not (PostgreSQL's row lock before a job's redrive or retirement), [`Tx`] has a method
//! that says so and does nothing on the other.

use std::borrow::Cow;

use sqlx::{Database, Encode, FromRow, Postgres, Sqlite, Transaction, Type};

use crate::domain::keys::{DeliveryKey, JobKey};
use crate::ledger::{Backend, BothRow, Ledger, PerBackend, Result};

/// A value bound to one of a statement's parameters (`$1`, `$2`, … in order).
#[derive(Debug, Clone)]
pub(in crate::ledger) enum Arg<'a> {
    Int(i64),
    MaybeInt(Option<i64>),
    MaybeFloat(Option<f64>),
    Text(Cow<'a, str>),
    MaybeText(Option<Cow<'a, str>>),
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::MaybeInt(v)
    }
}

impl From<Option<f64>> for Arg<'_> {
    fn from(v: Option<f64>) -> Self {
        Arg::MaybeFloat(v)
    }
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(v))
    }
}

impl From<Option<String>> for Arg<'_> {
    fn from(v: Option<String>) -> Self {
        Arg::MaybeText(v.map(Cow::Owned))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::MaybeText(v.map(Cow::Borrowed))
    }
}

impl From<&JobKey> for Arg<'_> {
    fn from(k: &JobKey) -> Self {
        Arg::Text(Cow::Owned(k.to_string()))
    }
}

impl From<&DeliveryKey> for Arg<'_> {
    fn from(k: &DeliveryKey) -> Self {
        Arg::Text(Cow::Owned(k.to_string()))
    }
}

impl From<Option<&DeliveryKey>> for Arg<'_> {
    fn from(k: Option<&DeliveryKey>) -> Self {
        Arg::MaybeText(k.map(|k| Cow::Owned(k.to_string())))
    }
}

/// A statement with its binds: what one function of a concern's file builds and a [`Tx`] runs.
#[derive(Debug, Clone)]
pub(in crate::ledger) struct Statement<'a> {
    sql: Cow<'static, str>,
    args: Vec<Arg<'a>>,
}

impl<'a> Statement<'a> {
    pub(in crate::ledger) fn new(sql: &'static str) -> Statement<'a> {
        Statement {
            sql: Cow::Borrowed(sql),
            args: Vec::new(),
        }
    }

    /// A statement whose text was built at run time (a multi-row `VALUES` list).
    pub(in crate::ledger) fn owned(sql: String) -> Statement<'a> {
        Statement {
            sql: Cow::Owned(sql),
            args: Vec::new(),
        }
    }

    /// Binds the next parameter.
    pub(in crate::ledger) fn bind(mut self, arg: impl Into<Arg<'a>>) -> Statement<'a> {
        self.args.push(arg.into());
        self
    }
}

/// An open transaction on the ledger's backend. Dropped without [`Tx::commit`], it rolls back
/// — but only when its connection is next used, and until then the rows it locked stay locked
/// (a claim's `SKIP LOCKED` passes them by). So a transaction that can fail halfway runs in
/// [`Ledger::within`], which rolls back before it returns the error.
pub(in crate::ledger) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Ledger {
    /// Begins a transaction the way each backend writes (SQLite takes its write lock at once).
    pub(in crate::ledger) async fn begin(&self) -> Result<Tx> {
        Ok(match &self.backend {
            Backend::Sqlite(p) => Tx::Sqlite(super::sqlite::begin(self, p).await?),
            Backend::Postgres(p) => Tx::Postgres(super::postgres::begin(self, p).await?),
        })
    }
}

impl Ledger {
    /// Runs `body` in one transaction: commits when it returns `Ok` (a refusal that changed
    /// nothing commits nothing), and rolls back before returning when it fails, so no lock it
    /// took outlives the call.
    pub(in crate::ledger) async fn within<T>(
        &self,
        body: impl AsyncFnOnce(&mut Tx) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.begin().await?;
        match body(&mut tx).await {
            Ok(out) => {
                tx.commit().await?;
                Ok(out)
            }
            Err(e) => {
                // The body's error is the one to report; a rollback that fails too means the
                // connection is gone, and the server ends the transaction with it.
                if let Err(rollback) = tx.rollback().await {
                    tracing::debug!(error = %rollback, "rolling back a failed transaction failed");
                }
                Err(e)
            }
        }
    }
}

impl Ledger {
    /// Runs one statement in a transaction of its own; how many rows it changed.
    pub(in crate::ledger) async fn execute(&self, st: &Statement<'_>) -> Result<u64> {
        Ok(match &self.backend {
            Backend::Sqlite(p) => query(st.sql.clone(), &st.args)
                .execute(p)
                .await?
                .rows_affected(),
            Backend::Postgres(p) => {
                let mut conn = self.pg_connection(p).await?;
                query(st.sql.clone(), &st.args)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected()
            }
        })
    }
}

impl Ledger {
    /// Every row `st` returns, each read as `R` and made a `T`.
    pub(in crate::ledger) async fn fetch_all<R, T>(&self, st: &Statement<'_>) -> Result<Vec<T>>
    where
        R: BothRow,
        T: TryFrom<R, Error = crate::ledger::LedgerError>,
    {
        let rows: Vec<R> = match &self.backend {
            Backend::Sqlite(p) => query_as(st.sql.clone(), &st.args).fetch_all(p).await?,
            Backend::Postgres(p) => {
                let mut conn = self.pg_connection(p).await?;
                query_as(st.sql.clone(), &st.args)
                    .fetch_all(&mut *conn)
                    .await?
            }
        };
        rows.into_iter().map(T::try_from).collect()
    }
}

/// `args` bound to `sql`, for the backend `DB`.
fn query<'q, DB: Database>(
    sql: Cow<'static, str>,
    args: &[Arg<'_>],
) -> sqlx::query::Query<'q, DB, <DB as Database>::Arguments>
where
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    Option<i64>: for<'t> Encode<'t, DB> + Type<DB>,
    Option<f64>: for<'t> Encode<'t, DB> + Type<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
{
    args.iter()
        .fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |q, a| match a {
            Arg::Int(v) => q.bind(*v),
            Arg::MaybeInt(v) => q.bind(*v),
            Arg::MaybeFloat(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_ref()),
            Arg::MaybeText(v) => q.bind(v.as_deref()),
        })
}

/// `args` bound to `sql`, read as `T`, for the backend `DB`.
fn query_as<'q, DB: Database, T>(
    sql: Cow<'static, str>,
    args: &'q [Arg<'q>],
) -> sqlx::query::QueryAs<'q, DB, T, <DB as Database>::Arguments>
where
    T: for<'r> FromRow<'r, DB::Row>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    Option<i64>: for<'t> Encode<'t, DB> + Type<DB>,
    Option<f64>: for<'t> Encode<'t, DB> + Type<DB>,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
{
    args.iter()
        .fold(sqlx::query_as(sqlx::AssertSqlSafe(sql)), |q, a| match a {
            Arg::Int(v) => q.bind(*v),
            Arg::MaybeInt(v) => q.bind(*v),
            Arg::MaybeFloat(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_ref()),
            Arg::MaybeText(v) => q.bind(v.as_deref()),
        })
}

impl Tx {
    /// Runs `st`; how many rows it changed.
    pub(in crate::ledger) async fn execute(&mut self, st: &Statement<'_>) -> Result<u64> {
        Ok(match self {
            Tx::Sqlite(tx) => {
                let done = query(st.sql.clone(), &st.args).execute(&mut **tx).await?;
                done.rows_affected()
            }
            Tx::Postgres(tx) => {
                let done = query(st.sql.clone(), &st.args).execute(&mut **tx).await?;
                done.rows_affected()
            }
        })
    }

    /// The first row `st` returns, if any.
    pub(in crate::ledger) async fn fetch_optional<T: BothRow>(
        &mut self,
        st: &Statement<'_>,
    ) -> Result<Option<T>> {
        Ok(match self {
            Tx::Sqlite(tx) => {
                query_as(st.sql.clone(), &st.args)
                    .fetch_optional(&mut **tx)
                    .await?
            }
            Tx::Postgres(tx) => {
                query_as(st.sql.clone(), &st.args)
                    .fetch_optional(&mut **tx)
                    .await?
            }
        })
    }

    /// Every row `st` returns.
    pub(in crate::ledger) async fn fetch_all<T: BothRow>(
        &mut self,
        st: &Statement<'_>,
    ) -> Result<Vec<T>> {
        Ok(match self {
            Tx::Sqlite(tx) => {
                query_as(st.sql.clone(), &st.args)
                    .fetch_all(&mut **tx)
                    .await?
            }
            Tx::Postgres(tx) => {
                query_as(st.sql.clone(), &st.args)
                    .fetch_all(&mut **tx)
                    .await?
            }
        })
    }

    /// Runs `statement`, whose `$1` is an instant (ms) and `$2` a list of job keys (each
    /// backend's `key_list`); how many rows it changed.
    pub(in crate::ledger) async fn execute_keyed(
        &mut self,
        statement: PerBackend,
        at_ms: i64,
        keys: &[&JobKey],
    ) -> Result<u64> {
        Ok(match self {
            Tx::Sqlite(tx) => sqlx::query(statement.sqlite)
                .bind(at_ms)
                .bind(super::sqlite::key_list(keys))
                .execute(&mut **tx)
                .await?
                .rows_affected(),
            Tx::Postgres(tx) => sqlx::query(statement.postgres)
                .bind(at_ms)
                .bind(super::postgres::key_list(keys))
                .execute(&mut **tx)
                .await?
                .rows_affected(),
        })
    }

    /// The PostgreSQL connection this transaction runs on, for a statement that binds arrays
    /// (`UNNEST`); `None` on SQLite, which has no array binds.
    pub(in crate::ledger) fn postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match self {
            Tx::Postgres(tx) => Some(&mut **tx),
            Tx::Sqlite(_) => None,
        }
    }

    /// Whether this backend's statements number their parameters (`$1`; PostgreSQL) rather
    /// than take them in order (`?`; SQLite, where a numbered name costs a lookup by scan).
    pub(in crate::ledger) fn numbered(&self) -> bool {
        matches!(self, Tx::Postgres(_))
    }

    /// The text of `statement` for this transaction's backend.
    pub(in crate::ledger) fn pick(&self, statement: PerBackend) -> &'static str {
        match self {
            Tx::Sqlite(_) => statement.sqlite,
            Tx::Postgres(_) => statement.postgres,
        }
    }

    /// The planner settings a claim runs under, where the backend has them (PostgreSQL's
    /// `LEASE_PLAN`), for the rest of the transaction.
    pub(in crate::ledger) async fn plan_claim(&mut self) -> Result<()> {
        match self {
            Tx::Postgres(tx) => {
                sqlx::query(super::postgres::LEASE_PLAN)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }
            Tx::Sqlite(_) => Ok(()),
        }
    }

    /// Every row of `head (k1, k2, …)` for the job keys (`bind::job_keys_in`, as many
    /// statements as the keys need). `head` ends in `IN (`.
    pub(in crate::ledger) async fn fetch_by_job_keys<T: BothRow>(
        &mut self,
        head: &'static str,
        keys: &[&JobKey],
    ) -> Result<Vec<T>> {
        use super::bind::{job_keys_in, shaped};
        let mut out = Vec::with_capacity(keys.len());
        for chunk in shaped(keys, 256) {
            match self {
                Tx::Sqlite(tx) => {
                    let mut qb = job_keys_in::<Sqlite>(head, chunk);
                    out.extend(qb.build_query_as::<T>().fetch_all(&mut **tx).await?);
                }
                Tx::Postgres(tx) => {
                    let mut qb = job_keys_in::<Postgres>(head, chunk);
                    out.extend(qb.build_query_as::<T>().fetch_all(&mut **tx).await?);
                }
            }
        }
        Ok(out)
    }

    /// Serialises the making of owners' notices across nodes until the end of the transaction
    /// (PostgreSQL's transaction-scoped advisory lock; SQLite's write transaction already
    /// excludes every other writer), so two nodes never open two batches for one report.
    pub(in crate::ledger) async fn lock_notices(&mut self) -> Result<()> {
        match self {
            Tx::Sqlite(_) => Ok(()),
            Tx::Postgres(_) => {
                let lock = Statement::new("SELECT pg_advisory_xact_lock(7243017)");
                self.execute(&lock).await.map(|_| ())
            }
        }
    }

    /// Locks job `key`'s row until the end of the transaction, where the backend needs it
    /// (PostgreSQL; SQLite's write transaction already excludes every other writer). A redrive
    /// and a retirement both take it first, so they never wait on each other in opposite orders.
    pub(in crate::ledger) async fn lock_job(&mut self, key: &str) -> Result<()> {
        match self {
            Tx::Sqlite(_) => Ok(()),
            Tx::Postgres(_) => {
                // Under READ COMMITTED the check that follows sees every transaction that
                // changed the row before; later ones wait for this one's commit.
                let lock = Statement::new("SELECT key FROM jobs WHERE key = $1 FOR UPDATE");
                self.execute(&lock.bind(key)).await.map(|_| ())
            }
        }
    }

    /// The ledger's own clock as this statement runs (see [`Ledger::server_time`]); `None`
    /// on SQLite.
    pub(in crate::ledger) async fn server_time(
        &mut self,
    ) -> Result<Option<crate::ledger::ClockReading>> {
        match self {
            Tx::Sqlite(_) => Ok(None),
            Tx::Postgres(_) => {
                let st = Statement::new(crate::ledger::SERVER_TIME);
                let sent = std::time::Instant::now();
                let Some((ms,)) = self.fetch_optional::<(i64,)>(&st).await? else {
                    return Err(crate::ledger::LedgerError::Corrupt(
                        "the ledger's clock read returned no row".into(),
                    ));
                };
                Ok(Some(crate::ledger::ClockReading {
                    at: crate::domain::clock::from_millis(ms),
                    sent,
                    answered: std::time::Instant::now(),
                }))
            }
        }
    }

    pub(in crate::ledger) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await?,
            Tx::Postgres(tx) => tx.commit().await?,
        }
        Ok(())
    }

    pub(in crate::ledger) async fn rollback(self) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => tx.rollback().await?,
            Tx::Postgres(tx) => tx.rollback().await?,
        }
        Ok(())
    }
}
