//! The outcomes of work, recorded in one transaction: renders (the artifact and the deliveries
//! each creates), delivery attempts with what follows each, and the settle of jobs whose last
//! finishes an earlier transaction committed. What the pool's completer gathers between two
//! commits is one call here, so one commit, whatever its mix.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::backend::bind::shaped;
use super::backend::tx::{Statement, Tx};
use super::group_commit_sql::{
    FINISH_UPDATE, NewRow, RENDERED_UPDATE, finish_columns, last_error, rendered_state,
};
use super::{
    Claimed, Delivery, DeliveryRecord, Finish, Job, JobRecord, Lease, LeaseParams, LeasedDelivery,
};
use super::{Ledger, LedgerError, PerBackend, Render, Result, lease_lost};
use crate::domain::clock::to_millis;
use crate::domain::keys::{DeliveryKey, JobKey};

/// What one commit records.
#[derive(Debug, Clone, Copy)]
pub struct GroupCommit<'a> {
    pub renders: &'a [Render],
    pub finishes: &'a [Finish],
    /// Jobs to settle (`ledger.jobs().settle_many`): only jobs whose finishes an *earlier*
    /// transaction committed, since a settle inside the finishes' own transaction would not
    /// see another worker's concurrent last finish.
    pub settle: &'a [&'a JobKey],
    /// Who the renders' deliveries are created leased to: the node that rendered a job sends
    /// its deliveries without claiming them, so a delivery is one insert and one finish, not a
    /// claim between. `None` creates them `pending`, for any node's claim.
    pub lease_to: Option<LeaseTo<'a>>,
    /// Claims up to this many due items for `lease_to`'s owner in the same transaction, after
    /// the outcomes: a node's claims ride the commit its outcomes need anyway, instead of a
    /// commit of their own (none without `lease_to`).
    pub claim: Option<u32>,
    pub now: DateTime<Utc>,
}

/// A first lease for the deliveries a render creates: `owner`'s until `now + lease_for`.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTo<'a> {
    pub owner: &'a str,
    pub lease_for: chrono::Duration,
}

/// One result per render and per finish, in order: `LeaseLost` for a lease no longer held
/// (that item changed nothing; the others still recorded). A recorded render carries the
/// deliveries it created leased to [`GroupCommit::lease_to`] (none without it, and none for a
/// delivery that existed already: an earlier render of the job created it, and it keeps its
/// state).
#[derive(Debug, Default)]
pub struct Committed {
    pub renders: Vec<Result<Vec<LeasedDelivery>>>,
    pub finishes: Vec<Result<()>>,
    /// What [`GroupCommit::claim`] took, leased to [`GroupCommit::lease_to`].
    pub claimed: Claimed,
}

/// The head of a batch of renders: the rows `v` that follow (key, token, state, html, text,
/// sha256, bytes, csv, now) record each job's artifact under its lease: `rendering →
/// delivering`, or `→ done` for a job without destinations.
const RENDERED_VALUES: &str =
    "WITH v (key, token, state, html, text, sha256, bytes, csv, parts, now) AS (VALUES ";

/// What a batch of renders returns: the job rows only (PostgreSQL's `*` would add `v`'s
/// columns; SQLite's means the updated table's and refuses `jobs.*`).
const RENDERED_RETURNING: PerBackend = PerBackend {
    sqlite: "*",
    postgres: "jobs.*",
};

/// The head of a multi-row delivery insert (14 columns a row): `pending`, or `sending` under a
/// first lease (token 1, the lease counted as the first attempt, as a claim counts it).
const DELIVERY_INSERT_VALUES: &str = "INSERT INTO deliveries (key, job_key, kind, destination, state, ready_at, created_at, updated_at,
        lease_owner, lease_expires_at, lease_token, attempts, job_number, ordinal) SELECT * FROM (VALUES ";

/// The tail of a delivery insert after a job's first render lease: a delivery that exists
/// already (an earlier render of the job created it; found among the job's, `column13` being
/// the job's number) keeps its row, and only the rows created come back. Not `ON CONFLICT DO NOTHING`: PostgreSQL's speculative insertion writes a
/// confirmation record per row, and no other transaction can insert these keys meanwhile (this
/// one holds the job's row, updated under its lease just before).
const DELIVERY_INSERT_AGAIN: &str =
    ") AS v WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = v.column13
                                AND d.key = v.column1) RETURNING *";

