//! Business calendars: a report fires on business days only; on a closed day its fire is
//! skipped or, with `on_holiday = "next_business_day"`, moved to the same local time on the next
//! business day, keeping its key. `plan` and the daemon's tick agree across a year with DST; a
//! calendar edit takes effect at the next tick, a broken one leaves the previous in force.

use std::collections::BTreeSet;
use std::sync::Arc;

use dawnpost::domain::clock::Clock;
use dawnpost::report::catalog::Catalog;
use dawnpost::report::schedule::{plan, plan_all};
use dawnpost::services::tick::SchedulerTick;
use dawnpost::{ManualClock, Span};

use crate::common::{self, Project, TestLedger, at, utc};

const CALENDAR: &str = r#"weekdays = "MON-FRI"
[[holiday]]
date = "2026-12-25"
name = "Christmas"
"#;

fn project(on_holiday: &str, calendar: &str) -> Project {
    let mut toml = common::report("warehouse-17", "0 30 6 * * *", "Europe/Berlin");
    toml.push_str(&format!(
        "calendar = \"config/calendars/de.toml\"\non_holiday = \"{on_holiday}\"\n"
    ));
    let p = Project::new(&toml);
    p.write("config/calendars/de.toml", calendar);
    p
}

#[test]
fn a_holiday_and_a_weekend_move_to_the_next_business_day_keeping_their_keys() {
    let config = project("next_business_day", CALENDAR).load();
    let fires = plan(
        &config.reports,
        utc("2026-12-24T00:00:00Z"),
        utc("2026-12-29T00:00:00Z"),
    );
    let got: Vec<(String, String, Option<String>)> = fires
        .iter()
        .map(|f| {
            (
                f.key.to_string(),
                f.fire_at.to_rfc3339(),
                f.calendar.as_ref().map(|c| c.reason.clone()),
            )
        })
        .collect();
    let monday = "2026-12-28T05:30:00+00:00".to_string();
    assert_eq!(
        got,
        [
            (
                "warehouse-17:2026-12-24".into(),
                "2026-12-24T05:30:00+00:00".into(),
                None
            ),
            (
                "warehouse-17:2026-12-25".into(),
                monday.clone(),
                Some("Christmas".into())
            ),
            (
                "warehouse-17:2026-12-26".into(),
                monday.clone(),
                Some("Saturday".into())
            ),
            (
                "warehouse-17:2026-12-27".into(),
                monday.clone(),
                Some("Sunday".into())
            ),
            ("warehouse-17:2026-12-28".into(), monday, None),
        ]
    );
    // The moved job still reports on its own date.
    assert_eq!(fires[1].window.end, utc("2026-12-24T23:00:00Z"));
}

#[test]
fn skipped_fires_make_no_job_and_plan_says_why() {
    let p = project("skip", CALENDAR);
    let config = p.load();
    let (after, until) = (utc("2026-12-24T00:00:00Z"), utc("2026-12-29T00:00:00Z"));
    let keys: Vec<String> = plan(&config.reports, after, until)
        .iter()
        .map(|f| f.key.to_string())
        .collect();
    assert_eq!(keys, ["warehouse-17:2026-12-24", "warehouse-17:2026-12-28"]);
    assert_eq!(plan_all(&config.reports, after, until).len(), 5);
    let out = common::run_in(
        p.root(),
        &[
            "--config",
            "config",
            "plan",
            "--from",
            "2026-12-24",
            "--to",
            "2026-12-29",
        ],
    );
    let said = common::text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("warehouse-17:2026-12-25")
                && l.ends_with("skipped: not a business day (Christmas)")),
        "{said}"
    );
    let out = common::run_in(
        p.root(),
        &[
            "--config",
            "config",
            "plan",
            "--from",
            "2026-12-25",
            "--to",
            "2026-12-26",
            "--json",
        ],
    );
    let line: serde_json::Value =
        serde_json::from_str(common::text(&out).trim()).expect("one JSON line");
    assert_eq!(line["calendar"], "skipped");
    assert_eq!(line["holiday"], "Christmas");
}

#[test]
fn a_broken_calendar_is_refused_naming_file_line_and_field() {
    let p = project(
        "skip",
        "[[holiday]]\ndate = \"2026-12-25\"\nname = \"Christmas\"\n[[holiday]]\ndate = \"26.12.2026\"\nname = \"Boxing Day\"\n",
    );
    let said = match dawnpost::Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
        Ok(_) => panic!("refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        said.contains("config/calendars/de.toml: line 4: holiday[1].date: \"26.12.2026\" is not a date (YYYY-MM-DD)"),
        "{said}"
    );
    let p = project("tomorrow", CALENDAR);
    let said = match dawnpost::Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
        Ok(_) => panic!("refused"),
        Err(e) => e.to_string(),
    };
    assert!(
        said.contains("on_holiday: \"tomorrow\": use \"skip\" or \"next_business_day\""),
        "{said}"
    );
}

