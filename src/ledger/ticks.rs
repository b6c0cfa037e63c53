//! The scheduler's state: each report's last tick, and a tick's write — its due jobs and every
//! report's tick record in one transaction.

use super::handles::Ticks;
use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::jobs::{insert_jobs_pg, insert_jobs_sqlite};
use super::{NewJob, Result};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::keys::JobKey;

/// Records ticks of the reports in `$1` at `$2`; never moves a report's last tick backwards.
/// One statement however many reports: PostgreSQL takes them as an array.
const RECORD_TICKS_PG: &str = "INSERT INTO schedule_state (report, last_tick_at)
     SELECT r, $2 FROM UNNEST($1::text[]) AS t(r)
     ON CONFLICT (report) DO UPDATE SET last_tick_at =
        CASE WHEN excluded.last_tick_at > schedule_state.last_tick_at
             THEN excluded.last_tick_at ELSE schedule_state.last_tick_at END";

/// The head of SQLite's multi-row tick record; the rows follow as a `VALUES` list.
const RECORD_TICKS_SQLITE: &str = "INSERT INTO schedule_state (report, last_tick_at) ";

/// The tail of SQLite's multi-row tick record.
const RECORD_TICKS_SQLITE_TAIL: &str = " ON CONFLICT (report) DO UPDATE SET last_tick_at =
        CASE WHEN excluded.last_tick_at > schedule_state.last_tick_at
             THEN excluded.last_tick_at ELSE schedule_state.last_tick_at END";

/// Reports per SQLite statement (two binds each, under SQLite's limit of 32,766).
const SQLITE_TICK_ROWS: usize = 5_000;

impl Ticks<'_> {
    pub async fn last(self, report: &str) -> Result<Option<DateTime<Utc>>> {
        let row: Option<(i64,)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT last_tick_at FROM schedule_state WHERE report = $1")
                .bind(report)
                .fetch_optional(p)
                .await?
        });
        Ok(row.map(|(ms,)| from_millis(ms)))
    }

    /// Every report's last tick, in one read.
    pub async fn last_of_all(self) -> Result<HashMap<String, DateTime<Utc>>> {
        let rows: Vec<(String, i64)> = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT report, last_tick_at FROM schedule_state")
                .fetch_all(p)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|(report, ms)| (report, from_millis(ms)))
            .collect())
    }

    /// Records a tick; never moves a report's last tick backwards.
    pub async fn record(self, report: &str, at: DateTime<Utc>) -> Result<()> {
        self.ticks().tick(&[], &[report], at).await.map(|_| ())
    }

    /// One tick's write, in one transaction: inserts `jobs` (keys that exist are left alone)
    /// and records that every report in `reports` was ticked at `at`, never moving a report's
    /// last tick backwards. Returns the keys inserted. A few statements however many reports.
    pub async fn tick(
        self,
        jobs: &[NewJob],
        reports: &[&str],
        at: DateTime<Utc>,
    ) -> Result<Vec<JobKey>> {
        let ms = to_millis(at);
        match &self.backend {
            super::Backend::Postgres(p) => {
                let mut tx = super::backend::postgres::begin(&self, p).await?;
                let inserted = insert_jobs_pg(&mut tx, jobs, at).await?;
                if !reports.is_empty() {
                    sqlx::query(RECORD_TICKS_PG)
                        .bind(reports)
                        .bind(ms)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(inserted)
            }
            super::Backend::Sqlite(p) => {
                let mut tx = p.begin_with(super::backend::sqlite::BEGIN).await?;
                let inserted = insert_jobs_sqlite(&mut tx, jobs, at).await?;
                for chunk in reports.chunks(SQLITE_TICK_ROWS) {
                    let mut qb = sqlx::QueryBuilder::new(RECORD_TICKS_SQLITE);
                    qb.push_values(chunk, |mut b, r| {
                        b.push_bind(*r).push_bind(ms);
                    });
                    qb.push(RECORD_TICKS_SQLITE_TAIL);
                    qb.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(inserted)
            }
        }
    }
}
