//! A job's data window and the instants around it: plain values below the configuration, the
//! schedule and the ledger, which all speak of them.

use chrono::{
    DateTime, Datelike, Days, LocalResult, Months, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc,
    Weekday,
};
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
        Window::of_dates(Period::Day.dates(date, None)?, tz)
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

/// What a job's window covers, counted back from the local date it fires on: the day before
/// it (the default), the last complete week (starting on a given weekday), calendar month or
/// quarter before it, or everything since the report's previous scheduled fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Period {
    #[default]
    Day,
    Week(Weekday),
    Month,
    Quarter,
    SincePrevious,
}

impl Period {
    /// The period a config word names (`week` starting on `week_starts`), or `None`.
    pub fn parse(word: &str, week_starts: Weekday) -> Option<Period> {
        Some(match word {
            "day" => Period::Day,
            "week" => Period::Week(week_starts),
            "month" => Period::Month,
            "quarter" => Period::Quarter,
            "since_previous" => Period::SincePrevious,
            _ => return None,
        })
    }

    /// The config word: `day`, `week`, `month`, `quarter` or `since_previous`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week(_) => "week",
            Period::Month => "month",
            Period::Quarter => "quarter",
            Period::SincePrevious => "since_previous",
        }
    }

    /// The local dates `[first, end)` the window of a job fired on `date` covers. `previous`
    /// is the report's previous scheduled fire's date, which only `since_previous` reads; without
    /// one (the schedule never fired before) it covers the day before, as `day` does.
    pub fn dates(
        self,
        date: NaiveDate,
        previous: Option<NaiveDate>,
    ) -> Option<(NaiveDate, NaiveDate)> {
        let (first, end) = match self {
            Period::Day => (date.checked_sub_days(Days::new(1))?, date),
            Period::Week(starts) => {
                let back =
                    (7 + date.weekday().num_days_from_monday() - starts.num_days_from_monday()) % 7;
                let end = date.checked_sub_days(Days::new(u64::from(back)))?;
                (end.checked_sub_days(Days::new(7))?, end)
            }
            Period::Month => {
                let end = date.with_day(1)?;
                (end.checked_sub_months(Months::new(1))?, end)
            }
            Period::Quarter => {
                let end = NaiveDate::from_ymd_opt(date.year(), (date.month0() / 3) * 3 + 1, 1)?;
                (end.checked_sub_months(Months::new(3))?, end)
            }
            Period::SincePrevious => match previous.filter(|p| *p < date) {
                Some(p) => (p, date),
                None => (date.checked_sub_days(Days::new(1))?, date),
            },
        };
        Some((first, end))
    }

    /// How a reader names the window `[first, end)` of local dates: `2026-12-06` (a day),
    /// `week 49, 2026` (the ISO week holding the week's fourth day, which for weeks starting on
    /// Monday is ISO 8601's own week), `November 2026`, `Q4 2026`, else `2026-12-04 – 2026-12-06`
    /// (its first and last dates: `since_previous`, or a window a period cannot name).
    pub fn label(self, first: NaiveDate, end: NaiveDate) -> String {
        let days = (end - first).num_days();
        let last = end.pred_opt().unwrap_or(end);
        let whole_months =
            |n: u32| first.day() == 1 && first.checked_add_months(Months::new(n)) == Some(end);
        match self {
            _ if days == 1 => first.to_string(),
            Period::Week(_) if days == 7 => {
                let week = first
                    .checked_add_days(Days::new(3))
                    .unwrap_or(first)
                    .iso_week();
                format!("week {}, {}", week.week(), week.year())
            }
            Period::Month if whole_months(1) => first.format("%B %Y").to_string(),
            Period::Quarter if whole_months(3) && first.month0().is_multiple_of(3) => {
                format!("Q{} {}", first.month0() / 3 + 1, first.year())
            }
            _ => format!("{first} – {last}"),
        }
    }
}

/// A weekday as configuration writes it: `monday` … `sunday` (any case, or its three letters).
pub fn parse_weekday(word: &str) -> Option<Weekday> {
    word.parse::<Weekday>().ok()
}

impl Window {
    /// The window from the start of local date `first` to the start of local date `end`.
    pub fn of_dates((first, end): (NaiveDate, NaiveDate), tz: Tz) -> Option<Window> {
        Some(Window {
            start: start_of_local_date(first, tz)?,
            end: start_of_local_date(end, tz)?,
        })
    }

