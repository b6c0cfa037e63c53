//! A job's data window and the instants around it: plain values below the configuration, the
//! schedule and the ledger, which all speak of them.

use chrono::{DateTime, Days, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
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
    resolve_local(date.and_hms_opt(0, 0, 0)?, tz)
}

/// The instant a local wall-clock time names: itself, its first occurrence when an overlap
/// repeats it, or the first valid instant after the gap that swallows it.
pub(crate) fn resolve_local(local: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => gap_end(local, tz),
    }
}

/// The first valid instant after the gap holding `local`. A gap lasts at most a day; walk
/// forward a minute at a time to the first time that exists, then back a second at a time to
/// where its offset began (a transition need not fall on a whole minute).
fn gap_end(local: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    let after = (1..=(24 * 60)).find_map(|minutes| {
        let t = local.checked_add_signed(chrono::Duration::minutes(minutes))?;
        match tz.from_local_datetime(&t) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
            LocalResult::None => None,
        }
    })?;
    let offset = tz.offset_from_utc_datetime(&after.naive_utc()).fix();
    (1..60)
        .rev()
        .filter_map(|s| after.checked_sub_signed(chrono::Duration::seconds(s)))
        .find(|t| tz.offset_from_utc_datetime(&t.naive_utc()).fix() == offset)
        .or(Some(after))
}

/// `2026-10-25T05:30:00Z`: seconds precision, `Z` for UTC.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
