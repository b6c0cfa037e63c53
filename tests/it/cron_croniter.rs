//! dawnpost's schedules against croniter, an independent cron implementation (Python, installed
//! by `.ci/run`): 80 seeded random patterns — lists, ranges, steps, names, both day fields,
//! starred steps such as `*/4` — must fire on the same UTC dates of 2027 at the same first
//! time. UTC, so this checks the day rule and the time fields; `tests/it/cron_property.rs` checks
//! the DST rule in every zone. `DAWNPOST_CRONITER_SEED=N` draws another 80.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use chrono::{NaiveDate, TimeZone, Utc};
use dawnpost::domain::cron::CronExpr;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const DOW: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const MON: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// One field: `*`, `*/s`, a value, a range, a stepped range, or a list of those (a range
/// always of two values or more).
fn field(rng: &mut StdRng, lo: u32, hi: u32, names: Option<&[&str]>, star: u32) -> String {
    let name = |rng: &mut StdRng, v: u32| match names {
        Some(n) if rng.random_bool(0.3) => n[(v - lo) as usize].to_string(),
        _ => v.to_string(),
    };
    let piece = |rng: &mut StdRng| {
        let (a, b) = (rng.random_range(lo..=hi), rng.random_range(lo..=hi));
        let (a, b) = (a.min(b), a.max(b));
        // croniter 7 misreads a range of one value (`5-5`, `1-MON`): write the value.
        if a == b {
            return name(rng, a);
        }
        match rng.random_range(0..3) {
            0 => name(rng, a),
            1 => format!("{}-{}", name(rng, a), name(rng, b)),
            _ => format!("{a}-{b}/{}", rng.random_range(2..5)),
        }
    };
    match rng.random_range(0..10) {
        n if n < star => "*".to_string(),
        n if n < star + 2 => format!("*/{}", rng.random_range(2..7)),
        _ => (0..rng.random_range(1..=3))
            .map(|_| piece(rng))
            .collect::<Vec<_>>()
            .join(","),
    }
}

fn patterns() -> Vec<String> {
    let seed = std::env::var("DAWNPOST_CRONITER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2027);
    let mut rng = StdRng::seed_from_u64(seed);
    (0..80)
        .map(|_| {
            let sec = if rng.random_bool(0.7) {
                "0".to_string()
            } else {
                field(&mut rng, 0, 59, None, 0)
            };
            [
                sec,
                field(&mut rng, 0, 59, None, 2),
                field(&mut rng, 0, 23, None, 2),
                field(&mut rng, 1, 31, None, 4),
                field(&mut rng, 1, 12, Some(&MON), 4),
                field(&mut rng, 0, 6, Some(&DOW), 4),
            ]
            .join(" ")
        })
        .collect()
}

#[test]
fn every_pattern_fires_on_the_dates_and_times_croniter_says() {
    if !common::python::has("croniter") {
        return;
    }
    // Patterns that never fire are refused by dawnpost and left out.
    let patterns: Vec<(String, CronExpr)> = patterns()
        .into_iter()
        .filter_map(|p| CronExpr::parse(&p, chrono_tz::UTC).ok().map(|s| (p, s)))
        .collect();
    assert!(patterns.len() > 60, "most random patterns fire");
    let mut child = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/croniter_days.py"
        ))
        .arg("2027")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().expect("stdin");
    for (p, _) in &patterns {
        writeln!(stdin, "{p}").expect("write");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("croniter");
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), patterns.len());
    let (from, to) = (
        Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap(),
        Utc.with_ymd_and_hms(2027, 12, 31, 23, 59, 59).unwrap(),
    );
    let mut differ = Vec::new();
    for ((p, s), reference) in patterns.iter().zip(&lines) {
        let expected: Vec<(String, String)> = reference["fires"]
            .as_array()
            .expect("fires")
            .iter()
            .map(|f| {
                (
                    f[0].as_str().unwrap_or_default().into(),
                    f[1].as_str().unwrap_or_default().into(),
                )
            })
            .collect();
        let got: Vec<(String, String)> = s
            .fires(from, to)
            .into_iter()
            .filter(|o| o.date >= NaiveDate::from_ymd_opt(2027, 1, 1).expect("date"))
            .map(|o| (o.date.to_string(), o.at.format("%H:%M:%S").to_string()))
            .collect();
        if got != expected {
            let first = got.iter().zip(&expected).find(|(g, e)| g != e);
            differ.push(format!(
                "{p}: {} dates here, {} in croniter; first difference {first:?}",
                got.len(),
                expected.len()
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
