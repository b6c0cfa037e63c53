//! Signed run requests (`POST /v1/runs`): each webhook-id is recorded once, with the job it
//! made, so a replayed request answers as the first did.

use chrono::{DateTime, Utc};

use super::jobs::{JOB_INSERT_ONE, JobRow};
use super::types::parse_key;
use super::{IngestOutcome, Ledger, NewJob, Result};
use crate::clock::to_millis;

const CLAIM_WEBHOOK_ID: &str =
    "INSERT INTO ingest_events (webhook_id, job_key, received_at) VALUES ($1, $2, $3)
     ON CONFLICT DO NOTHING RETURNING job_key";

impl Ledger {
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

        on_backend!(self, |p, d| {
            let mut tx = p.begin_with(d::BEGIN).await?;
            let claimed: Option<(String,)> = sqlx::query_as(CLAIM_WEBHOOK_ID)
                .bind(webhook_id)
                .bind(&job.key)
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
                    job_key: parse_key(&job_key)?,
                    created: false,
                    replayed: true,
                });
            }
            let row = JobRow::of(job);
            let created: Option<(String,)> = sqlx::query_as(JOB_INSERT_ONE)
                .bind(row.key)
                .bind(row.report)
                .bind(row.date)
                .bind(row.origin)
                .bind(row.fire)
                .bind(row.start)
                .bind(row.end)
                .bind(row.ready)
                .bind(now_ms)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(IngestOutcome {
                job_key: job.key.clone(),
                created: created.is_some(),
                replayed: false,
            })
        })
    }
}
