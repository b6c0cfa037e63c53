//! Reads for listing: jobs by filter, newest date first, a page at a time (keyset: a page
//! starts after the last key of the one before, so no page pays for the rows before it).

use super::handles::{Deliveries, Jobs};
use super::{Job, JobFilter, JobRecord, Result};

fn iso(d: chrono::NaiveDate) -> String {
    crate::domain::keys::IsoDate(d).to_string()
}

impl Jobs<'_> {
    /// Jobs newest date first, then by key, filtered by state, report, local date range and
    /// the last error class of any of their deliveries; after `filter.after` when set.
    pub async fn list(self, filter: &JobFilter) -> Result<Vec<Job>> {
        let limit = i64::from(filter.limit.unwrap_or(1000));
        let recs: Vec<JobRecord> = on_backend!(self, |p, _d| {
            let mut qb = sqlx::QueryBuilder::new("SELECT * FROM jobs WHERE TRUE");
            if let Some(s) = filter.state {
                qb.push(" AND state = ").push_bind(s.as_str());
            }
            if let Some(r) = &filter.report {
                qb.push(" AND report = ").push_bind(r.as_str());
            }
            if let Some(d) = filter.from {
                qb.push(" AND local_date >= ").push_bind(iso(d));
            }
            if let Some(d) = filter.to {
                qb.push(" AND local_date <= ").push_bind(iso(d));
            }
            if let Some(c) = filter.class {
                qb.push(
                    " AND EXISTS (SELECT 1 FROM deliveries d WHERE d.job_number = jobs.number AND d.last_class = ",
                )
                .push_bind(c.as_str())
                .push(")");
            }
            if let Some(k) = &filter.after {
                let date = iso(k.date());
                qb.push(" AND (local_date < ")
                    .push_bind(date.clone())
                    .push(" OR (local_date = ")
                    .push_bind(date)
                    .push(" AND key > ")
                    .push_bind(k.to_string())
                    .push("))");
            }
            qb.push(" ORDER BY local_date DESC, key LIMIT ")
                .push_bind(limit);
            qb.build_query_as().fetch_all(p).await?
        });
        recs.into_iter().map(Job::try_from).collect()
    }
}

impl Deliveries<'_> {
    /// Attempts finished at or after `since`, by hour (the hour's start, UTC) and class.
    pub(crate) async fn attempts_by_hour(
        self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<
        Vec<(
            chrono::DateTime<chrono::Utc>,
            crate::domain::outcome::ResponseClass,
            i64,
        )>,
    > {
        const HOUR_MS: i64 = 3_600_000;
        let rows: Vec<(i64, String, i64)> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT finished_at / 3600000 AS hour, class, COUNT(*) FROM delivery_attempts
                 WHERE finished_at >= $1 GROUP BY hour, class ORDER BY hour, class",
            )
            .bind(crate::domain::clock::to_millis(since))
            .fetch_all(p)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(h, c, n)| {
                let at = crate::domain::clock::from_millis(h.saturating_mul(HOUR_MS));
                (at, crate::domain::outcome::ResponseClass::parse(&c), n)
            })
            .collect())
    }

    /// Each report's last accepted delivery finished at or after `since`.
    pub(crate) async fn last_accepted_by_report(
        self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, chrono::DateTime<chrono::Utc>)>> {
        let rows: Vec<(String, i64)> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT j.report, MAX(a.finished_at) FROM delivery_attempts a
                   JOIN jobs j ON j.number = a.job_number
                 WHERE a.class = 'accepted' AND a.finished_at >= $1
                 GROUP BY j.report",
            )
            .bind(crate::domain::clock::to_millis(since))
            .fetch_all(p)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(r, ms)| (r, crate::domain::clock::from_millis(ms)))
            .collect())
    }
}
