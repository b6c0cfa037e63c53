//! A report's schedule: a six-field cron expression evaluated in an IANA timezone. Plain data the
//! configuration holds; [`crate::report::schedule`] turns its fires into jobs.
//!
//! croner parses the expression and matches days; the fire of each local date is computed here,
//! one date at a time, so that the rule below holds on every date, DST changes included:
//!
//! - a local date on which the day fields match gets exactly one fire, keyed by that date, at its
//!   first matching wall-clock time (the least second, minute and hour the pattern allows);
//! - if a DST gap swallows that time, the fire is the first valid instant after the gap (02:30
//!   on a spring-forward night fires at 03:00), and it keeps its own date even when the gap ends
//!   on the next date;
//! - if an overlap repeats that time, the fire is its first occurrence.
//!
//! The day rule is Vixie cron's: day-of-month and day-of-week combine with OR, unless either
//! field starts with `*` (or `?`: `*`, `*/4`, `*/2`), when they combine with AND. A weekday field
//! prefixed with `+` (`0 0 6 1-7 * +MON`) asks for AND as well.

use std::sync::Arc;

use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::domain::window::resolve_local;

/// Why an expression is not a schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error(
        "{expr:?} has {fields} field(s); write six: sec min hour day-of-month month day-of-week (e.g. \"0 30 6 * * *\")"
    )]
    Fields { expr: String, fields: usize },
    #[error("{expr:?} is not a valid cron expression: {reason}")]
    Invalid { expr: String, reason: String },
    #[error("{0:?} never fires")]
    NeverFires(String),
}

/// One job-making fire: the local date it is for and the instant it fires at. The instant is on
/// that date but for a DST gap at the end of the day, whose fire is the gap's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub date: NaiveDate,
    pub at: DateTime<Utc>,
}

/// The parsed pattern, shared by every report with this expression: croner keeps a byte per
/// possible year (10 KB a pattern), which 10,000 reports must not each hold.
#[derive(Debug)]
struct Pattern {
    cron: Cron,
    /// The first wall-clock time of a day the pattern matches.
    first: NaiveTime,
}

/// A validated cron expression in a timezone.
#[derive(Debug, Clone)]
pub struct CronExpr {
    expr: Arc<str>,
    pattern: Arc<Pattern>,
    tz: Tz,
}

/// Ten years bound the search for patterns that fire rarely (29 February).
const HORIZON_DAYS: u64 = 3660;

