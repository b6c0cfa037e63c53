//! When reports fire, which job each fire makes, and the window of data it covers.
//!
//! Fire instants come from the report's cron expression evaluated in its IANA timezone, never
//! from a fixed UTC offset ([`crate::domain::cron`] states the rule: one fire per matching local date,
//! at its first matching wall-clock time, a time a DST gap swallows firing at the gap's end and
//! keeping its date; Vixie cron's day rule). Each fire makes one job keyed by its local date. The
//! window is the report's `window` counted back from that date, between local midnights: by
//! default the previous local day, `[date-1 00:00, date 00:00)`, so 23 or 25 hours long around
//! DST changes; a week across one is 167 or 169 hours.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::config::{Calendar, OnHoliday, Report};
use crate::domain::cron::Occurrence;
use crate::domain::keys::{JobKey, ReportId};
use crate::domain::window::{Period, Window, rfc3339, start_of_local_date};

/// One fire of one report: the job it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    pub report: ReportId,
    pub key: JobKey,
    pub fire_at: DateTime<Utc>,
    pub window: Window,
    /// What the report's calendar did to it: nothing, moved it, or skipped it.
    pub calendar: Option<CalendarNote>,
}

/// A fire on a day its report's calendar says is not a business day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarNote {
    /// Why the day is closed: the holiday's name, or its weekday.
    pub reason: String,
    /// Skipped (no job); else moved to the next business day (`fire_at`), keeping its key.
    pub skipped: bool,
}

impl Fire {
    fn new(report: &Report, fire: Occurrence) -> Option<Fire> {
        Some(Fire {
            report: report.id.clone(),
            key: JobKey::new(report.id.clone(), fire.date),
            fire_at: fire.at,
            window: window_of(report, fire.date)?,
            calendar: None,
        })
    }

    /// The fire of `occurrence` under `calendar`, which the report's `on_holiday` applies.
    fn under_calendar(
        report: &Report,
        (calendar, on_holiday): (&Calendar, OnHoliday),
        occurrence: Occurrence,
    ) -> Option<Fire> {
        let mut fire = Fire::new(report, occurrence)?;
        let Some(reason) = calendar.closed(occurrence.date) else {
            return Some(fire);
        };
        let moved = match on_holiday {
            OnHoliday::Skip => None,
            OnHoliday::NextBusinessDay => {
                calendar.next_business_day(occurrence.date).and_then(|day| {
                    crate::domain::window::resolve_local(
                        day.and_time(report.schedule.time_of_day()),
                        report.schedule.tz(),
                    )
                })
            }
        };
        fire.calendar = Some(CalendarNote {
            reason,
            skipped: moved.is_none(),
        });
        fire.fire_at = moved.unwrap_or(fire.fire_at);
        Some(fire)
    }

    /// Whether this fire makes a job (it was not skipped by a calendar).
    pub fn fires(&self) -> bool {
        !self.calendar.as_ref().is_some_and(|c| c.skipped)
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
            window: window_of(report, date)?,
            calendar: None,
        })
    }
}

/// The window of `report`'s job of local `date`: its `window` period counted back from the
/// date.
pub fn window_of(report: &Report, date: NaiveDate) -> Option<Window> {
    let previous = match report.period {
        Period::SincePrevious => previous_fire_date(report, date),
        _ => None,
    };
    Window::of_dates(report.period.dates(date, previous)?, report.timezone())
}

/// The local date of `report`'s scheduled fire before `date`, within ten years: the latest
/// date the schedule fires on that made a job (a date its calendar skips did not; one it moved
/// to the next business day kept its date, and counts).
pub fn previous_fire_date(report: &Report, date: NaiveDate) -> Option<NaiveDate> {
    let calendar = (report.calendar.as_ref())
        .filter(|rc| rc.on_holiday == OnHoliday::Skip)
        .map(|rc| rc.cell.get());
    let mut d = date;
    for _ in 0..3660 {
        d = d.pred_opt()?;
        let skipped = || calendar.as_ref().is_some_and(|c| c.closed(d).is_some());
        if report.schedule.matches_date(d) && !skipped() {
            return Some(d);
        }
    }
    None
}

/// `report`'s fires in `(after, until]`, the ones its calendar skips included (at the instant
/// they would have fired), and moved ones at the instant they fire.
fn report_fires(report: &Report, after: DateTime<Utc>, until: DateTime<Utc>) -> Vec<Fire> {
    let Some(rc) = &report.calendar else {
        return report
            .schedule
            .fires(after, until)
            .into_iter()
            .filter_map(|o| Fire::new(report, o))
            .collect();
    };
    let tz = report.schedule.tz();
    let day_of = |t: DateTime<Utc>| t.with_timezone(&tz).date_naive();
    let (Some(first), last) = (day_of(after).pred_opt(), day_of(until)) else {
        return Vec::new();
    };
    // A fire moved to a business day comes from the closed days just before it.
    // One calendar for the whole walk (the tick refreshes it before it plans).
    let calendar = rc.cell.get();
    let back = calendar.closed_before(first).len() as u64;
    let first = first
        .checked_sub_days(chrono::Days::new(back))
        .unwrap_or(first);
    first
        .iter_days()
        .take_while(|d| *d <= last)
        .filter_map(|d| report.schedule.occurrence(d))
        .filter_map(|o| Fire::under_calendar(report, (&calendar, rc.on_holiday), o))
        .filter(|f| f.fire_at > after && f.fire_at <= until)
        .collect()
}

/// The next `n` fires of `report` after `after` (skipped ones included, within ten years).
pub fn next_fires(report: &Report, after: DateTime<Utc>, n: usize) -> Vec<Fire> {
    if report.calendar.is_none() {
        // Day by day until `n` are found: `check` asks this of every report.
        let tz = report.schedule.tz();
        let Some(first) = after.with_timezone(&tz).date_naive().pred_opt() else {
            return Vec::new();
        };
        return first
            .iter_days()
            .take(3660)
            .filter_map(|d| report.schedule.occurrence(d))
            .filter(|o| o.at > after)
            .take(n)
            .filter_map(|o| Fire::new(report, o))
            .collect();
    }
    let mut out = Vec::new();
    let mut from = after;
    for _ in 0..120 {
        let until = crate::domain::clock::add(from, chrono::Duration::days(31));
        let mut batch = report_fires(report, from, until);
        batch.sort_by_key(|f| f.fire_at);
        out.extend(batch);
        if out.len() >= n || until <= from {
            break;
        }
        from = until;
    }
    out.truncate(n);
    out
}

/// Every fire of every report in `(after, until]` that makes a job — a calendar's moved
/// fires at their new instant, its skipped ones left out —, sorted by instant, then report.
pub fn plan<'a, R: AsRef<Report> + 'a>(
    reports: impl IntoIterator<Item = &'a R>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Fire> {
    let mut fires = plan_all(reports, after, until);
    fires.retain(Fire::fires);
    fires
}

/// [`plan`] with the fires calendars skip (what `plan` prints).
pub fn plan_all<'a, R: AsRef<Report> + 'a>(
    reports: impl IntoIterator<Item = &'a R>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Fire> {
    let mut fires: Vec<Fire> = reports
        .into_iter()
        .flat_map(|r| report_fires(r.as_ref(), after, until))
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
    /// With a calendar, on a closed day: `"skipped"` or `"moved"`, and why (`holiday`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calendar: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holiday: Option<&'a str>,
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
            calendar: f
                .calendar
                .as_ref()
                .map(|c| if c.skipped { "skipped" } else { "moved" }),
            holiday: f.calendar.as_ref().map(|c| c.reason.as_str()),
        }
    }
}