/// The tail of a delivery insert under a job's first render lease (fencing token 1): only a
/// recorded render creates deliveries, and no render of the job was recorded before, so none
/// can exist and none is looked for. (PostgreSQL planned the look as a hash anti-join over the
/// whole table, with its size guessed while the table was small and the plan kept as the
/// table grew: each batch of a night's renders read every delivery inserted before it.)
const DELIVERY_INSERT_FIRST: &str = ") AS v RETURNING *";

/// The head of a batch of finishes: the rows `v` that follow (key, token, state, ready_at,
/// class, error, finished, terminal, job number, ordinal) update their deliveries if the lease
/// still holds, and return the attempt number each one recorded.
const FINISH_VALUES: &str =
    "WITH v (key, token, state, ready_at, class, error, finished, terminal, job_number,
        ordinal) AS (VALUES ";

/// The head of a multi-row attempt insert (12 columns a row).
const ATTEMPT_VALUES: &str = "INSERT INTO delivery_attempts (delivery_key, attempt, requested_at,
        finished_at, class, code, retry_after_ms, next_ready_at, reason, diagnostics, job_number,
        ordinal) VALUES ";

/// Rows a multi-row statement carries at most: 10 binds a row at most, far below both
/// backends' bind limits.
const ROWS_PER_STATEMENT: usize = 128;

impl Ledger {
    /// Records `outcomes` in one transaction (one commit). An `Err` means nothing was recorded.
    pub async fn commit_group(&self, outcomes: GroupCommit<'_>) -> Result<Committed> {
        let GroupCommit {
            renders,
            finishes,
            settle,
            now,
            ..
        } = outcomes;
        let claim = outcomes.lease_to.zip(outcomes.claim.filter(|n| *n > 0));
        if renders.is_empty() && finishes.is_empty() && claim.is_none() {
            if !settle.is_empty() {
                self.jobs().settle_many(settle, now).await?;
            }
            return Ok(Committed::default());
        }
        let (rendered, numbers, claimed) = self
            .within(async |tx| {
                let rendered = rendered_in(tx, renders, outcomes.lease_to, now).await?;
                let numbers = finished_in(tx, finishes).await?;
                if !settle.is_empty() {
                    super::jobs::settle_in(tx, settle, now).await?;
                }
                let claimed = match claim {
                    Some((to, limit)) => {
                        tx.plan_claim().await?;
                        let params = LeaseParams {
                            owner: to.owner.to_string(),
                            now,
                            lease_for: to.lease_for,
                            limit,
                        };
                        super::leases::take_in(tx, &params).await?
                    }
                    None => Claimed::default(),
                };
                Ok((rendered, numbers, claimed))
            })
            .await?;
        let finished = finishes
            .iter()
            .map(|f| match numbers.contains_key(&lease_id(&f.lease)) {
                true => Ok(()),
                false => Err(lease_lost(&f.lease)),
            })
            .collect();
        Ok(Committed {
            renders: rendered,
            finishes: finished,
            claimed,
        })
    }
}

/// Each render's artifact under its lease, then the deliveries of the renders whose lease held,
/// leased to `lease_to` when given.
pub(super) async fn rendered_in(
    tx: &mut Tx,
    renders: &[Render],
    lease_to: Option<LeaseTo<'_>>,
    now: DateTime<Utc>,
) -> Result<Vec<Result<Vec<LeasedDelivery>>>> {
    let now_ms = to_millis(now);
    let mut updated: HashMap<(String, i64), Arc<Job>> = HashMap::with_capacity(renders.len());
    let rows = match tx.postgres() {
        _ if renders.is_empty() => Vec::new(),
        Some(conn) => super::group_commit_pg::rendered(conn, renders, now_ms).await?,
        None => rendered_rows(tx, renders, now_ms).await?,
    };
    for rec in rows {
        let job = Job::try_from(rec)?;
        updated.insert((job.key.to_string(), job.lease_token), Arc::new(job));
    }
    let held: Vec<Result<Arc<Job>>> = renders
        .iter()
        .map(|r| (updated.remove(&lease_id(&r.lease))).ok_or_else(|| lease_lost(&r.lease)))
        .collect();
    let again: Vec<i64> = renders
        .iter()
        .zip(&held)
        .filter(|(r, _)| !r.lease.is_first())
        .filter_map(|(_, h)| h.as_ref().ok()?.number)
        .collect();
    let existing = existing(tx, &again).await?;
    let new = |first| new_rows(renders, &held, &existing, first);
    let lease = lease_to.map(|to| (to.owner, crate::domain::clock::add(now, to.lease_for)));
    let first = (new(true)?, DELIVERY_INSERT_FIRST);
    let again = (new(false)?, DELIVERY_INSERT_AGAIN);
    let mut created = insert_deliveries(tx, first, lease, now_ms).await?;
    for (job, rows) in insert_deliveries(tx, again, lease, now_ms).await? {
        created.entry(job).or_default().extend(rows);
    }
    Ok(renders
        .iter()
        .zip(held)
        .map(|(r, job)| {
            let job = job?;
            let Some((owner, until)) = lease else {
                return Ok(Vec::new());
            };
            let mine = created.remove(r.lease.key()).unwrap_or_default();
            Ok(mine
                .into_iter()
                .map(|delivery| LeasedDelivery {
                    lease: Lease::born(delivery.key.clone(), delivery.lease_token, owner, until)
                        .at(delivery.place),
                    job: Some(job.clone()),
                    delivery,
                })
                .collect())
        })
        .collect())
}

