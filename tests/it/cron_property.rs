//! The schedule rule as a property, against a brute-force reference written here: random
//! patterns (lists, ranges, steps, both day fields) × every zone chrono-tz knows × every local
//! date of 2027 and 2028. The rule: every local date the pattern matches gets exactly one fire,
//! keyed by that date, at the date's first matching wall-clock time — its first occurrence when
//! an overlap repeats it, the first valid instant after the gap when a gap swallows it — and no
//! other date gets one. The day rule is Vixie cron's: day-of-month and day-of-week combine with
//! OR unless either field starts with `*`, then with AND.
//!
//! `DAWNPOST_CRON_CASES=200 cargo test --test it cron_property` runs more patterns than the default.

use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::{TZ_VARIANTS, Tz};
use dawnpost::domain::cron::CronExpr;
use proptest::prelude::*;

/// One field of a pattern: its text and the values it allows.
#[derive(Debug, Clone)]
struct Field {
    text: String,
    values: Vec<u32>,
}

/// A field's piece: a value, a range, a stepped range, or a stepped `*`.
#[derive(Debug, Clone)]
enum Piece {
    Value(u32),
    Range(u32, u32),
    Step(u32, u32, u32),
    StarStep(u32),
}

fn piece(lo: u32, hi: u32) -> impl Strategy<Value = Piece> {
    prop_oneof![
        (lo..=hi).prop_map(Piece::Value),
        (lo..=hi, lo..=hi).prop_map(|(a, b)| Piece::Range(a.min(b), a.max(b))),
        (lo..=hi, lo..=hi, 2..5u32).prop_map(|(a, b, s)| Piece::Step(a.min(b), a.max(b), s)),
        (2..7u32).prop_map(Piece::StarStep),
    ]
}

/// `*`, one piece, or a list of two or three (a stepped `*` only ever alone, as people write it).
fn field(lo: u32, hi: u32, star_weight: u32) -> impl Strategy<Value = Field> {
    let list = proptest::collection::vec(piece(lo, hi), 1..=3).prop_map(move |pieces| {
        let pieces: Vec<Piece> = if pieces.len() > 1 {
            pieces
                .into_iter()
                .filter(|p| !matches!(p, Piece::StarStep(_)))
                .collect()
        } else {
            pieces
        };
        let pieces = if pieces.is_empty() {
            vec![Piece::Value(lo)]
        } else {
            pieces
        };
        build(&pieces, lo, hi)
    });
    prop_oneof![
        star_weight => Just(Field { text: "*".into(), values: (lo..=hi).collect() }),
        4 => list,
    ]
}

fn build(pieces: &[Piece], lo: u32, hi: u32) -> Field {
    let mut values = Vec::new();
    let mut texts = Vec::new();
    for p in pieces {
        match *p {
            Piece::Value(v) => {
                values.push(v);
                texts.push(v.to_string());
            }
            Piece::Range(a, b) => {
                values.extend(a..=b);
                texts.push(format!("{a}-{b}"));
            }
            Piece::Step(a, b, s) => {
                values.extend((a..=b).step_by(s as usize));
                texts.push(format!("{a}-{b}/{s}"));
            }
            Piece::StarStep(s) => {
                values.extend((lo..=hi).step_by(s as usize));
                texts.push(format!("*/{s}"));
            }
        }
    }
    values.sort_unstable();
    values.dedup();
    Field {
        text: texts.join(","),
        values,
    }
}

#[derive(Debug, Clone)]
struct Pattern {
    sec: Field,
    min: Field,
    hour: Field,
    dom: Field,
    month: Field,
    dow: Field,
}

impl Pattern {
    fn text(&self) -> String {
        [
            &self.sec,
            &self.min,
            &self.hour,
            &self.dom,
            &self.month,
            &self.dow,
        ]
        .map(|f| f.text.as_str())
        .join(" ")
    }

