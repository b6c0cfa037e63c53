//! A job's data window and the instants around it: plain values below the configuration, the
//! schedule and the ledger, which all speak of them.

use chrono::{DateTime, Days, LocalResult, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;

/// The source data interval of a job: `[start, end)`, as UTC instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Window {
    /// The previous local day of `date` in `tz`.
    pub fn previous_local_day(date: NaiveDate, tz: Tz) -> Option<Window> {
        let prev = date.checked_sub_days(Days::new(1))?;
        Some(Window {
            start: start_of_local_date(prev, tz)?,
            end: start_of_local_date(date, tz)?,
        })
    }

    pub fn hours(&self) -> f64 {
        (self.end - self.start).num_minutes() as f64 / 60.0
    }
}

/// The first instant of a local date: midnight, or the end of a gap that swallows midnight.
pub fn start_of_local_date(date: NaiveDate, tz: Tz) -> Option<DateTime<Utc>> {
    let midnight = date.and_hms_opt(0, 0, 0)?;
    // A gap lasts at most a few hours; walk forward a minute at a time until time exists.
    for minutes in 0..=(24 * 60) {
        let local = midnight.checked_add_signed(chrono::Duration::minutes(minutes))?;
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) => return Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, _) => return Some(first.with_timezone(&Utc)),
            LocalResult::None => continue,
        }
    }
    None
}

/// `2026-10-25T05:30:00Z`: seconds precision, `Z` for UTC.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
