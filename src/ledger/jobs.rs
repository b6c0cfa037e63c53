//! Jobs: insert, read, the outcomes of a render, settle, cancel and redrive.

use super::handles::Jobs;
use crate::report::artifact::ArtifactRef;
use chrono::{DateTime, Utc};

use super::PerBackend;
use super::audit::audit_row;
use super::backend::tx::{Statement, Tx};
use super::types::parse_key;
use super::{
    Arg, Audit, Job, JobLease, JobRecord, JobState, Ledger, LedgerError, NewDelivery, NewJob,
    RedriveOutcome, Render, Result,
};
use crate::domain::clock::to_millis;
use crate::domain::keys::JobKey;

/// Inserts jobs from parallel arrays (key, report, local date, origin, fire_at, window start
/// and end, ready_at), created at `$9`; returns the keys it inserted. PostgreSQL plans the
/// eight array binds once, whatever the batch's size.
const JOB_INSERT_MANY_PG: &str = "INSERT INTO jobs
        (key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at, created_at, updated_at)
    SELECT k, r, d, 'ready', o, f, ws, we, ra, $9, $9
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[], $8::int8[])
        AS t(k, r, d, o, f, ws, we, ra)
    ON CONFLICT DO NOTHING
    RETURNING key";

/// The head of a multi-row job insert; SQLite takes its rows as a `VALUES` list.
const JOB_INSERT_VALUES: &str = "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at, created_at, updated_at) ";

/// Inserts one job (`$1` key … `$8` ready_at, created at `$9`); returns its key if inserted.
pub(super) const JOB_INSERT_ONE: &str = "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at, created_at, updated_at)
     VALUES ($1, $2, $3, 'ready', $4, $5, $6, $7, $8, $9, $9)
     ON CONFLICT DO NOTHING RETURNING key";

const RENDER_RETRY: &str =
    "UPDATE jobs SET state = 'ready', ready_at = $3, last_error = $4, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

const RENDER_RELEASE: &str =
    "UPDATE jobs SET state = 'ready', attempts = attempts - 1, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $3
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

const RENDER_QUARANTINE: &str =
    "UPDATE jobs SET state = 'quarantined', last_error = $3, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $4, terminal_at = $4
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

pub(super) const RENDER_SKIP: &str =
    "UPDATE jobs SET state = 'skipped', last_error = $3, format = $4, lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $5, terminal_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

