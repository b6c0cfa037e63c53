//! The scheduler's state: each report's last tick.

use chrono::{DateTime, Utc};

use super::{Ledger, Result};
use crate::clock::to_millis;

/// Records a tick; never moves a report's last tick backwards.
const RECORD_TICK: &str = "INSERT INTO schedule_state (report, last_tick_at) VALUES ($1, $2)
     ON CONFLICT (report) DO UPDATE SET last_tick_at =
        CASE WHEN excluded.last_tick_at > schedule_state.last_tick_at
             THEN excluded.last_tick_at ELSE schedule_state.last_tick_at END";

impl Ledger {
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
            sqlx::query(RECORD_TICK)
                .bind(report)
                .bind(to_millis(at))
                .execute(p)
                .await?;
        });
        Ok(())
    }
}
