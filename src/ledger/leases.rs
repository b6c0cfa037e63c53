//! Claims and their extensions. A claim moves due work to its in-progress state under a new
//! fencing token and returns a [`Lease`] on it: the only handle later writes accept. PostgreSQL
//! claims skip rows another worker has locked (`FOR UPDATE SKIP LOCKED`); SQLite has one writer
//! at a time, so its inner select cannot race another claim.

use super::handles::Leases;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::PerBackend;
use super::Place;
use super::Result;
use super::backend::tx::{Statement, Tx};
use super::{Arg, Delivery, DeliveryRecord, Job, JobRecord};
use crate::domain::clock::to_millis;
use crate::domain::keys::{DeliveryKey, JobKey};

/// A held lease on a job (`Lease<JobKey>`, a render) or a delivery (`Lease<DeliveryKey>`, a
/// send): the only handle through which leased work is recorded. Only the ledger makes one (by
/// leasing); every later write presents its fencing `token`, so a lease that was rescued and
/// taken again is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease<K> {
    pub(super) key: K,
    pub(super) token: i64,
    pub(super) owner: String,
    pub(super) expires_at: DateTime<Utc>,
    /// A delivery's integer key, by which its fenced writes find it (`None` for a job's).
    pub(super) place: Option<Place>,
}

/// A lease on a job being rendered.
pub type JobLease = Lease<JobKey>;
/// A lease on a delivery being sent.
pub type DeliveryLease = Lease<DeliveryKey>;

impl Lease<JobKey> {
    /// The job's first lease ever (its fencing token is 1; every lease adds one, nothing takes
    /// one away): no earlier attempt of this job can have stored an artifact.
    pub fn is_first(&self) -> bool {
        self.token == 1
    }
}

impl<K> Lease<K> {
    /// The leased job's or delivery's key.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// The fencing token: grows by one on every lease of the same work.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Who holds it (`hostname:pid`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// When it expires unless extended (as leased).
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.expires_at
    }
}

#[derive(Debug, Clone)]
pub struct LeasedJob {
    pub job: Job,
    pub lease: JobLease,
}

#[derive(Debug, Clone)]
pub struct LeasedDelivery {
    pub delivery: Delivery,
    pub lease: DeliveryLease,
    /// The delivery's job as it was when leased (its artifact, report, date and window), shared
    /// by the deliveries of one job leased together; `None` only if the job row is gone.
    pub job: Option<std::sync::Arc<Job>>,
}

/// What a lease asks for.
#[derive(Debug, Clone)]
pub struct LeaseParams {
    pub owner: String,
    pub now: DateTime<Utc>,
    pub lease_for: Duration,
    pub limit: u32,
}

/// Claims up to `$4` jobs due at `$3` for owner `$1` until `$2`: waiting ones to probe first
/// (a probe is short, and its deadline near), then ready ones to render, each state's earliest
/// taken by its own index range in order, never sorted (one `IN` over both states would sort
/// every due row, and the lease's plan has sorting off). The lock clause follows each inner
/// select's `LIMIT`.
///
/// SQLite's limit is `CAST($4 AS INTEGER)`, not `$4`: SQLite (3.51, bundled) plans a bare
/// `LIMIT ?` with the value bound and re-prepares the statement whenever that value changes,
/// which is at almost every claim (the free slots vary) — ~385,000 instructions each, 10% of
/// the pipeline's CPU before this.
pub(super) const JOB_LEASE: PerBackend = PerBackend {
    sqlite: "UPDATE jobs
             SET state = 'rendering', lease_owner = $1, lease_token = lease_token + 1,
                 lease_expires_at = $2, attempts = attempts + 1, updated_at = $3,
                 generated_at = COALESCE(generated_at, $3)
             WHERE key IN (SELECT key FROM (
                             SELECT key FROM (SELECT key FROM jobs
                                              WHERE state = 'waiting' AND ready_at <= $3 AND format <= $5
                                              ORDER BY ready_at, key LIMIT CAST($4 AS INTEGER))
                             UNION ALL
                             SELECT key FROM (SELECT key FROM jobs
                                              WHERE state = 'ready' AND ready_at <= $3 AND format <= $5
                                              ORDER BY ready_at, key LIMIT CAST($4 AS INTEGER)))
                           LIMIT CAST($4 AS INTEGER))
             RETURNING *",
    postgres: "UPDATE jobs
               SET state = 'rendering', lease_owner = $1, lease_token = lease_token + 1,
                   lease_expires_at = $2, attempts = attempts + 1, updated_at = $3,
                   generated_at = COALESCE(generated_at, $3)
               WHERE key IN (SELECT key FROM (
                               SELECT key FROM (SELECT key FROM jobs
                                                WHERE state = 'waiting' AND ready_at <= $3 AND format <= $5
                                                ORDER BY ready_at, key LIMIT $4 FOR UPDATE SKIP LOCKED) w
                               UNION ALL
                               SELECT key FROM (SELECT key FROM jobs
                                                WHERE state = 'ready' AND ready_at <= $3 AND format <= $5
                                                ORDER BY ready_at, key LIMIT $4 FOR UPDATE SKIP LOCKED) r) due
                             LIMIT $4)
               RETURNING *",
};