/// The rows of the deliveries `renders` add, for the jobs `held` (each render's job, or why
/// its lease was lost) under a first lease (`first`) or a later one: a first render's
/// deliveries are the job's first; a later render keeps the job's (`existing`) and puts the
/// ones it adds after them.
fn new_rows<'r>(
    renders: &'r [Render],
    held: &[Result<Arc<Job>>],
    existing: &HashMap<i64, Existing>,
    first: bool,
) -> Result<Vec<NewRow<'r>>> {
    let none = Existing::default();
    let mut rows = Vec::new();
    for (r, h) in renders.iter().zip(held) {
        let Ok(job) = h else { continue };
        if r.lease.is_first() != first {
            continue;
        }
        let job_number = job.number.ok_or_else(|| unnumbered(&job.key))?;
        let had = existing.get(&job_number).unwrap_or(&none);
        // Each key once (a render's list may name a destination twice).
        let mut seen: HashSet<&DeliveryKey> = HashSet::with_capacity(r.deliveries.len());
        let added =
            (r.deliveries.iter()).filter(|d| !had.keys.contains(&d.key) && seen.insert(&d.key));
        for (i, delivery) in added.enumerate() {
            let ordinal = i32::try_from(i)
                .ok()
                .and_then(|i| had.next.checked_add(i))
                .ok_or_else(|| unnumbered(&job.key))?;
            rows.push(NewRow {
                job: r.lease.key(),
                job_number,
                ordinal,
                delivery,
            });
        }
    }
    Ok(rows)
}

/// What a later render of these jobs must know to add deliveries, by job number: the keys of
/// the job's deliveries (kept as they are) and the next free place after its greatest.
async fn existing(tx: &mut Tx, jobs: &[i64]) -> Result<HashMap<i64, Existing>> {
    const OF_JOB: &str = "SELECT key, ordinal FROM deliveries WHERE job_number = $1";
    let mut out = HashMap::with_capacity(jobs.len());
    for job in jobs {
        let rows: Vec<(String, i32)> = tx.fetch_all(&Statement::new(OF_JOB).bind(*job)).await?;
        let next = rows
            .iter()
            .map(|(_, o)| o.saturating_add(1))
            .max()
            .unwrap_or(0);
        let keys = (rows.iter().map(|(k, _)| super::types::parse_key(k))).collect::<Result<_>>()?;
        out.insert(*job, Existing { keys, next });
    }
    Ok(out)
}

/// A job's deliveries as a later render finds them (see [`existing`]).
#[derive(Default)]
struct Existing {
    keys: HashSet<DeliveryKey>,
    next: i32,
}

/// A job without its number (migration 23 gave every job one), or past its places.
fn unnumbered(job: &JobKey) -> LedgerError {
    LedgerError::Corrupt(format!("job {job}: its deliveries cannot be numbered"))
}

