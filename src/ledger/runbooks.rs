//! Bulk-redrive runbooks: their rows, the deliveries each step redrove, and the audit of every
//! step. The engine that drives them is `crate::services::runbook`; this file only reads and writes.

use super::handles::{Deliveries, Runbooks};
use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::backend::tx::Statement;
use super::{Delivery, DeliveryRecord, Result, Via};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::keys::DeliveryKey;
use crate::domain::outcome::ResponseClass;

/// What a runbook redrives and how: quarantined deliveries of `report` whose last class is
/// `class`, at `host` (every host when empty), quarantined since `since`; a canary of
/// `canary`, then batches of `batch`.
#[derive(Debug, Clone, Serialize)]
pub struct RunbookSpec {
    pub report: String,
    pub host: String,
    pub class: ResponseClass,
    pub since: Option<DateTime<Utc>>,
    pub canary: u32,
    pub batch: u32,
    pub by: String,
    pub reason: String,
    pub via: Via,
}

/// A runbook as the ledger holds it.
#[derive(Debug, Clone, Serialize)]
pub struct Runbook {
    pub id: i64,
    #[serde(flatten)]
    pub spec: RunbookSpec,
    /// How many deliveries the dry run found.
    pub planned: i64,
    pub state: RunbookState,
    /// Redrive steps taken: 1 is the canary, 2… the batches.
    pub step: i64,
    pub outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Runbook {
    pub(crate) fn is_finished(&self) -> bool {
        self.state.is_finished()
    }
}

/// Where a runbook is: `planned` (the dry run, awaiting a start), `running`, and the two ends,
/// `stopped` (by hand, or by itself when the work came back quarantined) and `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunbookState {
    Planned,
    Running,
    Stopped,
    Done,
}

impl RunbookState {
    pub const ALL: [RunbookState; 4] = [
        RunbookState::Planned,
        RunbookState::Running,
        RunbookState::Stopped,
        RunbookState::Done,
    ];

    /// Not finished: planned, or running.
    pub(crate) const OPEN: &[RunbookState] = &[RunbookState::Planned, RunbookState::Running];

    pub const fn as_str(self) -> &'static str {
        match self {
            RunbookState::Planned => "planned",
            RunbookState::Running => "running",
            RunbookState::Stopped => "stopped",
            RunbookState::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Result<RunbookState> {
        RunbookState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| super::LedgerError::Corrupt(format!("unknown runbook state {s:?}")))
    }

    pub(crate) fn is_finished(self) -> bool {
        matches!(self, RunbookState::Stopped | RunbookState::Done)
    }
}

impl std::fmt::Display for RunbookState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audited step of a runbook.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct RunbookStep {
    pub step: i64,
    pub action: String,
    pub count: i64,
    pub detail: String,
    #[sqlx(rename = "actor")]
    pub by: String,
    #[serde(skip)]
    pub at: i64,
}

impl RunbookStep {
    pub fn at(&self) -> DateTime<Utc> {
        from_millis(self.at)
    }
}

#[derive(Debug, sqlx::FromRow)]
struct RunbookRecord {
    id: i64,
    report: String,
    host: String,
    class: String,
    since: Option<i64>,
    canary: i64,
    batch: i64,
    planned: i64,
    redriven_by: String,
    reason: String,
    via: String,
    state: String,
    step: i64,
    outcome: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<RunbookRecord> for Runbook {
    type Error = super::LedgerError;

    fn try_from(r: RunbookRecord) -> Result<Runbook> {
        Ok(Runbook {
            id: r.id,
            spec: RunbookSpec {
                report: r.report,
                host: r.host,
                class: ResponseClass::parse(&r.class),
                since: r.since.map(from_millis),
                canary: u32::try_from(r.canary).unwrap_or(1),
                batch: u32::try_from(r.batch).unwrap_or(1),
                by: r.redriven_by,
                reason: r.reason,
                via: r.via.parse()?,
            },
            planned: r.planned,
            state: RunbookState::parse(&r.state)?,
            step: r.step,
            outcome: r.outcome,
            created_at: from_millis(r.created_at),
            updated_at: from_millis(r.updated_at),
        })
    }
}

const COLUMNS: &str = "id, report, host, class, since, canary, batch, planned, redriven_by, reason, via, state, step, outcome, created_at, updated_at";

const INSERT: &str = "INSERT INTO runbooks (report, host, class, since, canary, batch, planned,
        redriven_by, reason, via, state, step, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'planned', 0, $11, $11) RETURNING id";

