//! The ledger: every job, delivery, attempt and redrive, on SQLite (the embedded default) or
//! PostgreSQL (several workers). This module is the only place with SQL.
//!
//! Every transition of DESIGN §3 is a conditional update (`WHERE state = <expected>`), so a late
//! or duplicate writer can never move work backwards. Leases carry a fencing token that grows by
//! one on every lease; every later write of a lease must present it, so a worker whose lease
//! expired and was rescued cannot complete or reschedule that work afterwards.
//!
//! ```text
//! job:       ready → rendering → delivering → done
//!                    rendering → ready         (transient render failure; lease expiry)
//!                    rendering → quarantined   (permanent failure, budget exhausted)
//!                                delivering → quarantined (all deliveries terminal, one quarantined)
//!            ready | quarantined → cancelled   (by an operator)
//!            quarantined → ready | delivering  (redrive)
//! delivery:  pending → sending → sent
//!                      sending → pending       (transient, with a later ready_at; lease expiry; drain)
//!                      sending → quarantined   (permanent, or budget exhausted)
//!            quarantined → pending             (redrive)
//! ```

mod postgres;
mod sqlite;
mod types;

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use sqlx::{PgPool, SqlitePool};

pub use crate::outcome::ResponseClass;
pub use crate::redact::redact_url;
pub use types::*;

use crate::clock::to_millis;

/// What went wrong in the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("cannot open the ledger at {url}: {reason}")]
    Open { url: String, reason: String },
    #[error("ledger query failed: {0}")]
    Db(#[from] sqlx::Error),
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
}

pub type Result<T> = std::result::Result<T, LedgerError>;

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A handle on the ledger; cheap to clone.
#[derive(Debug, Clone)]
pub struct Ledger {
    backend: Backend,
}

/// Runs `$body` with `$p` bound to the backend's pool and `$d` to its dialect module, so SQL
/// common to both backends is written once and backend-specific SQL lives in its own file.
macro_rules! on_backend {
    ($self:expr, |$p:ident, $d:ident| $body:expr) => {
        match &$self.backend {
            crate::ledger::Backend::Sqlite($p) => {
                #[allow(unused_imports)]
                use crate::ledger::sqlite as $d;
                $body
            }
            crate::ledger::Backend::Postgres($p) => {
                #[allow(unused_imports)]
                use crate::ledger::postgres as $d;
                $body
            }
        }
    };
}

mod rescue;
mod retention;

pub use rescue::RescueBudget;

const JOB_COLUMNS: &str = "*";
const TERMINAL_JOB: &str = "('done', 'quarantined', 'cancelled')";

