//! A report's schedule: a six-field cron expression evaluated in an IANA timezone (croner on
//! chrono-tz). Plain data the configuration holds; [`crate::schedule`] turns its fires into jobs.

use std::sync::Arc;

use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::window::start_of_local_date;

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

/// A validated cron expression in a timezone.
#[derive(Debug, Clone)]
pub struct Schedule {
    expr: Arc<str>,
    /// Shared by every report with this expression: croner keeps a byte per possible year
    /// (10 KB a pattern), which 10,000 reports must not each hold.
    cron: Arc<Cron>,
    tz: Tz,
}

impl Schedule {
    /// Parses a six-field expression (`sec min hour day-of-month month day-of-week`).
    pub fn parse(expr: &str, tz: Tz) -> Result<Schedule, CronError> {
        let fields = expr.split_whitespace().count();
        if fields != 6 {
            return Err(CronError::Fields {
                expr: expr.to_string(),
                fields,
            });
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| CronError::Invalid {
                expr: expr.to_string(),
                reason: e.to_string(),
            })?;
        let schedule = Schedule {
            expr: Arc::from(expr),
            cron: Arc::new(cron),
            tz,
        };
        // A pattern such as "0 0 0 31 2 *" parses but never fires.
        let probe = Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or_default();
        if schedule.next_fires(probe, 1).is_empty() {
            return Err(CronError::NeverFires(expr.to_string()));
        }
        Ok(schedule)
    }

    /// The same expression in another timezone, sharing the parsed pattern.
    pub fn in_tz(&self, tz: Tz) -> Schedule {
        Schedule {
            expr: self.expr.clone(),
            cron: self.cron.clone(),
            tz,
        }
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
        // Ten years bound the search for patterns that fire rarely (29 February).
        let horizon = crate::clock::add(after, chrono::Duration::days(3660));
        // As `fires`, one local date at a time, but stopping at the n-th: a search per fire
        // found, not one per day of the horizon.
        let mut date = after.with_timezone(&self.tz).date_naive();
        while out.len() < n {
            let Some(fire) = self.first_fire_on_or_after(date) else {
                break;
            };
            if fire > horizon {
                break;
            }
            if fire > after {
                out.push(fire);
            }
            match fire
                .with_timezone(&self.tz)
                .date_naive()
                .checked_add_days(Days::new(1))
            {
                Some(next) => date = next,
                None => break,
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, 0, 0)
            .single()
            .expect("instant")
    }

    #[test]
    fn next_fires_agrees_with_fires_and_stops_at_n() {
        let s = Schedule::parse("0 30 6 * * MON-FRI", chrono_tz::Europe::Berlin).expect("parse");
        let after = utc(2026, 10, 20, 12);
        let next = s.next_fires(after, 5);
        let all = s.fires(after, utc(2026, 11, 20, 0));
        assert_eq!(next, all[..5], "the first five of the same sequence");
        // 2026-10-25 is a Sunday and the night CEST ends: 26 Oct 06:30 is 05:30Z.
        assert_eq!(
            next[3],
            utc(2026, 10, 26, 5) + chrono::Duration::minutes(30)
        );
    }

    #[test]
    fn a_leap_day_schedule_is_found_years_ahead_and_an_impossible_one_never() {
        let s = Schedule::parse("0 0 9 29 2 *", chrono_tz::UTC).expect("parse");
        assert_eq!(
            s.next_fires(utc(2026, 3, 1, 0), 2),
            [utc(2028, 2, 29, 9), utc(2032, 2, 29, 9)]
        );
        assert!(matches!(
            Schedule::parse("0 0 9 30 2 *", chrono_tz::UTC),
            Err(CronError::NeverFires(_))
        ));
    }
}