/// The audit row of step `step` of runbook `id`: `record`, at `at_ms`.
fn step_row<'a>(id: i64, step: i64, record: &StepRecord<'a>, at_ms: i64) -> Statement<'a> {
    Statement::new(
        "INSERT INTO runbook_steps (runbook_id, step, action, count, detail, actor, at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(step)
    .bind(record.action)
    .bind(record.count)
    .bind(record.detail)
    .bind(record.by)
    .bind(at_ms)
}

/// A runbook's move: from state `from` at step `step` to state `to` (at `step + 1` when
/// `next_step`), with the `outcome` it ends with, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Transition<'a> {
    pub from: RunbookState,
    pub to: RunbookState,
    pub step: i64,
    pub next_step: bool,
    pub outcome: Option<&'a str>,
}

/// One audited step: what happened, to how many, in words, by whom.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepRecord<'a> {
    pub action: &'a str,
    pub count: i64,
    pub detail: &'a str,
    pub by: &'a str,
}

impl Runbooks<'_> {
    /// Quarantined deliveries of `report`'s jobs whose last class is `class`, quarantined at or
    /// after `since`, oldest first, at most `limit`.
    pub(crate) async fn members(
        self,
        report: &str,
        class: ResponseClass,
        since: Option<DateTime<Utc>>,
        limit: u32,
    ) -> Result<Vec<Delivery>> {
        let recs: Vec<DeliveryRecord> = on_backend!(self, |p, _d| {
            let mut qb = sqlx::QueryBuilder::new(
                "SELECT * FROM deliveries WHERE state = 'quarantined' AND last_class = ",
            );
            qb.push_bind(class.as_str())
                .push(" AND job_number IN (SELECT number FROM jobs WHERE report = ")
                .push_bind(report)
                .push(")");
            if let Some(t) = since {
                qb.push(" AND terminal_at >= ").push_bind(to_millis(t));
            }
            qb.push(" ORDER BY terminal_at, key LIMIT ")
                .push_bind(i64::from(limit));
            qb.build_query_as().fetch_all(p).await?
        });
        recs.into_iter().map(Delivery::try_from).collect()
    }

    /// Records a planned runbook and its dry run (`plan` step); returns its id.
    pub(crate) async fn create(
        self,
        spec: &RunbookSpec,
        planned: i64,
        detail: &str,
        now: DateTime<Utc>,
    ) -> Result<i64> {
        let now_ms = to_millis(now);
        let insert = Statement::new(INSERT)
            .bind(spec.report.as_str())
            .bind(spec.host.as_str())
            .bind(spec.class.as_str())
            .bind(spec.since.map(to_millis))
            .bind(i64::from(spec.canary))
            .bind(i64::from(spec.batch))
            .bind(planned)
            .bind(spec.by.as_str())
            .bind(spec.reason.as_str())
            .bind(spec.via.as_str())
            .bind(now_ms);
        self.within(async |tx| {
            let Some((id,)) = tx.fetch_optional::<(i64,)>(&insert).await? else {
                return Err(super::LedgerError::Corrupt(
                    "a runbook insert returned no id".into(),
                ));
            };
            let plan = StepRecord {
                action: "plan",
                count: planned,
                detail,
                by: &spec.by,
            };
            tx.execute(&step_row(id, 0, &plan, now_ms)).await?;
            Ok(id)
        })
        .await
    }

    pub async fn get(self, id: i64) -> Result<Option<Runbook>> {
        let sql = format!("SELECT {COLUMNS} FROM runbooks WHERE id = $1");
        let rec: Option<RunbookRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(p)
                .await?
        });
        rec.map(Runbook::try_from).transpose()
    }

    /// The newest runbooks first; with `open_only`, those planned or running.
    pub async fn list(self, open_only: bool, limit: u32) -> Result<Vec<Runbook>> {
        let filter = match open_only {
            true => sql!(" WHERE state IN (", state_set!(RunbookState::OPEN), ")"),
            false => "",
        };
        let sql = format!("SELECT {COLUMNS} FROM runbooks{filter} ORDER BY id DESC LIMIT $1");
        let recs: Vec<RunbookRecord> = on_backend!(self, |p, _d| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await?
        });
        recs.into_iter().map(Runbook::try_from).collect()
    }

    /// Every step of a runbook, in order.
    pub async fn steps(self, id: i64) -> Result<Vec<RunbookStep>> {
        Ok(on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT step, action, count, detail, actor, at FROM runbook_steps
                 WHERE runbook_id = $1 ORDER BY id",
            )
            .bind(id)
            .fetch_all(p)
            .await?
        }))
    }

    /// The deliveries a runbook redrove: at `step`, or at any step.
    pub(crate) async fn items(self, id: i64, step: Option<i64>) -> Result<HashSet<String>> {
        let rows: Vec<(String,)> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT delivery_key FROM runbook_items WHERE runbook_id = $1
                 AND ($2 < 0 OR step = $2)",
            )
            .bind(id)
            .bind(step.unwrap_or(-1))
            .fetch_all(p)
            .await?
        });
        Ok(rows.into_iter().map(|(k,)| k).collect())
    }

    /// Moves runbook `id` as `t` says, with an audited step; false when another driver moved
    /// it first (its state or step no longer what `t` expects).
    pub(crate) async fn transition(
        self,
        id: i64,
        t: Transition<'_>,
        record: StepRecord<'_>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let now_ms = to_millis(now);
        let Transition {
            from,
            to,
            step,
            next_step,
            outcome,
        } = t;
        let new_step = if next_step { step + 1 } else { step };
        let update = Statement::new(
            "UPDATE runbooks SET state = $1, step = $2, outcome = COALESCE($3, outcome),
                updated_at = $4
             WHERE id = $5 AND state = $6 AND step = $7",
        )
        .bind(to.as_str())
        .bind(new_step)
        .bind(outcome)
        .bind(now_ms)
        .bind(id)
        .bind(from.as_str())
        .bind(step);
        self.within(async |tx| {
            if tx.execute(&update).await? != 1 {
                return Ok(false);
            }
            tx.execute(&step_row(id, new_step, &record, now_ms)).await?;
            Ok(true)
        })
        .await
    }

    /// Takes step `step + 1` of running runbook `id` in one transaction: claims the step (no
    /// other driver can take it), redrives each of `keys` still quarantined with an audit row,
    /// records them as the step's items and audits the step (`record`, its count the number
    /// redriven). `None` when another driver took the step first.
    pub(crate) async fn redrive_step(
        self,
        id: i64,
        step: i64,
        keys: &[&DeliveryKey],
        audit: &super::Audit<'_>,
        record: StepRecord<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<DeliveryKey>>> {
        let now_ms = to_millis(now);
        let mut keys = keys.to_vec();
        // Jobs locked in one order by every bulk step.
        keys.sort_by(|a, b| {
            (a.job().to_string(), a.to_string()).cmp(&(b.job().to_string(), b.to_string()))
        });
        let claim = Statement::new(
            "UPDATE runbooks SET step = step + 1, updated_at = $1
             WHERE id = $2 AND state = 'running' AND step = $3",
        )
        .bind(now_ms)
        .bind(id)
        .bind(step);
        self.within(async |tx| {
            if tx.execute(&claim).await? != 1 {
                return Ok(None);
            }
            let mut redriven = Vec::with_capacity(keys.len());
            for key in keys {
                if super::deliveries::redrive_in(tx, key, audit, now_ms)
                    .await?
                    .is_some()
                {
                    let item = Statement::new(
                        "INSERT INTO runbook_items (runbook_id, delivery_key, step)
                         VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                    )
                    .bind(id)
                    .bind(key)
                    .bind(step + 1);
                    tx.execute(&item).await?;
                    redriven.push(key.clone());
                }
            }
            let taken = StepRecord {
                count: i64::try_from(redriven.len()).unwrap_or(i64::MAX),
                ..record
            };
            tx.execute(&step_row(id, step + 1, &taken, now_ms)).await?;
            Ok(Some(redriven))
        })
        .await
    }
}