/// Records `renders` as `VALUES` lists, in chunks (SQLite): the job rows updated.
async fn rendered_rows(tx: &mut Tx, renders: &[Render], now_ms: i64) -> Result<Vec<JobRecord>> {
    let tail = [") ", RENDERED_UPDATE, tx.pick(RENDERED_RETURNING)].concat();
    let mut rows = Vec::with_capacity(renders.len());
    for chunk in shaped(renders, ROWS_PER_STATEMENT) {
        let sql = values_list(tx.numbered(), RENDERED_VALUES, chunk.len(), 10, &tail);
        let mut update = Statement::owned(sql);
        for r in chunk {
            let a = &r.artifact;
            update = update
                .bind(r.lease.key())
                .bind(r.lease.token())
                .bind(rendered_state(r))
                .bind(a.html_key.as_str())
                .bind(a.text_key.as_str())
                .bind(a.sha256.as_str())
                .bind(a.bytes)
                .bind(a.csv_key.as_deref())
                .bind(super::types::parts_column(a))
                .bind(now_ms);
        }
        rows.extend(tx.fetch_all::<JobRecord>(&update).await?);
    }
    Ok(rows)
}

/// Inserts the deliveries `new` with the statement's `tail` (`DELIVERY_INSERT_FIRST` or
/// `_AGAIN`), `sending` under `lease` (owner, until) when given, else `pending`; the rows
/// created, by job.
async fn insert_deliveries(
    tx: &mut Tx,
    (new, tail): (Vec<NewRow<'_>>, &str),
    lease: Option<(&str, DateTime<Utc>)>,
    now_ms: i64,
) -> Result<HashMap<JobKey, Vec<Delivery>>> {
    let mut created: HashMap<JobKey, Vec<Delivery>> = HashMap::new();
    if new.is_empty() {
        return Ok(created);
    }
    let lease_ms = lease.map(|(owner, until)| (owner, to_millis(until)));
    let rows = match tx.postgres() {
        Some(conn) => {
            super::group_commit_pg::deliveries(conn, (&new, tail), lease_ms, now_ms).await?
        }
        None => delivery_rows(tx, (&new, tail), lease_ms, now_ms).await?,
    };
    for rec in rows {
        let delivery = Delivery::try_from(rec)?;
        created
            .entry(delivery.key.job().clone())
            .or_default()
            .push(delivery);
    }
    Ok(created)
}

/// Inserts `new` as `VALUES` lists, in chunks (SQLite): the rows created.
async fn delivery_rows(
    tx: &mut Tx,
    (new, tail): (&[NewRow<'_>], &str),
    lease: Option<(&str, i64)>,
    now_ms: i64,
) -> Result<Vec<DeliveryRecord>> {
    let state = if lease.is_some() {
        "sending"
    } else {
        "pending"
    };
    let mut rows = Vec::with_capacity(new.len());
    for chunk in shaped(new, ROWS_PER_STATEMENT) {
        let sql = values_list(tx.numbered(), DELIVERY_INSERT_VALUES, chunk.len(), 14, tail);
        let mut insert = Statement::owned(sql);
        for row in chunk {
            let key = &row.delivery.key;
            insert = insert
                .bind(key)
                .bind(row.job)
                .bind(key.kind().as_str())
                .bind(key.destination())
                .bind(state)
                .bind(now_ms)
                .bind(now_ms)
                .bind(now_ms)
                .bind(lease.map(|(owner, _)| owner))
                .bind(lease.map(|(_, until)| until))
                .bind(i64::from(lease.is_some()))
                .bind(i64::from(lease.is_some()))
                .bind(row.job_number)
                .bind(i64::from(row.ordinal));
        }
        rows.extend(tx.fetch_all::<DeliveryRecord>(&insert).await?);
    }
    Ok(rows)
}

/// Each finish's delivery update under its lease and its attempt row; the attempt number each
/// recorded finish got, by (key, token).
async fn finished_in(tx: &mut Tx, finishes: &[Finish]) -> Result<HashMap<(String, i64), i64>> {
    if finishes.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(match tx.postgres() {
        Some(conn) => (super::group_commit_pg::finished(conn, finishes).await?)
            .into_iter()
            .map(|(k, t, n)| ((k, t), n))
            .collect(),
        None => finished_rows(tx, finishes).await?,
    })
}

/// Each finish's update and attempt row as `VALUES` lists, in chunks (SQLite): the attempt
/// number of every delivery updated, by (key, token).
async fn finished_rows(tx: &mut Tx, finishes: &[Finish]) -> Result<HashMap<(String, i64), i64>> {
    let tail = [") ", FINISH_UPDATE].concat();
    let mut numbers: HashMap<(String, i64), i64> = HashMap::with_capacity(finishes.len());
    let mut pairs: HashMap<(String, i64), Numbers> = HashMap::with_capacity(finishes.len());
    for chunk in shaped(finishes, ROWS_PER_STATEMENT) {
        let sql = values_list(tx.numbered(), FINISH_VALUES, chunk.len(), 10, &tail);
        let mut update = Statement::owned(sql);
        for f in chunk {
            let (state, ready_at, terminal) = finish_columns(f);
            let place = f.lease.place();
            update = update
                .bind(f.lease.key())
                .bind(f.lease.token())
                .bind(state)
                .bind(ready_at)
                .bind(f.attempt.class.as_str())
                .bind(last_error(f))
                .bind(to_millis(f.attempt.finished_at))
                .bind(terminal)
                .bind(place.job_number)
                .bind(i64::from(place.ordinal));
        }
        let rows: Vec<FinishedRow> = tx.fetch_all(&update).await?;
        for (k, t, n, job_number, ordinal) in rows {
            numbers.insert((k.clone(), t), n);
            pairs.insert((k, t), (job_number, ordinal));
        }
    }
    let recorded: Vec<(&Finish, i64, Numbers)> = finishes
        .iter()
        .filter_map(|f| {
            let id = lease_id(&f.lease);
            Some((f, *numbers.get(&id)?, *pairs.get(&id)?))
        })
        .collect();
    for chunk in shaped(&recorded, ROWS_PER_STATEMENT) {
        let sql = values_list(tx.numbered(), ATTEMPT_VALUES, chunk.len(), 12, "");
        let mut insert = Statement::owned(sql);
        for (f, number, (job_number, ordinal)) in chunk {
            let (_, ready_at, _) = finish_columns(f);
            insert = insert
                .bind(f.lease.key())
                .bind(*number)
                .bind(to_millis(f.attempt.requested_at))
                .bind(to_millis(f.attempt.finished_at))
                .bind(f.attempt.class.as_str())
                .bind(f.attempt.code)
                .bind(f.attempt.retry_after.map(|d| d.num_milliseconds()))
                .bind(ready_at)
                .bind(f.attempt.reason.as_deref())
                .bind(f.attempt.diagnostics.as_deref())
                .bind(*job_number)
                .bind(ordinal.map(i64::from));
        }
        tx.execute(&insert).await?;
    }
    Ok(numbers)
}

/// A delivery's job number and ordinal, as its row holds them.
type Numbers = (Option<i64>, Option<i32>);

/// What a finish's update returns: the delivery's key, lease token, attempts and numbers.
type FinishedRow = (String, i64, i64, Option<i64>, Option<i32>);

/// `head`, then `rows` tuples of `width` parameters, then `tail`. The parameters are
/// numbered (`$1`, `$2`, …) where `numbered`, else anonymous (`?`, bound in order): SQLite
/// looks a numbered parameter's name up by a linear scan, and its driver asks the name of
/// every parameter it binds — quadratic in a statement of 2,000 parameters, 9% of the
/// pipeline's CPU on SQLite in `benches/pipeline.rs` (perf) — while PostgreSQL takes only
/// numbered ones.
fn values_list(numbered: bool, head: &str, rows: usize, width: usize, tail: &str) -> String {
    use std::fmt::Write;
    let mut sql = String::with_capacity(head.len() + tail.len() + rows * width * 5);
    sql.push_str(head);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for col in 0..width {
            let sep = if col == 0 { "" } else { ", " };
            match numbered {
                true => {
                    let _ = write!(sql, "{sep}${}", row * width + col + 1);
                }
                false => {
                    let _ = write!(sql, "{sep}?");
                }
            }
        }
        sql.push(')');
    }
    sql.push_str(tail);
    sql
}

/// A lease as the rows a statement returned name it: its work's key and its fencing token.
fn lease_id<K: std::fmt::Display>(lease: &Lease<K>) -> (String, i64) {
    (lease.key().to_string(), lease.token())
}

#[cfg(test)]
mod tests {
    use super::values_list;

    #[test]
    fn a_values_list_numbers_its_parameters_row_by_row_or_takes_them_in_order() {
        let head = "INSERT INTO t (a, b) VALUES ";
        assert_eq!(
            values_list(true, head, 3, 2, " ON CONFLICT DO NOTHING"),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            values_list(false, head, 2, 2, ""),
            "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)"
        );
    }
}
