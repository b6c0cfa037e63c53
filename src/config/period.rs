//! `window` and `week_starts`: the period of data a report's job reads, counted back from the
//! local date it fires on (`day`, the default; `week`, `month`, `quarter`; `since_previous`).

use chrono::{Datelike, NaiveDate, Weekday};

use super::ConfigError;
use super::fields::Fields;
use crate::domain::cron::CronExpr;
use crate::domain::window::{Period, parse_weekday};

/// A report's `window` and `week_starts`; a warning when its schedule fires more than once in
/// a period (each of those fires reads the same complete period).
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    schedule: Option<&CronExpr>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Period {
    let place = f.place.clone();
    let starts = f.opt::<String>("week_starts", errors).and_then(|w| {
        let day = parse_weekday(&w);
        if day.is_none() {
            let message = format!("{w:?} is not a weekday: use \"monday\" … \"sunday\"");
            errors.push(place.error("week_starts", message));
        }
        day.map(|d| (w, d))
    });
    let word = f.opt::<String>("window", errors);
    let period = match word.as_deref() {
        None => Period::Day,
        Some(w) => match Period::parse(w, starts.as_ref().map_or(Weekday::Mon, |s| s.1)) {
            Some(p) => p,
            None => {
                let message = format!(
                    "{w:?} is not a window: use \"day\", \"week\", \"month\", \"quarter\" or \"since_previous\""
                );
                errors.push(place.error("window", message));
                return Period::Day;
            }
        },
    };
    if let (Some((w, _)), false) = (&starts, matches!(period, Period::Week(_))) {
        let message = format!(
            "{w:?} is set but the window is {:?}: week_starts applies only to window = \"week\"",
            period.name()
        );
        errors.push(place.error("week_starts", message));
    }
    let busiest = schedule
        .filter(|_| one_fire_per_period(period))
        .and_then(|s| busiest_period(s, period).filter(|(_, n)| *n > 1));
    if let Some((first, n)) = busiest {
        let message = format!(
            "the schedule fires {n} times in the {p} of {first}: each fire in a {p} reads the same complete {p} before it",
            p = period.name()
        );
        warnings.push(place.warning("window", &message));
    }
    period
}

/// Whether a period is meant for one fire each: a week, month or quarter (a day's or
/// `since_previous`'s window is each fire's own).
fn one_fire_per_period(period: Period) -> bool {
    matches!(period, Period::Week(_) | Period::Month | Period::Quarter)
}

/// The period of a year of fires (2027) that holds the most of them: its first date and count.
fn busiest_period(schedule: &CronExpr, period: Period) -> Option<(NaiveDate, usize)> {
    let first = NaiveDate::from_ymd_opt(2027, 1, 1)?;
    let mut counts: std::collections::BTreeMap<NaiveDate, usize> = Default::default();
    for d in first.iter_days().take_while(|d| d.year() == 2027) {
        if schedule.matches_date(d) {
            // A week's, month's or quarter's window ends where the period holding `d` starts.
            let (_, holding) = period.dates(d, None)?;
            *counts.entry(holding).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(d, n)| (*n, std::cmp::Reverse(*d)))
}