impl Deliveries<'_> {
    /// The deliveries with these keys (any job), in no particular order. Each is found through
    /// its job (a delivery key is `<job-key>/…`; no index holds the text keys).
    pub(crate) async fn get_many(self, keys: &HashSet<String>) -> Result<Vec<Delivery>> {
        let mut out = Vec::with_capacity(keys.len());
        let keys: Vec<&String> = keys.iter().collect();
        for chunk in keys.chunks(500) {
            let jobs: HashSet<&str> = chunk
                .iter()
                .filter_map(|k| k.split_once('/').map(|(job, _)| job))
                .collect();
            if jobs.is_empty() {
                continue;
            }
            let recs: Vec<DeliveryRecord> = on_backend!(self, |p, _d| {
                let mut qb = sqlx::QueryBuilder::new(
                    "SELECT d.* FROM jobs j JOIN deliveries d ON d.job_number = j.number
                     WHERE j.key IN (",
                );
                let mut list = qb.separated(", ");
                for job in &jobs {
                    list.push_bind(*job);
                }
                qb.push(") AND d.key IN (");
                let mut list = qb.separated(", ");
                for k in chunk {
                    list.push_bind(k.as_str());
                }
                qb.push(")");
                qb.build_query_as().fetch_all(p).await?
            });
            for r in recs {
                out.push(Delivery::try_from(r)?);
            }
        }
        Ok(out)
    }
}
