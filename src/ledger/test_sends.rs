//! Test sends: a report rendered for a date and emailed to one address an operator typed,
//! recorded with who asked, through what and what came of it. No job, delivery, recipient
//! list, suppression or send decision reads them.

use chrono::{DateTime, Utc};

use super::Result;
use super::audit::Audit;
use super::backend::tx::Statement;
use super::handles::Recipients;
use crate::domain::clock::{from_millis, to_millis};

/// One test send to record.
#[derive(Debug, Clone)]
pub struct NewTestSend<'a> {
    pub report: &'a str,
    pub date: &'a str,
    pub address: &'a str,
    /// `accepted`, or the class of what failed.
    pub outcome: &'a str,
    pub detail: &'a str,
    pub at: DateTime<Utc>,
}

/// A test send recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSend {
    pub report: String,
    pub date: String,
    pub address: String,
    pub by: String,
    pub via: String,
    pub at: DateTime<Utc>,
    pub outcome: String,
    pub detail: String,
}

const INSERT: &str = "INSERT INTO test_sends (report_id, local_date, address, sent_by, via, at,
        outcome, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

const OF_REPORT: &str = "SELECT report_id, local_date, address, sent_by, via, at, outcome, detail
     FROM test_sends WHERE report_id = $1 ORDER BY at DESC, id DESC LIMIT $2";

type Row = (String, String, String, String, String, i64, String, String);

impl Recipients<'_> {
    /// Records test send `t`, asked for under `audit`.
    pub async fn test_sent(self, t: &NewTestSend<'_>, audit: &Audit<'_>) -> Result<()> {
        let st = Statement::new(INSERT)
            .bind(t.report)
            .bind(t.date)
            .bind(t.address)
            .bind(audit.by())
            .bind(audit.via().as_str())
            .bind(to_millis(t.at))
            .bind(t.outcome)
            .bind(t.detail);
        self.execute(&st).await.map(|_| ())
    }

    /// Report `report`'s latest `limit` test sends, newest first.
    pub async fn test_sends(self, report: &str, limit: u32) -> Result<Vec<TestSend>> {
        let st = Statement::new(OF_REPORT)
            .bind(report)
            .bind(i64::from(limit));
        let rows = self
            .within(async |tx| tx.fetch_all::<Row>(&st).await)
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(report, date, address, by, via, at, outcome, detail)| TestSend {
                    report,
                    date,
                    address,
                    by,
                    via,
                    at: from_millis(at),
                    outcome,
                    detail,
                },
            )
            .collect())
    }
}