/// Claims up to `$4` due deliveries of jobs that are delivering (a job sent back to render
/// keeps its deliveries waiting). The job test is `(…) IS TRUE`: a probe by key per delivery,
/// not a scan of every delivering job.
const DELIVERY_LEASE: PerBackend = PerBackend {
    sqlite: "UPDATE deliveries
             SET state = 'sending', lease_owner = $1, lease_token = lease_token + 1,
                 lease_expires_at = $2, attempts = attempts + 1, updated_at = $3
             WHERE rowid IN (SELECT d.rowid FROM deliveries d
                             WHERE d.due_at <= $3 AND d.format <= $5
                               AND EXISTS (SELECT 1 FROM jobs j WHERE j.key = d.job_key
                                           AND (j.state = 'delivering') IS TRUE)
                             ORDER BY d.due_at, d.job_number, d.ordinal LIMIT CAST($4 AS INTEGER))
             RETURNING *",
    postgres: "UPDATE deliveries
               SET state = 'sending', lease_owner = $1, lease_token = lease_token + 1,
                   lease_expires_at = $2, attempts = attempts + 1, updated_at = $3
               WHERE (job_number, ordinal) IN (
                   SELECT d.job_number, d.ordinal FROM deliveries d
                   WHERE d.due_at <= $3 AND d.format <= $5
                     AND EXISTS (SELECT 1 FROM jobs j WHERE j.key = d.job_key
                                 AND (j.state = 'delivering') IS TRUE)
                   ORDER BY d.due_at, d.job_number, d.ordinal LIMIT $4 FOR UPDATE SKIP LOCKED)
               RETURNING *",
};

/// The earliest `ready_at` of the work a claim in this binary could take, taken or not: a
/// waiting job's next probe, a ready job, a pending delivery of a delivering job — each the
/// head of its index range (`jobs_due`, `deliveries_due_at`), as the claims walk them. `$1`: the
/// newest work format this binary reads.
const NEXT_DUE: &str = "SELECT (SELECT ready_at FROM jobs WHERE state = 'waiting' AND format <= $1
                                ORDER BY ready_at LIMIT 1) AS waiting,
                               (SELECT ready_at FROM jobs WHERE state = 'ready' AND format <= $1
                                ORDER BY ready_at LIMIT 1) AS ready,
                               (SELECT d.due_at FROM deliveries d
                                WHERE d.due_at IS NOT NULL AND d.format <= $1
                                  AND EXISTS (SELECT 1 FROM jobs j WHERE j.key = d.job_key
                                              AND (j.state = 'delivering') IS TRUE)
                                ORDER BY d.due_at LIMIT 1) AS delivery";

/// [`NEXT_DUE`]'s row: each kind's earliest `ready_at` (ms), if any is queued.
#[derive(Debug, sqlx::FromRow)]
struct NextDueRow {
    waiting: Option<i64>,
    ready: Option<i64>,
    delivery: Option<i64>,
}

const RENDER_EXTEND: &str = "UPDATE jobs SET lease_expires_at = $3 WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

const SEND_EXTEND: &str = "UPDATE deliveries SET lease_expires_at = $4
     WHERE job_number = $1 AND ordinal = $2 AND lease_token = $3 AND state = 'sending'";

/// What one claim took: jobs to render, deliveries to send. A claim that took nothing also
/// says when the earliest work it could take falls due (`next_due`; `None` when none is
/// queued), so an idle pool asks again then rather than at every poll.
#[derive(Debug, Default)]
pub struct Claimed {
    pub jobs: Vec<LeasedJob>,
    pub deliveries: Vec<LeasedDelivery>,
    pub next_due: Option<DateTime<Utc>>,
}