impl Ledger {
    /// Opens (creating if needed) and migrates the ledger at `url`. A relative SQLite path
    /// resolves against `root`.
    pub async fn connect(url: &str, root: &Path) -> Result<Ledger> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(postgres::connect(url, None).await?)
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite(sqlite::connect(url, root).await?)
        } else {
            return Err(LedgerError::Open {
                url: redact_url(url),
                reason: "unsupported URL: use sqlite://PATH or postgres://…".into(),
            });
        };
        Ok(Ledger { backend })
    }

    /// Opens a PostgreSQL ledger inside its own schema (created if missing): how tests isolate.
    pub async fn connect_postgres_schema(url: &str, schema: &str) -> Result<Ledger> {
        Ok(Ledger {
            backend: Backend::Postgres(postgres::connect(url, Some(schema)).await?),
        })
    }

    /// Drops a schema made by [`Ledger::connect_postgres_schema`].
    pub async fn drop_postgres_schema(&self, schema: &str) -> Result<()> {
        match &self.backend {
            Backend::Postgres(p) => postgres::drop_schema(p, schema).await,
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

    /// True when the ledger answers a query.
    pub async fn ping(&self) -> bool {
        on_backend!(self, |p, _d| sqlx::query("SELECT 1")
            .execute(p)
            .await
            .is_ok())
    }

    // ---------------------------------------------------------------- jobs

    /// Inserts jobs whose keys do not exist yet; returns the keys actually inserted. The key
    /// is the table's primary key, so two inserters racing on one key insert it once.
    pub async fn job_insert_many(
        &self,
        jobs: &[NewJob],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>> {
        let now = to_millis(now);
        let mut inserted = Vec::new();
        // One transaction for the whole batch: one commit (one WAL flush) however many rows.
        match &self.backend {
            Backend::Postgres(p) => {
                // Eight array binds a chunk, whatever its size: PostgreSQL plans it once.
                let mut tx = p.begin_with(postgres::BEGIN).await?;
                for chunk in jobs.chunks(10_000) {
                    let (mut key, mut report, mut date, mut origin) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    let (mut fire, mut start, mut end, mut ready) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    for j in chunk {
                        key.push(j.key.to_string());
                        report.push(j.key.report().to_string());
                        date.push(j.key.date().format("%Y-%m-%d").to_string());
                        origin.push(j.origin.as_str());
                        fire.push(to_millis(j.fire_at));
                        start.push(to_millis(j.window.start));
                        end.push(to_millis(j.window.end));
                        ready.push(to_millis(j.ready_at));
                    }
                    let keys: Vec<(String,)> = sqlx::query_as(postgres::JOB_INSERT_MANY)
                        .bind(key)
                        .bind(report)
                        .bind(date)
                        .bind(origin)
                        .bind(fire)
                        .bind(start)
                        .bind(end)
                        .bind(ready)
                        .bind(now)
                        .fetch_all(&mut *tx)
                        .await?;
                    inserted.extend(keys.into_iter().map(|(k,)| k));
                }
                tx.commit().await?;
            }
            Backend::Sqlite(p) => {
                let mut tx = p.begin_with(sqlite::BEGIN).await?;
                for chunk in jobs.chunks(500) {
                    let mut qb = sqlx::QueryBuilder::new(
                        "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at, created_at, updated_at) ",
                    );
                    qb.push_values(chunk, |mut b, j| {
                        b.push_bind(j.key.to_string())
                            .push_bind(j.key.report().to_string())
                            .push_bind(j.key.date().format("%Y-%m-%d").to_string())
                            .push_bind("ready")
                            .push_bind(j.origin.as_str())
                            .push_bind(to_millis(j.fire_at))
                            .push_bind(to_millis(j.window.start))
                            .push_bind(to_millis(j.window.end))
                            .push_bind(to_millis(j.ready_at))
                            .push_bind(now)
                            .push_bind(now);
                    });
                    qb.push(" ON CONFLICT DO NOTHING RETURNING key");
                    let keys: Vec<(String,)> = qb.build_query_as().fetch_all(&mut *tx).await?;
                    inserted.extend(keys.into_iter().map(|(k,)| k));
                }
                tx.commit().await?;
            }
        }
        Ok(inserted)
    }

    pub async fn job_get(&self, key: &str) -> Result<Option<Job>> {
        let rec: Option<JobRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT * FROM jobs WHERE key = $1")
                .bind(key)
                .fetch_optional(p)
                .await?
        });
        rec.map(Job::try_from).transpose()
    }

    /// The jobs with these keys, in no particular order; keys without a job are left out.
    pub async fn job_get_many(&self, keys: &[&str]) -> Result<Vec<Job>> {
        let mut recs: Vec<JobRecord> = Vec::with_capacity(keys.len());
        on_backend!(self, |p, _d| {
            for chunk in keys.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new("SELECT * FROM jobs WHERE key IN (");
                let mut list = qb.separated(", ");
                for key in chunk {
                    list.push_bind(*key);
                }
                qb.push(")");
                recs.extend(qb.build_query_as::<JobRecord>().fetch_all(p).await?);
            }
        });
        recs.into_iter().map(Job::try_from).collect()
    }

    /// Jobs newest first, filtered by state and report.
    pub async fn job_list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let limit = i64::from(filter.limit.unwrap_or(1000));
        let recs: Vec<JobRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT * FROM jobs WHERE ($1 IS NULL OR state = $1) AND ($2 IS NULL OR report = $2)
                 ORDER BY local_date DESC, report, key LIMIT $3",
            )
            .bind(filter.state.map(JobState::as_str))
            .bind(filter.report.as_deref())
            .bind(limit)
            .fetch_all(p)
            .await?
        });
        recs.into_iter().map(Job::try_from).collect()
    }

    /// How many jobs are in each state.
    pub async fn job_count_by_state(&self) -> Result<Vec<(JobState, i64)>> {
        let rows: Vec<(String, i64)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")
                .fetch_all(p)
                .await?
        });
        rows.into_iter()
            .map(|(s, n)| Ok((JobState::parse(&s)?, n)))
            .collect()
    }

    /// How many deliveries are in each state.
    pub async fn delivery_count_by_state(&self) -> Result<Vec<(DeliveryState, i64)>> {
        let rows: Vec<(String, i64)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT state, COUNT(*) FROM deliveries GROUP BY state ORDER BY state")
                .fetch_all(p)
                .await?
        });
        rows.into_iter()
            .map(|(s, n)| Ok((DeliveryState::parse(&s)?, n)))
            .collect()
    }

    /// The `ready_at` of the oldest ready job that is due at `now`.
    pub async fn job_oldest_ready(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let row: (Option<i64>,) = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT MIN(ready_at) FROM jobs WHERE state = 'ready' AND ready_at <= $1",
            )
            .bind(to_millis(now))
            .fetch_one(p)
            .await?
        });
        Ok(row.0.map(crate::clock::from_millis))
    }

    /// True when the ledger answers and its tables exist (migrations applied).
    pub async fn ready(&self) -> bool {
        on_backend!(self, |p, _d| {
            sqlx::query("SELECT COUNT(*) FROM jobs WHERE key = ''")
                .execute(p)
                .await
                .is_ok()
                && sqlx::query("SELECT COUNT(*) FROM ingest_events WHERE webhook_id = ''")
                    .execute(p)
                    .await
                    .is_ok()
        })
    }

    /// A signed run request: records its webhook-id and inserts its job in one transaction.
    /// A webhook-id seen before returns the job it made; an existing job key is not inserted
    /// again.
    pub async fn ingest_run(
        &self,
        webhook_id: &str,
        job: &NewJob,
        now: DateTime<Utc>,
    ) -> Result<IngestOutcome> {
        let now_ms = to_millis(now);
        let key = job.key.to_string();
        on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            let claimed: Option<(String,)> = sqlx::query_as(
                "INSERT INTO ingest_events (webhook_id, job_key, received_at) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING RETURNING job_key",
            )
            .bind(webhook_id)
            .bind(&key)
            .bind(now_ms)
            .fetch_optional(&mut *tx)
            .await?;
            if claimed.is_none() {
                tx.rollback().await?;
                let (job_key,): (String,) =
                    sqlx::query_as("SELECT job_key FROM ingest_events WHERE webhook_id = $1")
                        .bind(webhook_id)
                        .fetch_one(p)
                        .await?;
                return Ok(IngestOutcome {
                    job_key,
                    created: false,
                    replayed: true,
                });
            }
            let created: Option<(String,)> = sqlx::query_as(
                "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at, created_at, updated_at)
                 VALUES ($1, $2, $3, 'ready', $4, $5, $6, $7, $8, $9, $9)
                 ON CONFLICT DO NOTHING RETURNING key",
            )
            .bind(&key)
            .bind(job.key.report().as_str())
            .bind(job.key.date().format("%Y-%m-%d").to_string())
            .bind(job.origin.as_str())
            .bind(to_millis(job.fire_at))
            .bind(to_millis(job.window.start))
            .bind(to_millis(job.window.end))
            .bind(to_millis(job.ready_at))
            .bind(now_ms)
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(IngestOutcome {
                job_key: key,
                created: created.is_some(),
                replayed: false,
            })
        })
    }

    /// Leases up to `limit` ready jobs whose `ready_at` has come: `ready → rendering`.
    pub async fn job_lease(&self, params: &LeaseParams) -> Result<Vec<LeasedJob>> {
        let recs: Vec<JobRecord> = self.claim(Queue::Jobs, params).await?;
        let mut out: Vec<LeasedJob> = recs
            .into_iter()
            .map(|r| {
                let job = Job::try_from(r)?;
                Ok(LeasedJob {
                    lease: Lease {
                        key: job.key.clone(),
                        token: job.lease_token,
                        owner: params.owner.clone(),
                        expires_at: crate::clock::add(params.now, params.lease_for),
                    },
                    job,
                })
            })
            .collect::<Result<_>>()?;
        out.sort_by(|a, b| (a.job.ready_at, &a.job.key).cmp(&(b.job.ready_at, &b.job.key)));
        Ok(out)
    }

    /// Pushes a job lease's deadline to `until`, if the lease is still held.
    pub async fn job_extend_lease(&self, lease: &Lease, until: DateTime<Utc>) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE jobs SET lease_expires_at = $1 WHERE key = $2 AND state = 'rendering' AND lease_token = $3",
            )
            .bind(to_millis(until))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// `rendering → ready` at `ready_at`, after a transient render failure.
    pub async fn job_retry(
        &self,
        lease: &Lease,
        ready_at: DateTime<Utc>,
        error: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE jobs SET state = 'ready', ready_at = $1, last_error = $2, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = $3
                 WHERE key = $4 AND state = 'rendering' AND lease_token = $5",
            )
            .bind(to_millis(ready_at))
            .bind(error)
            .bind(to_millis(now))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// `rendering → ready` without counting the attempt: the worker is shutting down.
    pub async fn job_release(&self, lease: &Lease, now: DateTime<Utc>) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE jobs SET state = 'ready', attempts = attempts - 1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = $1
                 WHERE key = $2 AND state = 'rendering' AND lease_token = $3",
            )
            .bind(to_millis(now))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// `rendering → quarantined`: a permanent render failure or an exhausted budget.
    pub async fn job_quarantine(
        &self,
        lease: &Lease,
        error: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE jobs SET state = 'quarantined', last_error = $1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = $2, terminal_at = $2
                 WHERE key = $3 AND state = 'rendering' AND lease_token = $4",
            )
            .bind(error)
            .bind(to_millis(now))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// `rendering → delivering`: records the artifact and creates one delivery per destination,
    /// in one transaction. A job without destinations is `done` at once.
    pub async fn job_rendered(
        &self,
        lease: &Lease,
        artifact: &ArtifactRef,
        deliveries: &[NewDelivery],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let one = [Render {
            lease: lease.clone(),
            artifact: artifact.clone(),
            deliveries: deliveries.to_vec(),
        }];
        self.job_rendered_many(&one, now)
            .await?
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Records many renders in one transaction (one commit), each as [`Ledger::job_rendered`]
    /// would. Returns one result per render, in order: `LeaseLost` for a lease no longer held
    /// (that render changes nothing; the others still record). An `Err` of the whole call means
    /// nothing was recorded.
    pub async fn job_rendered_many(
        &self,
        renders: &[Render],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<()>>> {
        if renders.is_empty() {
            return Ok(Vec::new());
        }
        let now_ms = to_millis(now);
        let mut held = Vec::with_capacity(renders.len());
        on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            for r in renders {
                let next_state = if r.deliveries.is_empty() {
                    "done"
                } else {
                    "delivering"
                };
                let n = sqlx::query(
                    "UPDATE jobs SET state = $1, artifact_key = $2, artifact_text_key = $3, artifact_sha256 = $4,
                            artifact_bytes = $5, artifact_deleted_at = NULL, last_error = NULL, lease_owner = NULL, lease_expires_at = NULL,
                            updated_at = $6, terminal_at = CASE WHEN $1 = 'done' THEN $6 ELSE NULL END
                     WHERE key = $7 AND state = 'rendering' AND lease_token = $8",
                )
                .bind(next_state)
                .bind(&r.artifact.html_key)
                .bind(&r.artifact.text_key)
                .bind(&r.artifact.sha256)
                .bind(r.artifact.bytes)
                .bind(now_ms)
                .bind(&r.lease.key)
                .bind(r.lease.token)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                held.push(fenced(n, &r.lease));
            }
            let new: Vec<(&str, &NewDelivery)> = renders
                .iter()
                .zip(&held)
                .filter(|(_, h)| h.is_ok())
                .flat_map(|(r, _)| r.deliveries.iter().map(|dl| (r.lease.key.as_str(), dl)))
                .collect();
            for chunk in new.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO deliveries (key, job_key, kind, destination, state, ready_at, created_at, updated_at) ",
                );
                qb.push_values(chunk, |mut b, (job, dl)| {
                    b.push_bind(&dl.key)
                        .push_bind(*job)
                        .push_bind(dl.kind.as_str())
                        .push_bind(&dl.destination)
                        .push_bind("pending")
                        .push_bind(now_ms)
                        .push_bind(now_ms)
                        .push_bind(now_ms);
                });
                qb.push(" ON CONFLICT DO NOTHING");
                qb.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
        });
        Ok(held)
    }

    /// `delivering → done` when every delivery is sent, `delivering → quarantined` when every
    /// delivery is terminal and one is quarantined. Returns the job's state afterwards.
    pub async fn job_settle(&self, key: &str, now: DateTime<Utc>) -> Result<JobState> {
        self.job_settle_many(&[key], now).await?;
        self.job_get(key)
            .await?
            .map(|j| j.state)
            .ok_or_else(|| LedgerError::NotFound {
                what: "job",
                key: key.to_string(),
            })
    }

    /// [`Ledger::job_settle`] for many jobs in one statement; returns how many it settled.
    /// The state tests are written `(…) IS TRUE`, which no index serves, so the plan looks the
    /// jobs up by key and their deliveries by job whatever the statistics say: right after a
    /// burst of jobs PostgreSQL's statistics are stale, and it scanned every delivering job
    /// and every pending delivery on each settle instead.
    /// Run it after the finishes it follows have committed: a settle inside the same
    /// transaction would not see another worker's concurrent last finish, and neither would
    /// settle the job.
    pub async fn job_settle_many(&self, keys: &[&str], now: DateTime<Utc>) -> Result<u64> {
        let now_ms = to_millis(now);
        let mut settled = 0;
        on_backend!(self, |p, _d| {
            for chunk in keys.chunks(500) {
                let mut qb = sqlx::QueryBuilder::new(
                    "UPDATE jobs SET
                        state = CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = jobs.key AND (d.state = 'quarantined') IS TRUE)
                                     THEN 'quarantined' ELSE 'done' END,
                        updated_at = ",
                );
                qb.push_bind(now_ms)
                    .push(", terminal_at = ")
                    .push_bind(now_ms)
                    .push(
                        " WHERE (state = 'delivering') IS TRUE
                       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_key = jobs.key AND (d.state IN ('pending', 'sending')) IS TRUE)
                       AND key IN (",
                    );
                let mut list = qb.separated(", ");
                for key in chunk {
                    list.push_bind(*key);
                }
                qb.push(")");
                settled += qb.build().execute(p).await?.rows_affected();
            }
        });
        Ok(settled)
    }

    /// `ready | quarantined → cancelled`, by an operator; deliveries still waiting (a job
    /// redriven to render again) are closed as quarantined "the job was cancelled".
    pub async fn job_cancel(&self, key: &str, now: DateTime<Utc>) -> Result<()> {
        let now_ms = to_millis(now);
        let n = on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            let n = sqlx::query(
                "UPDATE jobs SET state = 'cancelled', updated_at = $1, terminal_at = $1
                 WHERE key = $2 AND state IN ('ready', 'quarantined')",
            )
            .bind(now_ms)
            .bind(key)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 0 {
                tx.rollback().await?;
                return Err(self.wrong_job_state(key, "ready or quarantined").await);
            }
            // A job redriven to render again has its deliveries waiting: they close with it,
            // or they would wait forever (and keep the job from retention).
            sqlx::query(
                "UPDATE deliveries SET state = 'quarantined', last_error = 'the job was cancelled',
                        updated_at = $1, terminal_at = $1
                 WHERE job_key = $2 AND state = 'pending'",
            )
            .bind(now_ms)
            .bind(key)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            n
        });
        if n == 1 {
            return Ok(());
        }
        Err(self.wrong_job_state(key, "ready or quarantined").await)
    }

    /// Redrives a quarantined job with an audit row. A job quarantined at render, or whose
    /// artifact retention already deleted, goes back to `ready` (to render); a job with quarantined
    /// deliveries goes back to `delivering` (or `ready`) and those deliveries to `pending`. Keys stay the same; `redrive_count` grows by one.
    pub async fn job_redrive(
        &self,
        key: &str,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<RedriveOutcome> {
        let now_ms = to_millis(now);
        let outcome = on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            let n = sqlx::query(
                "UPDATE jobs SET
                    state = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                                 THEN 'ready' ELSE 'delivering' END,
                    ready_at = $1, redrive_count = redrive_count + 1, attempts = 0, last_error = NULL,
                    updated_at = $1, terminal_at = NULL
                 WHERE key = $2 AND state = 'quarantined'",
            )
            .bind(now_ms)
            .bind(key)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 0 {
                tx.rollback().await?;
                None
            } else {
                let deliveries = sqlx::query(
                    "UPDATE deliveries SET state = 'pending', ready_at = $1, budget_attempts = attempts, budget_since = $1,
                            redrive_count = redrive_count + 1, updated_at = $1, terminal_at = NULL
                     WHERE job_key = $2 AND state = 'quarantined'",
                )
                .bind(now_ms)
                .bind(key)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query("INSERT INTO redrives (job_key, delivery_key, redriven_by, reason, at) VALUES ($1, NULL, $2, $3, $4)")
                    .bind(key)
                    .bind(by)
                    .bind(reason)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Some(RedriveOutcome {
                    job_key: key.to_string(),
                    deliveries,
                })
            }
        });
        match outcome {
            Some(o) => Ok(o),
            None => Err(self.wrong_job_state(key, "quarantined").await),
        }
    }

    async fn wrong_job_state(&self, key: &str, expected: &'static str) -> LedgerError {
        match self.job_get(key).await {
            Ok(Some(job)) => LedgerError::WrongState {
                what: "job",
                key: key.to_string(),
                expected,
                actual: job.state.as_str().to_string(),
            },
            Ok(None) => LedgerError::NotFound {
                what: "job",
                key: key.to_string(),
            },
            Err(e) => e,
        }
    }

    // ---------------------------------------------------------- deliveries

    pub async fn delivery_get(&self, key: &str) -> Result<Option<Delivery>> {
        let rec: Option<DeliveryRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT * FROM deliveries WHERE key = $1")
                .bind(key)
                .fetch_optional(p)
                .await?
        });
        rec.map(Delivery::try_from).transpose()
    }

    pub async fn delivery_list(&self, job_key: &str) -> Result<Vec<Delivery>> {
        let recs: Vec<DeliveryRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT * FROM deliveries WHERE job_key = $1 ORDER BY key")
                .bind(job_key)
                .fetch_all(p)
                .await?
        });
        recs.into_iter().map(Delivery::try_from).collect()
    }

    /// Every quarantined delivery, oldest first.
    pub async fn delivery_list_quarantined(&self, limit: u32) -> Result<Vec<Delivery>> {
        let recs: Vec<DeliveryRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT * FROM deliveries WHERE state = 'quarantined' ORDER BY updated_at, key LIMIT $1")
                .bind(i64::from(limit))
                .fetch_all(p)
                .await?
        });
        recs.into_iter().map(Delivery::try_from).collect()
    }

    /// Leases up to `limit` pending deliveries whose `ready_at` has come: `pending → sending`.
    /// The lease counts as an attempt; [`Ledger::delivery_release`] gives it back.
    pub async fn delivery_lease(&self, params: &LeaseParams) -> Result<Vec<LeasedDelivery>> {
        let recs: Vec<DeliveryRecord> = self.claim(Queue::Deliveries, params).await?;
        let deliveries: Vec<Delivery> = recs
            .into_iter()
            .map(Delivery::try_from)
            .collect::<Result<_>>()?;
        let job_keys: std::collections::BTreeSet<&str> =
            deliveries.iter().map(|d| d.job_key.as_str()).collect();
        let jobs: HashMap<String, std::sync::Arc<Job>> = self
            .job_get_many(&job_keys.into_iter().collect::<Vec<_>>())
            .await?
            .into_iter()
            .map(|j| (j.key.clone(), std::sync::Arc::new(j)))
            .collect();
        let mut out: Vec<LeasedDelivery> = deliveries
            .into_iter()
            .map(|delivery| LeasedDelivery {
                lease: Lease {
                    key: delivery.key.clone(),
                    token: delivery.lease_token,
                    owner: params.owner.clone(),
                    expires_at: crate::clock::add(params.now, params.lease_for),
                },
                job: jobs.get(&delivery.job_key).cloned(),
                delivery,
            })
            .collect();
        out.sort_by(|a, b| {
            (a.delivery.ready_at, &a.delivery.key).cmp(&(b.delivery.ready_at, &b.delivery.key))
        });
        Ok(out)
    }

    pub async fn delivery_extend_lease(&self, lease: &Lease, until: DateTime<Utc>) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE deliveries SET lease_expires_at = $1 WHERE key = $2 AND state = 'sending' AND lease_token = $3",
            )
            .bind(to_millis(until))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// Records one attempt and its consequence in one transaction: `sending → sent`,
    /// `sending → pending` (at `ready_at`) or `sending → quarantined`.
    pub async fn delivery_finish(
        &self,
        lease: &Lease,
        attempt: &NewAttempt,
        next: DeliveryNext,
    ) -> Result<()> {
        let one = [Finish {
            lease: lease.clone(),
            attempt: attempt.clone(),
            next,
        }];
        self.delivery_finish_many(&one)
            .await?
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Records many attempts and their consequences in one transaction (one commit), each as
    /// [`Ledger::delivery_finish`] would. Returns one result per finish, in order: `LeaseLost`
    /// for a lease no longer held (that finish changes nothing; the others still record). An
    /// `Err` of the whole call means nothing was recorded.
    pub async fn delivery_finish_many(&self, finishes: &[Finish]) -> Result<Vec<Result<()>>> {
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        // Attempt numbers by (key, token) of the finishes whose lease still held.
        let mut numbers: HashMap<(String, i64), i64> = HashMap::with_capacity(finishes.len());
        on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            // 8 binds a row in the update, 10 in the insert: 200 rows stay far below both
            // backends' bind limits.
            for chunk in finishes.chunks(200) {
                let mut qb = sqlx::QueryBuilder::new(
                    "WITH v (key, token, state, ready_at, class, error, finished, terminal) AS (",
                );
                qb.push_values(chunk, |mut b, f| {
                    let (state, ready_at, terminal) = finish_columns(f);
                    b.push_bind(&f.lease.key)
                        .push_bind(f.lease.token)
                        .push_bind(state)
                        .push_bind(ready_at)
                        .push_bind(f.attempt.class.as_str())
                        // A delivery's last error is the reason of its last failed attempt.
                        .push_bind(
                            f.attempt
                                .reason
                                .as_deref()
                                .filter(|_| f.next != DeliveryNext::Sent),
                        )
                        .push_bind(to_millis(f.attempt.finished_at))
                        .push_bind(terminal);
                });
                qb.push(
                    ") UPDATE deliveries SET state = v.state, ready_at = COALESCE(v.ready_at, deliveries.ready_at),
                            last_class = v.class, last_error = v.error, lease_owner = NULL, lease_expires_at = NULL,
                            updated_at = v.finished, terminal_at = v.terminal
                     FROM v
                     WHERE deliveries.key = v.key AND deliveries.state = 'sending' AND deliveries.lease_token = v.token
                     RETURNING deliveries.key, deliveries.lease_token, deliveries.attempts",
                );
                let rows: Vec<(String, i64, i64)> = qb.build_query_as().fetch_all(&mut *tx).await?;
                numbers.extend(rows.into_iter().map(|(k, t, n)| ((k, t), n)));
                let recorded: Vec<(&Finish, i64)> = chunk
                    .iter()
                    .filter_map(|f| {
                        numbers
                            .get(&(f.lease.key.clone(), f.lease.token))
                            .map(|n| (f, *n))
                    })
                    .collect();
                if recorded.is_empty() {
                    continue;
                }
                let mut qb = sqlx::QueryBuilder::new(
                    "INSERT INTO delivery_attempts (delivery_key, attempt, requested_at, finished_at, class, code,
                            retry_after_ms, next_ready_at, reason, diagnostics) ",
                );
                qb.push_values(recorded, |mut b, (f, number)| {
                    let (_, ready_at, _) = finish_columns(f);
                    b.push_bind(&f.lease.key)
                        .push_bind(number)
                        .push_bind(to_millis(f.attempt.requested_at))
                        .push_bind(to_millis(f.attempt.finished_at))
                        .push_bind(f.attempt.class.as_str())
                        .push_bind(f.attempt.code)
                        .push_bind(f.attempt.retry_after.map(|d| d.num_milliseconds()))
                        .push_bind(ready_at)
                        .push_bind(f.attempt.reason.as_deref())
                        .push_bind(f.attempt.diagnostics.as_deref());
                });
                qb.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
        });
        Ok(finishes
            .iter()
            .map(|f| {
                if numbers.contains_key(&(f.lease.key.clone(), f.lease.token)) {
                    Ok(())
                } else {
                    Err(LedgerError::LeaseLost {
                        key: f.lease.key.clone(),
                        token: f.lease.token,
                    })
                }
            })
            .collect())
    }

    /// `sending → pending` without counting an attempt: the worker is draining for shutdown.
    pub async fn delivery_release(&self, lease: &Lease, now: DateTime<Utc>) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE deliveries SET state = 'pending', attempts = attempts - 1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = $1
                 WHERE key = $2 AND state = 'sending' AND lease_token = $3",
            )
            .bind(to_millis(now))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// `sending → pending` at `ready_at` without counting an attempt: the pool leased work for a
    /// host that is paused (a receiver asked to wait), so the work waits for the pause to end.
    pub async fn delivery_defer(
        &self,
        lease: &Lease,
        ready_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let n = on_backend!(self, |p, _d| {
            sqlx::query(
                "UPDATE deliveries SET state = 'pending', attempts = attempts - 1, ready_at = $1, lease_owner = NULL,
                        lease_expires_at = NULL, updated_at = $2
                 WHERE key = $3 AND state = 'sending' AND lease_token = $4",
            )
            .bind(to_millis(ready_at))
            .bind(to_millis(now))
            .bind(&lease.key)
            .bind(lease.token)
            .execute(p)
            .await?
            .rows_affected()
        });
        fenced(n, lease)
    }

    /// Redrives one quarantined delivery with an audit row; its job returns to `delivering`, or
    /// to `ready` to render again when retention deleted its artifact.
    pub async fn delivery_redrive(
        &self,
        key: &str,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<RedriveOutcome> {
        let now_ms = to_millis(now);
        let job_key: Option<String> = on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            // The job's row first, as retention takes it: the two never wait on each other
            // in opposite orders.
            if let (Some(lock), Some(job)) = (d::LOCK_JOB, key.split('/').next()) {
                sqlx::query(lock).bind(job).execute(&mut *tx).await?;
            }
            let row: Option<(String,)> = sqlx::query_as(
                "UPDATE deliveries SET state = 'pending', ready_at = $1, budget_attempts = attempts, budget_since = $1,
                        redrive_count = redrive_count + 1, updated_at = $1, terminal_at = NULL
                 WHERE key = $2 AND state = 'quarantined' RETURNING job_key",
            )
            .bind(now_ms)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
            match row {
                None => {
                    tx.rollback().await?;
                    None
                }
                Some((job_key,)) => {
                    // A job whose artifact retention deleted renders again first (the same
                    // bytes: see `generated_at`); its redriven delivery waits for that.
                    sqlx::query(
                        "UPDATE jobs SET
                            state = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                                         THEN 'ready' ELSE 'delivering' END,
                            ready_at = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                                            THEN $1 ELSE ready_at END,
                            redrive_count = redrive_count + 1, updated_at = $1, terminal_at = NULL
                         WHERE key = $2 AND state IN ('quarantined', 'done', 'delivering')",
                    )
                    .bind(now_ms)
                    .bind(&job_key)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query("INSERT INTO redrives (job_key, delivery_key, redriven_by, reason, at) VALUES ($1, $2, $3, $4, $5)")
                        .bind(&job_key)
                        .bind(key)
                        .bind(by)
                        .bind(reason)
                        .bind(now_ms)
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    Some(job_key)
                }
            }
        });
        match job_key {
            Some(job_key) => Ok(RedriveOutcome {
                job_key,
                deliveries: 1,
            }),
            None => match self.delivery_get(key).await? {
                Some(dl) => Err(LedgerError::WrongState {
                    what: "delivery",
                    key: key.to_string(),
                    expected: "quarantined",
                    actual: dl.state.as_str().to_string(),
                }),
                None => Err(LedgerError::NotFound {
                    what: "delivery",
                    key: key.to_string(),
                }),
            },
        }
    }

    /// Every attempt's duration from lease to result, in milliseconds (for benchmarks).
    pub async fn attempt_latencies_ms(&self) -> Result<Vec<i64>> {
        let rows: Vec<(i64,)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT finished_at - requested_at FROM delivery_attempts")
                .fetch_all(p)
                .await?
        });
        Ok(rows.into_iter().map(|(ms,)| ms).collect())
    }

    /// Attempts by response class (for benchmarks and diagnostics).
    pub async fn attempt_count_by_class(&self) -> Result<Vec<(String, i64)>> {
        Ok(on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT class, COUNT(*) FROM delivery_attempts GROUP BY class ORDER BY class",
            )
            .fetch_all(p)
            .await?
        }))
    }

    pub async fn attempt_list(&self, delivery_key: &str) -> Result<Vec<Attempt>> {
        let recs: Vec<AttemptRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT * FROM delivery_attempts WHERE delivery_key = $1 ORDER BY attempt",
            )
            .bind(delivery_key)
            .fetch_all(p)
            .await?
        });
        recs.into_iter().map(Attempt::try_from).collect()
    }

    pub async fn redrive_list(&self, job_key: &str) -> Result<Vec<Redrive>> {
        let recs: Vec<RedriveRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT * FROM redrives WHERE job_key = $1 ORDER BY at, id")
                .bind(job_key)
                .fetch_all(p)
                .await?
        });
        Ok(recs.into_iter().map(Redrive::from).collect())
    }

    // -------------------------------------------------------------- leases

    /// Runs the lease statement of `queue`, after the dialect's `LEASE_PLAN` if it has one.
    async fn claim<R>(&self, queue: Queue, params: &LeaseParams) -> Result<Vec<R>>
    where
        R: Send
            + Unpin
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    {
        let (expires, now) = lease_binds(params);
        Ok(on_backend!(self, |p, d| {
            let sql = match queue {
                Queue::Jobs => d::JOB_LEASE,
                Queue::Deliveries => d::DELIVERY_LEASE,
            };
            let lease = sqlx::query_as(sql)
                .bind(&params.owner)
                .bind(expires)
                .bind(now)
                .bind(i64::from(params.limit));
            match d::LEASE_PLAN {
                None => lease.fetch_all(p).await?,
                Some(plan) => {
                    let mut tx = p.begin_with(d::BEGIN).await?;
                    sqlx::query(plan).execute(&mut *tx).await?;
                    let recs = lease.fetch_all(&mut *tx).await?;
                    tx.commit().await?;
                    recs
                }
            }
        }))
    }

    // ------------------------------------------------------------ schedule

    pub async fn schedule_last_tick(&self, report: &str) -> Result<Option<DateTime<Utc>>> {
        let row: Option<(i64,)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT last_tick_at FROM schedule_state WHERE report = $1")
                .bind(report)
                .fetch_optional(p)
                .await?
        });
        Ok(row.map(|(ms,)| crate::clock::from_millis(ms)))
    }

    /// Records a tick; never moves a report's last tick backwards.
    pub async fn schedule_record_tick(&self, report: &str, at: DateTime<Utc>) -> Result<()> {
        on_backend!(self, |p, _d| {
            sqlx::query(
                "INSERT INTO schedule_state (report, last_tick_at) VALUES ($1, $2)
                 ON CONFLICT (report) DO UPDATE SET last_tick_at =
                    CASE WHEN excluded.last_tick_at > schedule_state.last_tick_at
                         THEN excluded.last_tick_at ELSE schedule_state.last_tick_at END",
            )
            .bind(report)
            .bind(to_millis(at))
            .execute(p)
            .await?;
        });
        Ok(())
    }
}