impl CronExpr {
    /// Parses a six-field expression (`sec min hour day-of-month month day-of-week`).
    pub fn parse(expr: &str, tz: Tz) -> Result<CronExpr, CronError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(CronError::Fields {
                expr: expr.to_string(),
                fields: fields.len(),
            });
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .dom_and_dow(days_combine_with_and(fields[3], fields[5]))
            .build()
            .parse(expr)
            .map_err(|e| CronError::Invalid {
                expr: expr.to_string(),
                reason: e.to_string(),
            })?;
        let first = first_time(&cron).ok_or_else(|| CronError::NeverFires(expr.to_string()))?;
        let schedule = CronExpr {
            expr: Arc::from(expr),
            pattern: Arc::new(Pattern { cron, first }),
            tz,
        };
        // A pattern such as "0 0 0 31 2 *" parses but never fires.
        let probe = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap_or_default();
        if !probe
            .iter_days()
            .take(HORIZON_DAYS as usize)
            .any(|d| schedule.matches_date(d))
        {
            return Err(CronError::NeverFires(expr.to_string()));
        }
        Ok(schedule)
    }

    /// The same expression in another timezone, sharing the parsed pattern.
    pub fn in_tz(&self, tz: Tz) -> CronExpr {
        CronExpr {
            expr: self.expr.clone(),
            pattern: self.pattern.clone(),
            tz,
        }
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// The wall-clock time of a day the schedule fires at (its first matching time).
    pub(crate) fn time_of_day(&self) -> NaiveTime {
        self.pattern.first
    }

    /// Whether the pattern's day fields (day-of-month, month, day-of-week) match `date`.
    pub(crate) fn matches_date(&self, date: NaiveDate) -> bool {
        let p = &self.pattern.cron.pattern;
        p.month_match(date.month()).unwrap_or(false)
            && p.day_match(date.year(), date.month(), date.day())
                .unwrap_or(false)
    }

    /// The fire of local `date`, if the schedule fires that day.
    pub fn fire_on(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        if !self.matches_date(date) {
            return None;
        }
        resolve_local(date.and_time(self.pattern.first), self.tz)
    }

    /// The job-making fires in `(after, until]`, one per local date, sorted by instant.
    pub fn fires(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Vec<Occurrence> {
        let (Some(first), Some(last)) = (self.date_before(after, 1), self.date_before(until, 0))
        else {
            return Vec::new();
        };
        first
            .iter_days()
            .take_while(|d| *d <= last)
            .filter_map(|d| self.occurrence(d))
            .filter(|o| o.at > after && o.at <= until)
            .collect()
    }

    /// The next `n` job-making fires after `after`, within ten years.
    pub fn next_fires(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let Some(first) = self.date_before(after, 1) else {
            return Vec::new();
        };
        first
            .iter_days()
            .take(HORIZON_DAYS as usize)
            .filter_map(|d| self.occurrence(d))
            .filter(|o| o.at > after)
            .take(n)
            .map(|o| o.at)
            .collect()
    }

    /// The fire of local `date` with its date, if the schedule fires that day.
    pub fn occurrence(&self, date: NaiveDate) -> Option<Occurrence> {
        Some(Occurrence {
            date,
            at: self.fire_on(date)?,
        })
    }

    /// The local date of `t`, less `days`. A date's fire is never before the start of the date
    /// and at most a gap's length into the next, so a walk over dates starts a day early.
    fn date_before(&self, t: DateTime<Utc>, days: u64) -> Option<NaiveDate> {
        t.with_timezone(&self.tz)
            .date_naive()
            .checked_sub_days(Days::new(days))
    }
}

/// Vixie cron's rule: the day fields combine with AND when either starts with `*` (`?` is the
/// same), or when the weekday asks for it with `+`; otherwise with OR.
fn days_combine_with_and(dom: &str, dow: &str) -> bool {
    let starred = |f: &str| f.starts_with('*') || f.starts_with('?');
    starred(dom) || starred(dow) || dow.starts_with('+')
}

/// The least second, minute and hour the pattern allows.
fn first_time(cron: &Cron) -> Option<NaiveTime> {
    let p = &cron.pattern;
    let second = (0..60).find(|s| p.second_match(*s).unwrap_or(false))?;
    let minute = (0..60).find(|m| p.minute_match(*m).unwrap_or(false))?;
    let hour = (0..24).find(|h| p.hour_match(*h).unwrap_or(false))?;
    NaiveTime::from_hms_opt(hour, minute, second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, 0, 0)
            .single()
            .expect("instant")
    }

    #[test]
    fn next_fires_agrees_with_fires_and_stops_at_n() {
        let s = CronExpr::parse("0 30 6 * * MON-FRI", chrono_tz::Europe::Berlin).expect("parse");
        let after = utc(2026, 10, 20, 12);
        let next = s.next_fires(after, 5);
        let all: Vec<_> = s
            .fires(after, utc(2026, 11, 20, 0))
            .into_iter()
            .map(|o| o.at)
            .collect();
        assert_eq!(next, all[..5], "the first five of the same sequence");
        // 2026-10-25 is a Sunday and the night CEST ends: 26 Oct 06:30 is 05:30Z.
        assert_eq!(
            next[3],
            utc(2026, 10, 26, 5) + chrono::Duration::minutes(30)
        );
    }

    #[test]
    fn a_leap_day_schedule_is_found_years_ahead_and_an_impossible_one_never() {
        let s = CronExpr::parse("0 0 9 29 2 *", chrono_tz::UTC).expect("parse");
        assert_eq!(
            s.next_fires(utc(2026, 3, 1, 0), 2),
            [utc(2028, 2, 29, 9), utc(2032, 2, 29, 9)]
        );
        assert!(matches!(
            CronExpr::parse("0 0 9 30 2 *", chrono_tz::UTC),
            Err(CronError::NeverFires(_))
        ));
    }

    #[test]
    fn a_starred_day_field_makes_the_day_fields_combine_with_and() {
        // Vixie cron: `*/4` starts with `*`, so day-of-month AND day-of-week.
        let s = CronExpr::parse("0 10 1 */4 2-5 SUN-SAT", chrono_tz::UTC).expect("parse");
        let days: Vec<u32> = (1..=28)
            .filter_map(|d| NaiveDate::from_ymd_opt(2027, 2, d))
            .filter(|d| s.matches_date(*d))
            .map(|d| d.day())
            .collect();
        assert_eq!(days, [1, 5, 9, 13, 17, 21, 25]);
        // Neither starred: OR. 2027-02-01 is a Monday.
        let s = CronExpr::parse("0 0 6 13 * FRI", chrono_tz::UTC).expect("parse");
        let fridays_or_13th: Vec<u32> = (1..=28)
            .filter_map(|d| NaiveDate::from_ymd_opt(2027, 2, d))
            .filter(|d| s.matches_date(*d))
            .map(|d| d.day())
            .collect();
        assert_eq!(fridays_or_13th, [5, 12, 13, 19, 26]);
        // `+` asks for AND: Friday the 13th only.
        let s = CronExpr::parse("0 0 6 13 * +FRI", chrono_tz::UTC).expect("parse");
        assert!(
            s.fires(utc(2027, 1, 1, 0), utc(2028, 1, 1, 0))
                .iter()
                .all(|o| o.date.weekday() == chrono::Weekday::Fri && o.date.day() == 13)
        );
    }

    #[test]
    fn a_gap_at_the_end_of_a_day_fires_at_its_end_and_keeps_the_date() {
        // America/Nuuk, 2027-03-27: 23:00 -02 jumps to 00:00 -01 on the 28th.
        let s = CronExpr::parse("0 30 23 * * *", chrono_tz::America::Nuuk).expect("parse");
        let fires = s.fires(utc(2027, 3, 26, 12), utc(2027, 3, 30, 12));
        let dates: Vec<String> = fires.iter().map(|o| o.date.to_string()).collect();
        assert_eq!(
            dates,
            ["2027-03-26", "2027-03-27", "2027-03-28", "2027-03-29"]
        );
        assert_eq!(fires[1].at, utc(2027, 3, 28, 1), "the gap's end, 00:00 -01");
    }
}
