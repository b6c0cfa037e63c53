//! A business calendar (`calendar = "config/calendars/de-nw.toml"` on a report or family): the
//! weekdays that are business days and the holidays ops keep, one file per calendar:
//!
//! ```toml
//! weekdays = "MON-FRI"          # the default; "SUN-THU", "MON,WED,FRI"
//! [[holiday]]
//! date = "2026-12-25"
//! name = "Christmas"
//! ```
//!
//! Problems name the file, the line and the field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{Datelike, Days, NaiveDate, Weekday};

use super::ConfigError;

/// How far a fire may move: a calendar with no business day within a year moves nothing.
const SEARCH_DAYS: u64 = 366;

/// What a report does on a day that is not a business day (`on_holiday`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnHoliday {
    /// The fire is skipped: no job for that date.
    #[default]
    Skip,
    /// The fire moves to the same local time on the next business day and keeps its own key.
    NextBusinessDay,
}

/// A report's calendar and what it does on a closed day.
#[derive(Debug, Clone)]
pub struct ReportCalendar {
    pub cell: std::sync::Arc<CalendarCell>,
    pub on_holiday: OnHoliday,
}

/// A calendar as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    pub file: PathBuf,
    /// Monday first.
    weekdays: [bool; 7],
    holidays: BTreeMap<NaiveDate, String>,
}

impl Calendar {
    /// Why `date` is not a business day (the holiday's name, or its weekday), if it is not.
    pub fn closed(&self, date: NaiveDate) -> Option<String> {
        if let Some(name) = self.holidays.get(&date) {
            return Some(name.clone());
        }
        let day = date.weekday();
        (!self.weekdays[day.num_days_from_monday() as usize]).then(|| weekday_name(day).into())
    }

    /// The first business day after `date`, within a year.
    pub fn next_business_day(&self, date: NaiveDate) -> Option<NaiveDate> {
        (1..=SEARCH_DAYS)
            .filter_map(|n| date.checked_add_days(Days::new(n)))
            .find(|d| self.closed(*d).is_none())
    }

    /// The days before `date` that are not business days, nearest first, back to the previous
    /// business day (within a year): the dates whose fires move to `date`.
    pub(crate) fn closed_before(&self, date: NaiveDate) -> Vec<NaiveDate> {
        (1..=SEARCH_DAYS)
            .map_while(|n| date.checked_sub_days(Days::new(n)))
            .take_while(|d| self.closed(*d).is_some())
            .collect()
    }

    /// Reads and validates the calendar file at `path`.
    pub fn load(path: &Path) -> Result<Calendar, Vec<ConfigError>> {
        let error = |line: Option<usize>, field: &str, message: String| ConfigError {
            file: path.to_path_buf(),
            row: line.map(|l| format!("line {l}")),
            report: None,
            field: field.to_string(),
            message,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| vec![error(None, "(file)", format!("cannot read: {e}"))])?;
        let line_of = |offset: usize| super::lines::line_at(&text, offset);
        let raw: Raw = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| line_of(s.start));
            vec![error(line, "(syntax)", e.message().to_string())]
        })?;
        let mut errors = Vec::new();
        let weekdays = match &raw.weekdays {
            None => [true, true, true, true, true, false, false],
            Some(w) => parse_weekdays(w.get_ref()).unwrap_or_else(|message| {
                errors.push(error(Some(line_of(w.span().start)), "weekdays", message));
                [false; 7]
            }),
        };
        let mut holidays = BTreeMap::new();
        for (i, h) in raw.holiday.iter().enumerate() {
            let line = Some(line_of(h.span().start));
            let field = |name: &str| format!("holiday[{i}].{name}");
            let h = h.get_ref();
            let date = match NaiveDate::parse_from_str(h.date.trim(), "%Y-%m-%d") {
                Ok(d) => Some(d),
                Err(_) => {
                    let message = format!("{:?} is not a date (YYYY-MM-DD)", h.date);
                    errors.push(error(line, &field("date"), message));
                    None
                }
            };
            if h.name.trim().is_empty() {
                errors.push(error(line, &field("name"), "must not be empty".into()));
            }
            if let Some(d) = date
                && holidays.insert(d, h.name.trim().to_string()).is_some()
            {
                errors.push(error(line, &field("date"), format!("{d} is listed twice")));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Calendar {
            file: path.to_path_buf(),
            weekdays,
            holidays,
        })
    }
}

/// A calendar file as a running daemon keeps it: read again at every tick when the file
/// changed ([`CalendarCell::refresh`]); while an edit does not validate, the previous calendar
/// stays in force and the problem is kept to be shown (as the retention policy's is).
#[derive(Debug)]
pub struct CalendarCell {
    path: PathBuf,
    state: std::sync::RwLock<CellState>,
}

#[derive(Debug, Clone)]
struct CellState {
    calendar: std::sync::Arc<Calendar>,
    modified: Option<std::time::SystemTime>,
    /// The last edit's problems, while it does not validate.
    error: Option<String>,
}