    /// The local dates `[first, end)` the window covers in `tz`.
    pub fn local_dates(&self, tz: Tz) -> (NaiveDate, NaiveDate) {
        (
            self.start.with_timezone(&tz).date_naive(),
            self.end.with_timezone(&tz).date_naive(),
        )
    }

    /// How a reader names the window, a `period`'s in `tz` ([`Period::label`]).
    pub fn label(&self, period: Period, tz: Tz) -> String {
        let (first, end) = self.local_dates(tz);
        period.label(first, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().expect("date")
    }

    fn dates(p: Period, fired: &str) -> (String, String) {
        let (first, end) = p.dates(d(fired), None).expect("dates");
        (first.to_string(), end.to_string())
    }

    #[test]
    fn each_period_is_the_last_complete_one_before_the_fire() {
        let week = Period::Week(Weekday::Mon);
        // Fired on a Monday, or on the Wednesday after: the same complete week before it.
        assert_eq!(
            dates(week, "2026-12-07"),
            ("2026-11-30".into(), "2026-12-07".into())
        );
        assert_eq!(
            dates(week, "2026-12-09"),
            ("2026-11-30".into(), "2026-12-07".into())
        );
        let sunday = Period::Week(Weekday::Sun);
        assert_eq!(
            dates(sunday, "2026-12-07"),
            ("2026-11-29".into(), "2026-12-06".into())
        );
        assert_eq!(
            dates(Period::Month, "2026-12-01"),
            ("2026-11-01".into(), "2026-12-01".into())
        );
        assert_eq!(
            dates(Period::Month, "2026-12-31"),
            ("2026-11-01".into(), "2026-12-01".into())
        );
        assert_eq!(
            dates(Period::Quarter, "2027-01-03"),
            ("2026-10-01".into(), "2027-01-01".into())
        );
        assert_eq!(
            dates(Period::Quarter, "2026-12-31"),
            ("2026-07-01".into(), "2026-10-01".into())
        );
        assert_eq!(
            dates(Period::Day, "2026-03-01"),
            ("2026-02-28".into(), "2026-03-01".into())
        );
        let since = Period::SincePrevious.dates(d("2026-12-07"), Some(d("2026-12-04")));
        assert_eq!(since, Some((d("2026-12-04"), d("2026-12-07"))));
        // Without a previous fire it reads the day before.
        let first = Period::SincePrevious.dates(d("2026-12-07"), None);
        assert_eq!(first, Some((d("2026-12-06"), d("2026-12-07"))));
    }

    #[test]
    fn a_window_is_named_as_a_reader_says_it() {
        let label = |p: Period, fired: &str, previous: Option<&str>| {
            let (first, end) = p.dates(d(fired), previous.map(d)).expect("dates");
            p.label(first, end)
        };
        assert_eq!(label(Period::Day, "2026-12-07", None), "2026-12-06");
        assert_eq!(
            label(Period::Week(Weekday::Mon), "2026-12-07", None),
            "week 49, 2026"
        );
        // ISO 8601: the week of 2027-01-01 (a Friday) is week 53 of 2026.
        assert_eq!(
            label(Period::Week(Weekday::Mon), "2027-01-04", None),
            "week 53, 2026"
        );
        assert_eq!(label(Period::Month, "2026-12-07", None), "November 2026");
        assert_eq!(label(Period::Quarter, "2027-01-03", None), "Q4 2026");
        let since = label(Period::SincePrevious, "2026-12-07", Some("2026-12-04"));
        assert_eq!(since, "2026-12-04 – 2026-12-06");
        // A window its period cannot name (the period changed since the job was made).
        assert_eq!(
            Period::Month.label(d("2026-11-30"), d("2026-12-07")),
            "2026-11-30 – 2026-12-06"
        );
    }

    #[test]
    fn a_week_across_a_dst_change_is_an_hour_short_or_long() {
        let berlin = chrono_tz::Europe::Berlin;
        let week = Period::Week(Weekday::Mon);
        let hours = |fired: &str| {
            let w = Window::of_dates(week.dates(d(fired), None).expect("dates"), berlin);
            w.expect("window").hours()
        };
        assert_eq!(hours("2027-03-29"), 167.0, "CET to CEST on 2027-03-28");
        assert_eq!(hours("2027-11-01"), 169.0, "CEST to CET on 2027-10-31");
        assert_eq!(hours("2027-11-08"), 168.0);
    }

    #[test]
    fn week_starts_reads_any_weekday() {
        assert_eq!(parse_weekday("sunday"), Some(Weekday::Sun));
        assert_eq!(parse_weekday("Wed"), Some(Weekday::Wed));
        assert_eq!(parse_weekday("someday"), None);
    }
}