impl Claimed {
    pub fn len(&self) -> usize {
        self.jobs.len() + self.deliveries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Claims up to `params.limit` items in `tx`, which the caller set to the claim's planner
/// settings (`Tx::plan_claim`). Due
/// deliveries come first (up to three quarters, so renders keep a share): retries, redrives and
/// deliveries given back, since a render's own deliveries are born leased without a claim. Jobs
/// fill the rest, and deliveries what jobs leave. When it took nothing, it reads when the
/// earliest work falls due, in the same transaction (see [`Claimed::next_due`]).
pub(super) async fn take_in(tx: &mut Tx, params: &LeaseParams) -> Result<Claimed> {
    let n = params.limit;
    let limit = |limit: u32| LeaseParams {
        limit,
        ..params.clone()
    };
    let first = (n - n / 4).max(1);
    let mut deliveries = deliveries_in(tx, &limit(first)).await?;
    let jobs = match n.saturating_sub(deliveries.len() as u32) {
        0 => Vec::new(),
        rest => jobs_in(tx, &limit(rest)).await?,
    };
    let count = (jobs.len() + deliveries.len()) as u32;
    if count < n && deliveries.len() as u32 == first {
        deliveries.extend(deliveries_in(tx, &limit(n - count)).await?);
    }
    let next_due = match jobs.is_empty() && deliveries.is_empty() {
        true => next_due_in(tx).await?,
        false => None,
    };
    Ok(Claimed {
        jobs,
        deliveries,
        next_due,
    })
}

/// When the earliest work a claim could take falls due, if any is queued (see [`NEXT_DUE`]).
async fn next_due_in(tx: &mut Tx) -> Result<Option<DateTime<Utc>>> {
    let st = Statement::new(NEXT_DUE).bind(super::WORK_FORMAT);
    let row: Option<NextDueRow> = tx.fetch_optional(&st).await?;
    Ok(row
        .and_then(|r| [r.waiting, r.ready, r.delivery].into_iter().flatten().min())
        .map(crate::domain::clock::from_millis))
}

/// Claims jobs in `tx`, earliest due first.
async fn jobs_in(tx: &mut Tx, params: &LeaseParams) -> Result<Vec<LeasedJob>> {
    let claim = claim_statement(tx.pick(JOB_LEASE), params);
    let recs: Vec<JobRecord> = tx.fetch_all(&claim).await?;
    let mut out: Vec<LeasedJob> = recs
        .into_iter()
        .map(|r| {
            let job = Job::try_from(r)?;
            Ok(LeasedJob {
                lease: Lease::held(job.key.clone(), job.lease_token, params),
                job,
            })
        })
        .collect::<Result<_>>()?;
    out.sort_by(|a, b| (a.job.ready_at, &a.job.key).cmp(&(b.job.ready_at, &b.job.key)));
    Ok(out)
}

/// Claims deliveries in `tx`; their jobs are read in it too (a read after the claim was a
/// commit of its own, a fifth of PostgreSQL's commits in `benches/pipeline.rs`).
async fn deliveries_in(tx: &mut Tx, params: &LeaseParams) -> Result<Vec<LeasedDelivery>> {
    let claim = claim_statement(tx.pick(DELIVERY_LEASE), params);
    let deliveries: Vec<Delivery> = (tx.fetch_all::<DeliveryRecord>(&claim).await?)
        .into_iter()
        .map(Delivery::try_from)
        .collect::<Result<_>>()?;
    let job_keys: BTreeSet<&JobKey> = deliveries.iter().map(|d| d.key.job()).collect();
    let job_keys: Vec<&JobKey> = job_keys.into_iter().collect();
    let head = "SELECT * FROM jobs WHERE key IN (";
    let jobs = tx.fetch_by_job_keys::<JobRecord>(head, &job_keys).await?;
    let jobs: HashMap<JobKey, Arc<Job>> = jobs
        .into_iter()
        .map(|r| Job::try_from(r).map(|j| (j.key.clone(), Arc::new(j))))
        .collect::<Result<_>>()?;
    let mut out: Vec<LeasedDelivery> = deliveries
        .into_iter()
        .map(|delivery| LeasedDelivery {
            lease: Lease::held(delivery.key.clone(), delivery.lease_token, params)
                .at(delivery.place),
            job: jobs.get(delivery.key.job()).cloned(),
            delivery,
        })
        .collect();
    out.sort_by(|a, b| {
        (a.delivery.ready_at, &a.delivery.key).cmp(&(b.delivery.ready_at, &b.delivery.key))
    });
    Ok(out)
}

/// A claim's statement `sql` (`JOB_LEASE`, `DELIVERY_LEASE`) with its binds: owner `$1`,
/// until `$2`, now `$3`, limit `$4`, the newest work format this binary reads `$5`.
fn claim_statement<'a>(sql: &'static str, params: &'a LeaseParams) -> Statement<'a> {
    Statement::new(sql)
        .bind(params.owner.as_str())
        .bind(to_millis(crate::domain::clock::add(
            params.now,
            params.lease_for,
        )))
        .bind(to_millis(params.now))
        .bind(i64::from(params.limit))
        .bind(super::WORK_FORMAT)
}

impl<K> Lease<K> {
    /// The first lease of a row created leased (see `GroupCommit::lease_to`).
    pub(super) fn born(key: K, token: i64, owner: &str, expires_at: DateTime<Utc>) -> Lease<K> {
        Lease {
            key,
            token,
            owner: owner.to_string(),
            expires_at,
            place: None,
        }
    }

    /// Where its delivery is kept, for a fenced write. A lease without a place (a job's) names
    /// no delivery: the write then finds nothing, and reads as a lost lease.
    pub(super) fn place(&self) -> Place {
        self.place.unwrap_or(Place {
            job_number: -1,
            ordinal: -1,
        })
    }

    /// This lease, on the delivery kept at `place`.
    pub(super) fn at(self, place: Place) -> Lease<K> {
        Lease {
            place: Some(place),
            ..self
        }
    }

    /// The lease a claim just took.
    fn held(key: K, token: i64, params: &LeaseParams) -> Lease<K> {
        let until = crate::domain::clock::add(params.now, params.lease_for);
        Lease::born(key, token, &params.owner, until)
    }
}

impl Leases<'_> {
    /// Leases up to `limit` ready or waiting jobs whose `ready_at` has come: `ready → rendering`
    /// (a waiting job renders only once its probe says its data is ready). A round of its own.
    pub async fn jobs(self, params: &LeaseParams) -> Result<Vec<LeasedJob>> {
        self.within(async |tx| {
            tx.plan_claim().await?;
            jobs_in(tx, params).await
        })
        .await
    }

    /// Leases up to `limit` pending deliveries whose `ready_at` has come: `pending → sending`.
    /// The lease counts as an attempt; `ledger.deliveries().release` gives it back. A round of
    /// its own.
    pub async fn deliveries(self, params: &LeaseParams) -> Result<Vec<LeasedDelivery>> {
        self.within(async |tx| {
            tx.plan_claim().await?;
            deliveries_in(tx, params).await
        })
        .await
    }

    /// Pushes a job lease's deadline to `until`, if the lease is still held.
    pub async fn extend_job(self, lease: &JobLease, until: DateTime<Utc>) -> Result<()> {
        self.fenced_update(RENDER_EXTEND, lease, &[Arg::Int(to_millis(until))])
            .await
    }

    /// Pushes a delivery lease's deadline to `until`, if the lease is still held.
    pub(crate) async fn extend_delivery(
        self,
        lease: &DeliveryLease,
        until: DateTime<Utc>,
    ) -> Result<()> {
        self.fenced_send(SEND_EXTEND, lease, &[Arg::Int(to_millis(until))])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Backend, Ledger};

    /// SQLite reads a partial index only for a query it can prove implies the index's
    /// predicate; where it cannot, a queue read walks the whole table (every job and delivery
    /// retention keeps) and sorts it. Each queue read, on a migrated SQLite ledger: no full
    /// scan of jobs or deliveries (a partial index read whole holds only the rows wanted),
    /// whatever the queries' parameters.
    #[tokio::test]
    async fn sqlite_reads_the_queue_through_its_indexes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = Ledger::connect("sqlite://ledger.db", dir.path())
            .await
            .expect("a migrated ledger");
        let Backend::Sqlite(pool) = &ledger.backend else {
            panic!("a SQLite ledger");
        };
        let live = sql!("SELECT key FROM ", super::super::LIVE_JOB_KEYS);
        let reads = [
            ("the claim of jobs", JOB_LEASE.sqlite),
            ("the claim of deliveries", DELIVERY_LEASE.sqlite),
            ("the next-due read", NEXT_DUE),
            ("the live jobs", live),
        ];
        for (what, sql) in reads {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                    .fetch_all(pool)
                    .await
                    .expect("a plan");
            let scans: Vec<&str> = plan
                .iter()
                .map(|(_, _, _, detail)| detail.as_str())
                .filter(|d| d.starts_with("SCAN ") && !d.contains(" USING "))
                .filter(|d| !d.starts_with("SCAN (") && *d != "SCAN CONSTANT ROW")
                .collect();
            assert!(
                scans.is_empty(),
                "{what} scans a table: {scans:?} in {plan:?}"
            );
        }
    }
}
