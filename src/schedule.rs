//! When reports fire, which job each fire makes, and the window of data it covers.
//!
//! Fire instants come from the report's cron expression evaluated in its IANA timezone, never
//! from a fixed UTC offset ([`crate::cron`] states the rule: one fire per matching local date,
//! at its first matching wall-clock time, a time a DST gap swallows firing at the gap's end and
//! keeping its date; Vixie cron's day rule). Each fire makes one job keyed by its local date. The
//! window is the previous local day, `[date-1 00:00, date 00:00)`, so it is 23 or 25 hours long
//! around DST changes.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::config::Report;
use crate::cron::Occurrence;
use crate::keys::{JobKey, ReportId};
use crate::window::{Window, rfc3339, start_of_local_date};

/// One fire of one report: the job it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fire {
    pub report: ReportId,
    pub key: JobKey,
    pub fire_at: DateTime<Utc>,
    pub window: Window,
}

impl Fire {
    fn new(report: &Report, fire: Occurrence) -> Option<Fire> {
        Some(Fire {
            report: report.id.clone(),
            key: JobKey::new(report.id.clone(), fire.date),
            fire_at: fire.at,
            window: Window::previous_local_day(fire.date, report.schedule.tz())?,
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
pub fn plan<'a, R: AsRef<Report> + 'a>(
    reports: impl IntoIterator<Item = &'a R>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<Fire> {
    let mut fires: Vec<Fire> = reports
        .into_iter()
        .flat_map(|r| {
            let r = r.as_ref();
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
