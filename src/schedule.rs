//! When reports fire, which job each fire makes, and the window of data it covers.
//!
//! Fire instants come from the report's cron expression evaluated in its IANA timezone (croner
//! on chrono-tz), never from a fixed UTC offset. Each report makes at most one job per local
//! date: the date's *first* fire. A fixed time inside a DST gap fires once, at the first valid
//! instant after the gap (02:30 on a spring-forward night fires at 03:00); a fixed time that an
//! overlap repeats fires once, at its first occurrence. The window is the previous local day,
//! `[date-1 00:00, date 00:00)`, so it is 23 or 25 hours long around DST changes.
//!
//! Day-of-month and day-of-week combine with OR, as in Vixie cron; prefix the weekday with `+`
//! (`0 0 6 1 * +MON`) to require both.

mod tick;

use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::Serialize;

pub use tick::{SchedulerTick, TickCounts};

use crate::config::Report;
use crate::keys::{JobKey, ReportId};
pub use crate::window::{Window, rfc3339, start_of_local_date};

/// A validated cron expression in a timezone.
#[derive(Debug, Clone)]
pub struct Schedule {
    expr: String,
    cron: Cron,
    tz: Tz,
}

impl Schedule {
    /// Parses a six-field expression (`sec min hour day-of-month month day-of-week`).
    pub fn parse(expr: &str, tz: Tz) -> Result<Schedule, String> {
        let fields = expr.split_whitespace().count();
        if fields != 6 {
            return Err(format!(
                "{expr:?} has {fields} field(s); write six: sec min hour day-of-month month day-of-week (e.g. \"0 30 6 * * *\")"
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| format!("{expr:?} is not a valid cron expression: {e}"))?;
        let schedule = Schedule {
            expr: expr.to_string(),
            cron,
            tz,
        };
        // A pattern such as "0 0 0 31 2 *" parses but never fires.
        let probe = Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or_default();
        if schedule.next_fires(probe, 1).is_empty() {
            return Err(format!("{expr:?} never fires"));
        }
        Ok(schedule)
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// The job-making fires in `(after, until]`: for each local date, its first fire, if that
    /// falls inside the range. Sorted by instant.
    pub fn fires(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut date = after.with_timezone(&self.tz).date_naive();
        while let Some(fire) = self.first_fire_on_or_after(date) {
            if fire > until {
                break;
            }
            if fire > after {
                out.push(fire);
            }
            let fire_date = fire.with_timezone(&self.tz).date_naive();
            match fire_date.checked_add_days(Days::new(1)) {
                Some(next) => date = next,
                None => break,
            }
        }
        out
    }

    /// The next `n` job-making fires after `after`.
    pub fn next_fires(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut cursor = after;
        // Ten years bound the search for patterns that fire rarely (29 February).
        let horizon = after + chrono::Duration::days(3660);
        while out.len() < n {
            let step = (cursor + chrono::Duration::days(400)).min(horizon);
            let found = self.fires(cursor, step);
            if found.is_empty() && step >= horizon {
                break;
            }
            for f in found {
                if out.len() < n {
                    out.push(f);
                }
            }
            cursor = step;
        }
        out
    }

    /// The first fire on `date` (local), if the schedule fires that day.
    pub fn fire_on(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        self.first_fire_on_or_after(date)
            .filter(|f| f.with_timezone(&self.tz).date_naive() == date)
    }

    /// The first fire at or after the start of local `date`.
    fn first_fire_on_or_after(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        let start = start_of_local_date(date, self.tz)?.with_timezone(&self.tz);
        self.cron
            .find_next_occurrence(&start, true)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

/// One fire of one report: the job it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    pub report: ReportId,
    pub key: JobKey,
    pub fire_at: DateTime<Utc>,
    pub window: Window,
}

impl Fire {
    fn new(report: &Report, fire_at: DateTime<Utc>) -> Option<Fire> {
        let date = fire_at.with_timezone(&report.schedule.tz()).date_naive();
        Some(Fire {
            report: report.id.clone(),
            key: JobKey::new(report.id.clone(), date),
            fire_at,
            window: Window::previous_local_day(date, report.schedule.tz())?,
        })
    }

    /// A job for `date` asked for by hand: its scheduled fire if there is one that day,
    /// else the start of the date.
    pub fn for_date(report: &Report, date: NaiveDate) -> Option<Fire> {
        let tz = report.schedule.tz();
        let fire_at = report
            .schedule
            .fire_on(date)
            .or_else(|| start_of_local_date(date, tz))?;
        Some(Fire {
            report: report.id.clone(),
            key: JobKey::new(report.id.clone(), date),
            fire_at,
            window: Window::previous_local_day(date, tz)?,
        })
    }
}

/// Every fire of every report in `(after, until]`, sorted by instant, then report.
pub fn plan<'a>(
    reports: impl IntoIterator<Item = &'a Report>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Fire> {
    let mut fires: Vec<Fire> = reports
        .into_iter()
        .flat_map(|r| {
            r.schedule
                .fires(after, until)
                .into_iter()
                .filter_map(move |t| Fire::new(r, t))
        })
        .collect();
    fires.sort_by(|a, b| (a.fire_at, &a.report).cmp(&(b.fire_at, &b.report)));
    fires
}

/// The `plan --json` line of a fire.
#[derive(Debug, Serialize)]
pub struct FireLine<'a> {
    pub report: &'a ReportId,
    pub key: &'a JobKey,
    pub fire_at: String,
    pub window_start: String,
    pub window_end: String,
    /// `backfill` only: whether this run inserted the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inserted: Option<bool>,
}

impl<'a> From<&'a Fire> for FireLine<'a> {
    fn from(f: &'a Fire) -> Self {
        FireLine {
            report: &f.report,
            key: &f.key,
            fire_at: rfc3339(f.fire_at),
            window_start: rfc3339(f.window.start),
            window_end: rfc3339(f.window.end),
            inserted: None,
        }
    }
}