    /// Vixie cron's day rule, from the field texts and their value sets.
    fn matches_day(&self, d: NaiveDate) -> bool {
        if !self.month.values.contains(&d.month()) {
            return false;
        }
        let dom = self.dom.values.contains(&d.day());
        let dow = self
            .dow
            .values
            .contains(&d.weekday().num_days_from_sunday());
        if self.dom.text.starts_with('*') || self.dow.text.starts_with('*') {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The reference: walk the local times of the date in order; the first that matches fires
    /// at its first occurrence, or — swallowed by a gap — at the first local minute after it
    /// that exists.
    fn fire_on(&self, date: NaiveDate, tz: Tz) -> Option<DateTime<Utc>> {
        if !self.matches_day(date) {
            return None;
        }
        for h in 0..24 {
            for m in 0..60 {
                if !(self.hour.values.contains(&h) && self.min.values.contains(&m)) {
                    continue;
                }
                for s in 0..60 {
                    if self.sec.values.contains(&s) {
                        return Some(first_instant_at_or_after(
                            date.and_hms_opt(h, m, s).expect("a time"),
                            tz,
                        ));
                    }
                }
            }
        }
        None
    }
}

fn first_instant_at_or_after(local: NaiveDateTime, tz: Tz) -> DateTime<Utc> {
    let mut t = local;
    loop {
        match tz.from_local_datetime(&t) {
            LocalResult::Single(x) | LocalResult::Ambiguous(x, _) => return x.with_timezone(&Utc),
            LocalResult::None => {
                // Forward to the next whole minute: every transition since 1980 is on one.
                let next = t + chrono::Duration::minutes(1);
                t = next
                    .date()
                    .and_hms_opt(next.hour(), next.minute(), 0)
                    .expect("a minute");
            }
        }
    }
}

use chrono::Timelike;

fn pattern() -> impl Strategy<Value = Pattern> {
    (
        prop_oneof![
            3 => Just(Field { text: "0".into(), values: vec![0] }),
            1 => field(0, 59, 1),
        ],
        field(0, 59, 1),
        field(0, 23, 1),
        field(1, 31, 3),
        field(1, 12, 3),
        field(0, 6, 3),
    )
        .prop_map(|(sec, min, hour, dom, month, dow)| Pattern {
            sec,
            min,
            hour,
            dom,
            month,
            dow,
        })
}

fn cases() -> u32 {
    std::env::var("DAWNPOST_CRON_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).expect("a date")
}

/// Compares every date of 2027–2028 in `tz`: `fire_on` per date, and `fires` over the range,
/// which must hold exactly the reference's dates, each once.
fn check_zone(p: &Pattern, s: &CronExpr, tz: Tz) -> Result<(), TestCaseError> {
    let s = s.in_tz(tz);
    let (first, last) = (day(2027, 1, 1), day(2028, 12, 31));
    let expected: Vec<(NaiveDate, DateTime<Utc>)> = first
        .iter_days()
        .take_while(|d| *d <= last)
        .filter_map(|d| Some((d, p.fire_on(d, tz)?)))
        .collect();
    for (date, at) in &expected {
        prop_assert_eq!(
            s.fire_on(*date),
            Some(*at),
            "{} {} on {}",
            p.text(),
            tz,
            date
        );
    }
    let from = dawnpost::domain::window::start_of_local_date(first, tz).expect("start");
    let until = dawnpost::domain::window::start_of_local_date(day(2029, 1, 1), tz).expect("end");
    let got: Vec<(NaiveDate, DateTime<Utc>)> = s
        .fires(from - chrono::Duration::seconds(1), until)
        .into_iter()
        .filter(|o| o.date <= last)
        .map(|o| (o.date, o.at))
        .collect();
    prop_assert_eq!(&got, &expected, "{} in {}", p.text(), tz);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_matching_local_date_gets_exactly_one_fire_in_every_zone(p in pattern()) {
        let Ok(schedule) = CronExpr::parse(&p.text(), chrono_tz::UTC) else {
            // A pattern that never fires (31 February) is refused; the reference agrees.
            let any = day(2026, 1, 1).iter_days().take(3660).any(|d| p.matches_day(d));
            prop_assert!(!any, "{} refused but matches a date", p.text());
            return Ok(());
        };
        for tz in TZ_VARIANTS {
            check_zone(&p, &schedule, tz)?;
        }
    }
}

/// The dates outside tools found lost or moved, each as a named case.
#[test]
fn the_dates_lost_in_gaps_each_get_their_job_at_the_gaps_end() {
    let cases: [(&str, Tz, NaiveDate, &str); 9] = [
        (
            "0 30 0 * * *",
            chrono_tz::Atlantic::Azores,
            day(2027, 3, 28),
            "2027-03-28T01:00:00Z",
        ),
        (
            "0 0 0 * * *",
            chrono_tz::America::Santiago,
            day(2027, 9, 5),
            "2027-09-05T04:00:00Z",
        ),
        (
            "0 0 0 * * *",
            chrono_tz::Asia::Beirut,
            day(2027, 3, 28),
            "2027-03-27T22:00:00Z",
        ),
        (
            "0 0 0 * * *",
            chrono_tz::Africa::Cairo,
            day(2027, 4, 30),
            "2027-04-29T22:00:00Z",
        ),
        (
            "0 15 0 * * *",
            chrono_tz::America::Havana,
            day(2027, 3, 14),
            "2027-03-14T05:00:00Z",
        ),
        (
            "0 30 2,9 * * *",
            chrono_tz::Europe::Berlin,
            day(2027, 3, 28),
            "2027-03-28T01:00:00Z",
        ),
        (
            "0 9-14 1,2 28 * *",
            chrono_tz::Antarctica::Troll,
            day(2027, 3, 28),
            "2027-03-28T01:00:00Z",
        ),
        // The gap ends on the next date; the job keeps its own.
        (
            "0 30 23 * * *",
            chrono_tz::America::Nuuk,
            day(2027, 3, 27),
            "2027-03-28T01:00:00Z",
        ),
        (
            "0 30 23 * * *",
            chrono_tz::America::Nuuk,
            day(2027, 3, 28),
            "2027-03-29T00:30:00Z",
        ),
    ];
    for (expr, tz, date, at) in cases {
        let s = CronExpr::parse(expr, tz).expect("parse");
        let around = s.fires(
            dawnpost::domain::window::start_of_local_date(date.pred_opt().expect("d"), tz)
                .expect("s"),
            dawnpost::domain::window::start_of_local_date(date.succ_opt().expect("d"), tz)
                .expect("s")
                + chrono::Duration::hours(2),
        );
        let of_date: Vec<_> = around.iter().filter(|o| o.date == date).collect();
        assert_eq!(
            of_date.len(),
            1,
            "{expr} in {tz}: one job for {date}: {around:?}"
        );
        assert_eq!(
            dawnpost::domain::window::rfc3339(of_date[0].at),
            at,
            "{expr} in {tz} on {date}"
        );
    }
}

#[test]
fn a_starred_step_in_the_day_of_month_combines_with_and_as_in_vixie_cron() {
    let s = CronExpr::parse("0 10 1 */4 2-5 SUN-SAT", chrono_tz::UTC).expect("parse");
    let dates: Vec<NaiveDate> = s
        .fires(
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2028, 1, 1, 0, 0, 0).unwrap(),
        )
        .into_iter()
        .map(|o| o.date)
        .collect();
    assert_eq!(
        dates.len(),
        7 + 8 + 8 + 8,
        "days 1, 5, …, 29 of February to May"
    );
    assert!(
        dates
            .iter()
            .all(|d| (2..=5).contains(&d.month()) && d.day() % 4 == 1)
    );
}
