//! Signed run requests (`POST /v1/runs`): each webhook-id is recorded once, with the job it
//! made, so a replayed request answers as the first did.

use chrono::{DateTime, Utc};

use super::backend::tx::Statement;
use super::jobs::{JOB_INSERT_ONE, JobRow};
use super::types::parse_key;
use super::{IngestOutcome, Ledger, NewJob, Result};
use crate::domain::clock::to_millis;

const CLAIM_WEBHOOK_ID: &str =
    "INSERT INTO ingest_events (webhook_id, job_key, received_at) VALUES ($1, $2, $3)
     ON CONFLICT DO NOTHING RETURNING job_key";

impl Ledger {
    /// A signed run request: records its webhook-id and inserts its job in one transaction.
    /// A webhook-id seen before returns the job it made; an existing job key is not inserted
    /// again.
    pub(crate) async fn ingest_run(
        &self,
        webhook_id: &str,
        job: &NewJob,
        now: DateTime<Utc>,
    ) -> Result<IngestOutcome> {
        let now_ms = to_millis(now);
        let row = JobRow::of(job);
        let claim = Statement::new(CLAIM_WEBHOOK_ID)
            .bind(webhook_id)
            .bind(row.key.as_str())
            .bind(now_ms);
        let insert = Statement::new(JOB_INSERT_ONE)
            .bind(row.key.as_str())
            .bind(row.report.as_str())
            .bind(row.date.as_str())
            .bind(row.origin)
            .bind(row.fire)
            .bind(row.start)
            .bind(row.end)
            .bind(row.ready)
            .bind(now_ms);
        // `None`: the webhook-id was seen before (nothing written).
        let created = self
            .within(async |tx| {
                if tx.fetch_optional::<(String,)>(&claim).await?.is_none() {
                    return Ok(None);
                }
                Ok(Some(
                    tx.fetch_optional::<(String,)>(&insert).await?.is_some(),
                ))
            })
            .await?;
        if let Some(created) = created {
            return Ok(IngestOutcome {
                job_key: job.key.clone(),
                created,
                replayed: false,
            });
        }
        let sql = "SELECT job_key FROM ingest_events WHERE webhook_id = $1";
        let (job_key,): (String,) = on_backend!(self, |p, _d| sqlx::query_as(sql)
            .bind(webhook_id)
            .fetch_one(p)
            .await?);
        Ok(IngestOutcome {
            job_key: parse_key(&job_key)?,
            created: false,
            replayed: true,
        })
    }
}