/// What a lease claims.
#[derive(Debug, Clone, Copy)]
enum Queue {
    Jobs,
    Deliveries,
}

fn lease_binds(params: &LeaseParams) -> (i64, i64) {
    (
        to_millis(crate::clock::add(params.now, params.lease_for)),
        to_millis(params.now),
    )
}

/// The delivery columns a finish sets: state, the next `ready_at` (retries only) and
/// `terminal_at` (sent or quarantined), in milliseconds.
fn finish_columns(f: &Finish) -> (&'static str, Option<i64>, Option<i64>) {
    let finished = to_millis(f.attempt.finished_at);
    match f.next {
        DeliveryNext::Sent => ("sent", None, Some(finished)),
        DeliveryNext::Retry { ready_at } => ("pending", Some(to_millis(ready_at)), None),
        DeliveryNext::Quarantine => ("quarantined", None, Some(finished)),
    }
}

fn fenced(rows: u64, lease: &Lease) -> Result<()> {
    if rows == 1 {
        Ok(())
    } else {
        Err(LedgerError::LeaseLost {
            key: lease.key.clone(),
            token: lease.token,
        })
    }
}

/// What a lease asks for.
#[derive(Debug, Clone)]
pub struct LeaseParams {
    pub owner: String,
    pub now: DateTime<Utc>,
    pub lease_for: Duration,
    pub limit: u32,
}