impl CalendarCell {
    /// Loads `path` (a configuration error if it does not validate).
    pub fn load(path: &Path) -> Result<CalendarCell, Vec<ConfigError>> {
        let modified = modified(path);
        let calendar = std::sync::Arc::new(Calendar::load(path)?);
        Ok(CalendarCell {
            path: path.to_path_buf(),
            state: std::sync::RwLock::new(CellState {
                calendar,
                modified,
                error: None,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The calendar in force.
    pub fn get(&self) -> std::sync::Arc<Calendar> {
        match self.state.read() {
            Ok(g) => g.calendar.clone(),
            Err(p) => p.into_inner().calendar.clone(),
        }
    }

    /// The problems of the file's last edit, while it does not validate.
    pub fn error(&self) -> Option<String> {
        self.read().error
    }

    /// Reads the file again if it changed since it was last read. Returns the problems when
    /// this read found new ones (the previous calendar stays in force).
    pub fn refresh(&self) -> Option<String> {
        let now = modified(&self.path);
        let before = self.read();
        if now == before.modified && now.is_some() {
            return None;
        }
        let (state, fresh_error) = match Calendar::load(&self.path) {
            Ok(c) => (
                CellState {
                    calendar: std::sync::Arc::new(c),
                    modified: now,
                    error: None,
                },
                None,
            ),
            Err(errors) => {
                let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
                let said = said.join("; ");
                let fresh = (before.error.as_deref() != Some(said.as_str())).then(|| said.clone());
                (
                    CellState {
                        modified: now,
                        error: Some(said),
                        ..before
                    },
                    fresh,
                )
            }
        };
        match self.state.write() {
            Ok(mut g) => *g = state,
            Err(p) => *p.into_inner() = state,
        }
        fresh_error
    }

    fn read(&self) -> CellState {
        match self.state.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    weekdays: Option<toml::Spanned<String>>,
    #[serde(default)]
    holiday: Vec<toml::Spanned<RawHoliday>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHoliday {
    date: String,
    name: String,
}

fn weekday_name(d: Weekday) -> &'static str {
    match d {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// `"MON-FRI"`, `"SUN-THU"` (a range may wrap), `"MON,WED,FRI"`, or a mix.
fn parse_weekdays(s: &str) -> Result<[bool; 7], String> {
    const NAMES: [&str; 7] = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let day = |t: &str| {
        let t = t.trim().to_ascii_uppercase();
        NAMES.iter().position(|n| *n == t).ok_or_else(|| {
            format!("{s:?}: {t:?} is not a weekday (MON, TUE, WED, THU, FRI, SAT, SUN)")
        })
    };
    let mut days = [false; 7];
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day(a)?, day(b)?);
                let mut d = a;
                loop {
                    days[d] = true;
                    if d == b {
                        break;
                    }
                    d = (d + 1) % 7;
                }
            }
            None => days[day(part)?] = true,
        }
    }
    if !days.contains(&true) {
        return Err(format!("{s:?} names no business day"));
    }
    Ok(days)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calendar(text: &str) -> Result<Calendar, Vec<ConfigError>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cal.toml");
        std::fs::write(&path, text).expect("write");
        Calendar::load(&path)
    }

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date")
    }

    #[test]
    fn holidays_and_weekends_are_closed_and_fires_move_past_them() {
        let c = calendar(
            "[[holiday]]\ndate = \"2026-12-25\"\nname = \"Christmas\"\n[[holiday]]\ndate = \"2026-12-28\"\nname = \"Bridge day\"\n",
        )
        .expect("calendar");
        assert_eq!(c.closed(d("2026-12-25")).as_deref(), Some("Christmas"));
        assert_eq!(c.closed(d("2026-12-26")).as_deref(), Some("Saturday"));
        assert_eq!(c.closed(d("2026-12-24")), None);
        assert_eq!(c.next_business_day(d("2026-12-25")), Some(d("2026-12-29")));
        assert_eq!(
            c.closed_before(d("2026-12-29")),
            [
                d("2026-12-28"),
                d("2026-12-27"),
                d("2026-12-26"),
                d("2026-12-25")
            ]
        );
        assert!(c.closed_before(d("2026-12-24")).is_empty());
    }

    #[test]
    fn weekdays_wrap_and_lists() {
        assert_eq!(
            parse_weekdays("SUN-THU").expect("days"),
            [true, true, true, true, false, false, true]
        );
        assert_eq!(
            parse_weekdays("mon,wed").expect("days"),
            [true, false, true, false, false, false, false]
        );
        assert!(parse_weekdays("MON-FUN").is_err());
    }

    #[test]
    fn a_broken_calendar_names_the_line_and_field() {
        let e = calendar("[[holiday]]\ndate = \"2026-12-25\"\nname = \"X\"\n\n[[holiday]]\ndate = \"25.12.2026\"\nname = \"Y\"\n")
            .expect_err("refused");
        assert_eq!(e[0].row.as_deref(), Some("line 5"));
        assert_eq!(e[0].field, "holiday[1].date");
        let e = calendar("weekdays = \"MON-FRI\"\nholidays = 1\n").expect_err("refused");
        assert_eq!(e[0].row.as_deref(), Some("line 2"), "{e:?}");
    }
}