/// The tick, every six hours across 2027 in Europe/Berlin (a DST gap swallows 02:30 on
/// 2027-03-28; a SUN-THU week with holidays), inserts exactly the jobs `plan` lists, at the
/// instants it lists, moved ones included.
async fn the_tick_agrees_with_plan_across_a_year(t: &TestLedger) {
    let mut toml = common::report("dc-7", "0 30 2 * * *", "Europe/Berlin");
    toml.push_str("calendar = \"config/calendars/dc.toml\"\non_holiday = \"next_business_day\"\n");
    let p = Project::new(&toml);
    p.write(
        "config/calendars/dc.toml",
        "weekdays = \"SUN-THU\"\n[[holiday]]\ndate = \"2027-03-25\"\nname = \"Stocktake\"\n[[holiday]]\ndate = \"2027-10-31\"\nname = \"Autumn close\"\n[[holiday]]\ndate = \"2027-12-26\"\nname = \"Boxing Day\"\n",
    );
    let config = p.load();
    let clock = ManualClock::new(at(2027, 1, 1, 0, 0));
    let tick = SchedulerTick::new(
        t.ledger.clone(),
        Catalog::of_reports(config.reports.clone()),
        Arc::new(clock.clone()),
        Span::from_secs(86_400),
    );
    tick.run_once().await.expect("first tick");
    let start = clock.now();
    while clock.now() < at(2028, 1, 1, 0, 0) {
        clock.advance(chrono::Duration::hours(6));
        tick.run_once().await.expect("tick");
    }
    let jobs = t
        .ledger
        .jobs()
        .list(&dawnpost::ledger::JobFilter {
            limit: Some(10_000),
            ..Default::default()
        })
        .await
        .expect("jobs");
    let ticked: BTreeSet<(String, i64)> = jobs
        .iter()
        .filter(|j| j.fire_at > start)
        .map(|j| (j.key.to_string(), j.fire_at.timestamp()))
        .collect();
    let planned: BTreeSet<(String, i64)> = plan(&config.reports, start, clock.now())
        .iter()
        .map(|f| (f.key.to_string(), f.fire_at.timestamp()))
        .collect();
    assert_eq!(ticked, planned);
    // Thursday the 25th is a holiday, Friday and Saturday are closed: all three move to
    // Sunday the 28th at 02:30, which the DST gap makes 03:00 CEST (01:00 UTC).
    let sunday = utc("2027-03-28T01:00:00Z").timestamp();
    for day in ["2027-03-25", "2027-03-26", "2027-03-27", "2027-03-28"] {
        assert!(
            ticked.contains(&(format!("dc-7:{day}"), sunday)),
            "{day}: {ticked:?}"
        );
    }
    // Each date one job, nothing skipped, nothing twice: 2027's dates but the last (a Friday,
    // moved to Sunday 2028-01-02), and none of 2026.
    let days: BTreeSet<&str> = ticked.iter().map(|(k, _)| &k[5..]).collect();
    assert_eq!(days.len(), ticked.len());
    assert_eq!(ticked.len(), 364, "{days:?}");
    assert!(!days.contains("2027-12-31") && days.contains("2027-01-01"));
}

/// The console's overview shows the next fire with what the calendar does to it.
async fn the_overview_says_a_next_fire_is_skipped(t: &TestLedger) {
    let s = crate::common::ops_server::start(t).await;
    // The fixture's clock: Monday 2026-11-30 09:00 UTC; the next fire is Tuesday's.
    let p = project("skip", "weekdays = \"MON\"\n");
    let reports = dawnpost::report::catalog::Reports::load(&p.load()).expect("templates");
    s.pipeline.catalog.replace(reports);
    let cookie = crate::common::console::sign_in(&s, crate::common::ops_server::VIEWER_TOKEN).await;
    let html = crate::common::console::page(&s, "/ui/", &cookie).await;
    assert!(
        html.contains("skipped: not a business day (Tuesday)"),
        "{html}"
    );
}

crate::on_both_backends!(
    the_tick_agrees_with_plan_across_a_year,
    the_overview_says_a_next_fire_is_skipped
);

#[test]
fn a_calendar_edit_takes_effect_and_a_broken_one_leaves_the_previous() {
    let p = project("skip", CALENDAR);
    let config = p.load();
    let cell = config.reports[0]
        .calendar
        .as_ref()
        .expect("calendar")
        .cell
        .clone();
    let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 24).expect("date");
    assert_eq!(cell.get().closed(day), None);
    let edited =
        format!("{CALENDAR}[[holiday]]\ndate = \"2026-12-24\"\nname = \"Christmas Eve\"\n");
    // A file's modification time has a resolution; the edit is told apart by its content too.
    p.write("config/calendars/de.toml", &edited);
    set_mtime(&p, 1);
    assert_eq!(cell.refresh(), None);
    assert_eq!(cell.get().closed(day).as_deref(), Some("Christmas Eve"));
    p.write("config/calendars/de.toml", "weekdays = \"MON-FUN\"\n");
    set_mtime(&p, 2);
    let problems = cell.refresh().expect("the broken edit is reported");
    assert!(problems.contains("weekdays"), "{problems}");
    assert_eq!(cell.get().closed(day).as_deref(), Some("Christmas Eve"));
    assert!(cell.error().is_some());
    // Reported once, not at every tick.
    assert_eq!(cell.refresh(), None);
}

fn set_mtime(p: &Project, n: u64) {
    let file = std::fs::File::options()
        .write(true)
        .open(p.root().join("config/calendars/de.toml"))
        .expect("open");
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(n * 1000))
        .expect("set mtime");
}

/// `check`'s next fires say which are moved and which skipped, and why (a calendar whose only
/// business day is Monday: of any three fires, two are on closed days).
#[test]
fn check_shows_skipped_and_moved_fires() {
    for (on_holiday, said_of_closed) in [
        ("next_business_day", "(moved from a closed day: "),
        ("skip", "(not a business day: "),
    ] {
        let p = project(on_holiday, "weekdays = \"MON\"\n");
        let out = common::run_in(p.root(), &["--config", "config", "check"]);
        let said = common::text(&out);
        assert!(out.status.success(), "{said}");
        let closed = said.lines().filter(|l| l.contains(said_of_closed)).count();
        assert!(closed >= 2, "{on_holiday}: {said}");
    }
}