/// What [`SETTLE_KEYED`] shares: a delivering job with no unfinished delivery settles.
const SETTLE_HEAD: &str = sql!(
    "UPDATE jobs
     SET state = CASE WHEN EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                                   AND (d.state = 'quarantined') IS TRUE)
                      THEN 'quarantined' ELSE 'done' END,
         updated_at = $1, terminal_at = $1
     WHERE (state = 'delivering') IS TRUE
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number
                       AND (d.state IN (",
    super::states::DELIVERIES_UNFINISHED,
    ")) IS TRUE)
       AND "
);

/// Settles the delivering jobs among the keys `$2` with nothing left to send, at `$1`: `done`,
/// or `quarantined` when a delivery is. The keys are a JSON array on SQLite, a `text[]` on
/// PostgreSQL. The state tests are `(…) IS TRUE`, which no index serves, so the jobs are found
/// by key and their deliveries probed by job whatever the statistics say.
pub(super) const SETTLE_KEYED: PerBackend = PerBackend {
    sqlite: sql!(SETTLE_HEAD, "key IN (SELECT value FROM json_each($2))"),
    postgres: sql!(SETTLE_HEAD, "key = ANY($2)"),
};

const CANCEL: &str = sql!(
    "UPDATE jobs SET state = 'cancelled', updated_at = $1, terminal_at = $1
     WHERE key = $2 AND state IN (",
    super::states::JOBS_CANCELLABLE,
    ")"
);

/// A job redriven to render again has its deliveries waiting: they close with it, or they
/// would wait forever (and keep the job from retention).
const CANCEL_DELIVERIES: &str =
    "UPDATE deliveries SET state = 'quarantined', last_error = 'the job was cancelled',
        updated_at = $1, terminal_at = $1
     WHERE job_number = (SELECT number FROM jobs WHERE key = $2) AND state = 'pending'";

/// A quarantined job renders again (`ready`) without a live artifact, else delivers again.
const REDRIVE: &str = "UPDATE jobs
     SET state = CASE WHEN artifact_key IS NULL OR artifact_deleted_at IS NOT NULL
                      THEN 'ready' ELSE 'delivering' END,
         ready_at = $1, redrive_count = redrive_count + 1, attempts = 0, last_error = NULL,
         updated_at = $1, terminal_at = NULL
     WHERE key = $2 AND state = 'quarantined'";

/// Quarantined deliveries of a redriven job (`$2`) wait again, with a new budget from `$1`.
pub(super) const REDRIVE_DELIVERIES: &str = "UPDATE deliveries SET state = 'pending', ready_at = $1, budget_attempts = attempts, budget_since = $1,
        redrive_count = redrive_count + 1, updated_at = $1, terminal_at = NULL
     WHERE job_number = (SELECT number FROM jobs WHERE key = $2) AND state = 'quarantined'";

impl Ledger {
    /// Why a transition of job `key` that expected `expected` changed nothing.
    pub(super) async fn wrong_job_state(
        &self,
        key: &JobKey,
        expected: &'static str,
    ) -> LedgerError {
        match self.jobs().get(key).await {
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
}

/// The columns of one new job, as every job insert binds them (both backends' batches and
/// ingest's single insert).
pub(super) struct JobRow<'a> {
    pub key: String,
    pub report: String,
    pub date: String,
    pub origin: &'a str,
    pub fire: i64,
    pub start: i64,
    pub end: i64,
    pub ready: i64,
}

impl<'a> JobRow<'a> {
    pub(super) fn of(j: &'a NewJob) -> JobRow<'a> {
        JobRow {
            key: j.key.to_string(),
            report: j.key.report().to_string(),
            date: crate::domain::keys::IsoDate(j.key.date()).to_string(),
            origin: j.origin.as_str(),
            fire: to_millis(j.fire_at),
            start: to_millis(j.window.start),
            end: to_millis(j.window.end),
            ready: to_millis(j.ready_at),
        }
    }
}

/// A chunk of new jobs as the parallel arrays PostgreSQL's `UNNEST` insert binds.
#[derive(Default)]
struct InsertColumns<'a> {
    key: Vec<String>,
    report: Vec<String>,
    date: Vec<String>,
    origin: Vec<&'a str>,
    fire: Vec<i64>,
    start: Vec<i64>,
    end: Vec<i64>,
    ready: Vec<i64>,
}

impl<'a> InsertColumns<'a> {
    fn of(jobs: &'a [NewJob]) -> InsertColumns<'a> {
        let mut c = InsertColumns::default();
        for r in jobs.iter().map(JobRow::of) {
            c.key.push(r.key);
            c.report.push(r.report);
            c.date.push(r.date);
            c.origin.push(r.origin);
            c.fire.push(r.fire);
            c.start.push(r.start);
            c.end.push(r.end);
            c.ready.push(r.ready);
        }
        c
    }
}

/// Inserts `jobs` on PostgreSQL inside the caller's transaction: one statement per 10,000 rows,
/// planned once whatever their number. Returns the keys inserted.
pub(super) async fn insert_jobs_pg(
    conn: &mut sqlx::PgConnection,
    jobs: &[NewJob],
    now: DateTime<Utc>,
) -> Result<Vec<JobKey>> {
    let now = to_millis(now);
    let mut inserted = Vec::new();
    for chunk in jobs.chunks(10_000) {
        let cols = InsertColumns::of(chunk);
        let keys: Vec<(String,)> = sqlx::query_as(JOB_INSERT_MANY_PG)
            .bind(cols.key)
            .bind(cols.report)
            .bind(cols.date)
            .bind(cols.origin)
            .bind(cols.fire)
            .bind(cols.start)
            .bind(cols.end)
            .bind(cols.ready)
            .bind(now)
            .fetch_all(&mut *conn)
            .await?;
        for (k,) in keys {
            inserted.push(parse_key(&k)?);
        }
    }
    Ok(inserted)
}

/// Inserts `jobs` on SQLite inside the caller's transaction: 500 rows a statement (11 binds a
/// row, under SQLite's limit of 32,766). Returns the keys inserted.
pub(super) async fn insert_jobs_sqlite(
    conn: &mut sqlx::SqliteConnection,
    jobs: &[NewJob],
    now: DateTime<Utc>,
) -> Result<Vec<JobKey>> {
    let now = to_millis(now);
    let mut inserted = Vec::new();
    for chunk in jobs.chunks(500) {
        let mut qb = sqlx::QueryBuilder::new(JOB_INSERT_VALUES);
        qb.push_values(chunk.iter().map(JobRow::of), |mut b, r| {
            b.push_bind(r.key)
                .push_bind(r.report)
                .push_bind(r.date)
                .push_bind("ready")
                .push_bind(r.origin)
                .push_bind(r.fire)
                .push_bind(r.start)
                .push_bind(r.end)
                .push_bind(r.ready)
                .push_bind(now)
                .push_bind(now);
        });
        qb.push(" ON CONFLICT DO NOTHING RETURNING key");
        let keys: Vec<(String,)> = qb.build_query_as().fetch_all(&mut *conn).await?;
        for (k,) in keys {
            inserted.push(parse_key(&k)?);
        }
    }
    Ok(inserted)
}

/// `ledger.jobs().settle_many` inside `tx`; how many jobs it settled.
pub(super) async fn settle_in(tx: &mut Tx, keys: &[&JobKey], now: DateTime<Utc>) -> Result<u64> {
    tx.execute_keyed(SETTLE_KEYED, to_millis(now), keys).await
}

impl Jobs<'_> {
    /// Inserts jobs whose keys do not exist yet; returns the keys actually inserted. The key
    /// is the table's primary key, so two inserters racing on one key insert it once. One
    /// transaction for the whole batch: one commit (one WAL flush) however many rows.
    pub async fn insert_many(self, jobs: &[NewJob], now: DateTime<Utc>) -> Result<Vec<JobKey>> {
        match &self.backend {
            super::Backend::Postgres(p) => {
                let mut tx = super::backend::postgres::begin(&self, p).await?;
                let inserted = insert_jobs_pg(&mut tx, jobs, now).await?;
                tx.commit().await?;
                Ok(inserted)
            }
            super::Backend::Sqlite(p) => {
                let mut tx = p.begin_with(super::backend::sqlite::BEGIN).await?;
                let inserted = insert_jobs_sqlite(&mut tx, jobs, now).await?;
                tx.commit().await?;
                Ok(inserted)
            }
        }
    }

    pub async fn get(self, key: &JobKey) -> Result<Option<Job>> {
        let sql = "SELECT * FROM jobs WHERE key = $1";
        Ok(self.select::<JobRecord, _, _>(sql, key).await?.pop())
    }

    /// The jobs with these keys, in no particular order; keys without a job are left out.
    pub async fn get_many(self, keys: &[&JobKey]) -> Result<Vec<Job>> {
        let head = "SELECT * FROM jobs WHERE key IN (";
        self.select_by_job_keys::<JobRecord, _>(head, keys).await
    }

    /// How many jobs are in each state.
    pub async fn count_by_state(self) -> Result<Vec<(JobState, i64)>> {
        let sql = "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state";
        self.count_rows_by_state(sql, JobState::parse).await
    }

    /// The `ready_at` of the oldest ready job that is due at `now`.
    pub(crate) async fn oldest_ready(self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
        let row: (Option<i64>,) = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT MIN(ready_at) FROM jobs WHERE state = 'ready' AND ready_at <= $1",
            )
            .bind(to_millis(now))
            .fetch_one(p)
            .await?
        });
        Ok(row.0.map(crate::domain::clock::from_millis))
    }

    /// `rendering → ready` at `ready_at`, after a transient render failure.
    pub async fn retry(
        self,
        lease: &JobLease,
        ready_at: DateTime<Utc>,
        error: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let args = [
            Arg::Int(to_millis(ready_at)),
            Arg::from(Some(error)),
            Arg::Int(to_millis(now)),
        ];
        self.fenced_update(RENDER_RETRY, lease, &args).await
    }

    /// `rendering → ready` without counting the attempt: the worker is shutting down.
    pub async fn release(self, lease: &JobLease, now: DateTime<Utc>) -> Result<()> {
        self.fenced_update(RENDER_RELEASE, lease, &[Arg::Int(to_millis(now))])
            .await
    }

    /// `rendering → quarantined`: a permanent render failure or an exhausted budget.
    pub async fn quarantine(self, lease: &JobLease, error: &str, now: DateTime<Utc>) -> Result<()> {
        let args = [Arg::from(Some(error)), Arg::Int(to_millis(now))];
        self.fenced_update(RENDER_QUARANTINE, lease, &args).await
    }

    /// `rendering → skipped`: nothing to send, and `why`. The job is then in work format
    /// [`super::SKIPPED_FORMAT`], which only nodes that know the state read: the caller skips
    /// only while every live node does (`ledger.nodes().write_format`).
    pub async fn skip(self, lease: &JobLease, why: &str, now: DateTime<Utc>) -> Result<()> {
        let args = [
            Arg::from(Some(why)),
            Arg::Int(super::SKIPPED_FORMAT),
            Arg::Int(to_millis(now)),
        ];
        self.fenced_update(RENDER_SKIP, lease, &args).await
    }

    /// `rendering → delivering`: records the artifact and creates one delivery per destination,
    /// in one transaction. A job without destinations is `done` at once.
    pub async fn rendered(
        self,
        lease: &JobLease,
        artifact: &ArtifactRef,
        deliveries: &[NewDelivery],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let one = [Render {
            lease: lease.clone(),
            artifact: artifact.clone(),
            deliveries: deliveries.to_vec(),
        }];
        self.jobs()
            .rendered_many(&one, now)
            .await?
            .pop()
            .unwrap_or(Ok(()))
    }

    /// Records many renders in one transaction (one commit), each as `ledger.jobs().rendered`
    /// would. Returns one result per render, in order: `LeaseLost` for a lease no longer held
    /// (that render changes nothing; the others still record). An `Err` of the whole call means
    /// nothing was recorded.
    pub async fn rendered_many(
        self,
        renders: &[Render],
        now: DateTime<Utc>,
    ) -> Result<Vec<Result<()>>> {
        let outcomes = super::GroupCommit {
            renders,
            finishes: &[],
            settle: &[],
            lease_to: None,
            claim: None,
            now,
        };
        let recorded = self.commit_group(outcomes).await?.renders;
        Ok(recorded.into_iter().map(|r| r.map(drop)).collect())
    }

    /// `delivering → done` when every delivery is sent, `delivering → quarantined` when every
    /// delivery is terminal and one is quarantined. Returns the job's state afterwards.
    pub async fn settle(self, key: &JobKey, now: DateTime<Utc>) -> Result<JobState> {
        self.jobs().settle_many(&[key], now).await?;
        self.jobs()
            .get(key)
            .await?
            .map(|j| j.state)
            .ok_or_else(|| LedgerError::NotFound {
                what: "job",
                key: key.to_string(),
            })
    }

    /// `ledger.jobs().settle` for many jobs in one statement; returns how many it settled.
    /// The state tests are written `(…) IS TRUE`, which no index serves, so the plan looks the
    /// jobs up by key and their deliveries by job whatever the statistics say: right after a
    /// burst of jobs PostgreSQL's statistics are stale, and it scanned every delivering job
    /// and every pending delivery on each settle instead.
    /// Run it after the finishes it follows have committed: a settle inside the same
    /// transaction would not see another worker's concurrent last finish, and neither would
    /// settle the job.
    pub async fn settle_many(self, keys: &[&JobKey], now: DateTime<Utc>) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        self.within(async |tx| settle_in(tx, keys, now).await).await
    }

    /// `ready | waiting | quarantined → cancelled`, by an operator; deliveries still waiting (a job
    /// redriven to render again) are closed as quarantined "the job was cancelled". Audited.
    pub async fn cancel(self, key: &JobKey, audit: &Audit<'_>, now: DateTime<Utc>) -> Result<()> {
        let now_ms = to_millis(now);
        let job = key.to_string();
        let cancelled = self
            .within(async |tx| {
                let st = Statement::new(CANCEL).bind(now_ms).bind(key);
                if tx.execute(&st).await? != 1 {
                    return Ok(false);
                }
                let deliveries = Statement::new(CANCEL_DELIVERIES).bind(now_ms).bind(key);
                tx.execute(&deliveries).await?;
                tx.execute(&audit_row(&job, None, audit, "cancel", now_ms))
                    .await?;
                Ok(true)
            })
            .await?;
        match cancelled {
            true => Ok(()),
            false => Err(self
                .wrong_job_state(key, "ready, waiting or quarantined")
                .await),
        }
    }

    /// Redrives a quarantined job with an audit row. A job quarantined at render, or whose
    /// artifact retention already deleted, goes back to `ready` (to render); a job with
    /// quarantined deliveries goes back to `delivering` (or `ready`) and those deliveries to
    /// `pending`. Keys stay the same; `redrive_count` grows by one.
    pub async fn redrive(
        self,
        key: &JobKey,
        audit: &Audit<'_>,
        now: DateTime<Utc>,
    ) -> Result<RedriveOutcome> {
        let now_ms = to_millis(now);
        let job = key.to_string();
        let redriven = self
            .within(async |tx| {
                let st = Statement::new(REDRIVE).bind(now_ms).bind(key);
                if tx.execute(&st).await? == 0 {
                    return Ok(None);
                }
                let deliveries = Statement::new(REDRIVE_DELIVERIES).bind(now_ms).bind(key);
                let deliveries = tx.execute(&deliveries).await?;
                tx.execute(&audit_row(&job, None, audit, "redrive", now_ms))
                    .await?;
                Ok(Some(deliveries))
            })
            .await?;
        match redriven {
            Some(deliveries) => Ok(RedriveOutcome {
                job_key: key.clone(),
                deliveries,
            }),
            None => Err(self.wrong_job_state(key, "quarantined").await),
        }
    }
}
