//! Fire instants, job keys and windows across DST changes: exactly one job per report per local
//! date, at the exact UTC instant, with 23- and 25-hour windows.

use crate::common;

use chrono::Duration;
use common::{Project, at, report, utc};
use dawnpost::domain::window::Window;
use dawnpost::report::schedule::plan;

fn ny_project() -> Project {
    let mut reports = report("ny-0130", "0 30 1 * * *", "America/New_York");
    reports.push_str(&report("ny-0230", "0 30 2 * * *", "America/New_York"));
    Project::new(&reports)
}

fn fires_of(p: &Project, report: &str, from: &str, to: &str) -> Vec<(String, String)> {
    let config = p.load();
    plan(
        config.reports.iter().filter(|r| r.id.as_str() == report),
        utc(from),
        utc(to),
    )
    .into_iter()
    .map(|f| {
        (
            f.key.to_string(),
            dawnpost::domain::window::rfc3339(f.fire_at),
        )
    })
    .collect()
}

#[test]
fn spring_forward_new_york_gap_fires_once_after_the_gap() {
    let p = ny_project();
    // 2026-03-08: 02:00 EST jumps to 03:00 EDT.
    assert_eq!(
        fires_of(
            &p,
            "ny-0130",
            "2026-03-07T00:00:00Z",
            "2026-03-10T00:00:00Z"
        ),
        [
            ("ny-0130:2026-03-07".into(), "2026-03-07T06:30:00Z".into()),
            ("ny-0130:2026-03-08".into(), "2026-03-08T06:30:00Z".into()), // 01:30 EST, before the gap
            ("ny-0130:2026-03-09".into(), "2026-03-09T05:30:00Z".into()), // 01:30 EDT
        ]
    );
    assert_eq!(
        fires_of(
            &p,
            "ny-0230",
            "2026-03-07T00:00:00Z",
            "2026-03-10T00:00:00Z"
        ),
        [
            ("ny-0230:2026-03-07".into(), "2026-03-07T07:30:00Z".into()),
            // 02:30 does not exist on 03-08: it fires once, at 03:00 EDT, the first instant after the gap.
            ("ny-0230:2026-03-08".into(), "2026-03-08T07:00:00Z".into()),
            ("ny-0230:2026-03-09".into(), "2026-03-09T06:30:00Z".into()),
        ]
    );
}

#[test]
fn fall_back_new_york_overlap_fires_once_at_first_occurrence() {
    let p = ny_project();
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    assert_eq!(
        fires_of(
            &p,
            "ny-0130",
            "2026-10-31T00:00:00Z",
            "2026-11-03T00:00:00Z"
        ),
        [
            ("ny-0130:2026-10-31".into(), "2026-10-31T05:30:00Z".into()),
            ("ny-0130:2026-11-01".into(), "2026-11-01T05:30:00Z".into()), // 01:30 EDT, not 06:30Z
            ("ny-0130:2026-11-02".into(), "2026-11-02T06:30:00Z".into()),
        ]
    );
    assert_eq!(
        fires_of(
            &p,
            "ny-0230",
            "2026-10-31T00:00:00Z",
            "2026-11-03T00:00:00Z"
        ),
        [
            ("ny-0230:2026-10-31".into(), "2026-10-31T06:30:00Z".into()),
            ("ny-0230:2026-11-01".into(), "2026-11-01T07:30:00Z".into()), // 02:30 EST
            ("ny-0230:2026-11-02".into(), "2026-11-02T07:30:00Z".into()),
        ]
    );
}

#[test]
fn windows_are_the_previous_local_day_23_or_25_hours_around_dst() {
    let p = ny_project();
    let config = p.load();
    let fires = plan(
        &config.reports,
        utc("2026-03-07T00:00:00Z"),
        utc("2026-03-10T00:00:00Z"),
    );
    let window = |key: &str| fires.iter().find(|f| f.key == key).expect(key).window;
    assert_eq!(
        window("ny-0130:2026-03-09"),
        Window {
            start: at(2026, 3, 8, 5, 0),
            end: at(2026, 3, 9, 4, 0)
        }
    );
    assert_eq!(
        window("ny-0130:2026-03-09").end - window("ny-0130:2026-03-09").start,
        Duration::hours(23)
    );
    assert_eq!(
        window("ny-0230:2026-03-08").end - window("ny-0230:2026-03-08").start,
        Duration::hours(24)
    );

    let fires = plan(
        &config.reports,
        utc("2026-10-31T00:00:00Z"),
        utc("2026-11-03T00:00:00Z"),
    );
    let w = fires
        .iter()
        .find(|f| f.key == "ny-0230:2026-11-02")
        .expect("fire")
        .window;
    assert_eq!(
        w,
        Window {
            start: at(2026, 11, 1, 4, 0),
            end: at(2026, 11, 2, 5, 0)
        }
    );
    assert_eq!(w.end - w.start, Duration::hours(25));
}

#[test]
fn berlin_sample_matches_the_design_example() {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let config = p.load();
    let fires = plan(
        &config.reports,
        utc("2026-10-25T00:00:00Z"),
        utc("2026-10-26T00:00:00Z"),
    );
    assert_eq!(fires.len(), 1);
    let line = serde_json::to_string(&dawnpost::report::schedule::FireLine::from(&fires[0]))
        .expect("json");
    assert_eq!(
        line,
        r#"{"report":"warehouse-17","key":"warehouse-17:2026-10-25","fire_at":"2026-10-25T05:30:00Z","window_start":"2026-10-23T22:00:00Z","window_end":"2026-10-24T22:00:00Z"}"#
    );
    // The day after the change: a 25-hour window.
    let next = plan(
        &config.reports,
        utc("2026-10-26T00:00:00Z"),
        utc("2026-10-27T00:00:00Z"),
    );
    assert_eq!(
        next[0].window.end - next[0].window.start,
        Duration::hours(25)
    );
}

#[test]
fn sub_daily_schedules_make_one_job_per_local_date_at_its_first_fire() {
    // Every 30 minutes: the repeated hour of 2026-11-01 fires in both copies, yet the date has
    // one job, at local midnight.
    let p = Project::new(&report("ny-halfhour", "0 */30 * * * *", "America/New_York"));
    let config = p.load();
    let fires = plan(
        &config.reports,
        utc("2026-10-31T12:00:00Z"),
        utc("2026-11-03T12:00:00Z"),
    );
    let keys: Vec<String> = fires.iter().map(|f| f.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "ny-halfhour:2026-11-01",
            "ny-halfhour:2026-11-02",
            "ny-halfhour:2026-11-03"
        ]
    );
    assert_eq!(fires[0].fire_at, at(2026, 11, 1, 4, 0)); // 00:00 EDT
    assert_eq!(fires[1].fire_at, at(2026, 11, 2, 5, 0)); // 00:00 EST
}

#[test]
fn plan_ranges_split_anywhere_give_the_same_jobs() {
    // Ticks at arbitrary boundaries must neither lose nor repeat a date.
    let mut reports = report("ny", "0 */20 1-3 * * *", "America/New_York");
    reports.push_str(&report("berlin", "0 30 2 * * *", "Europe/Berlin"));
    reports.push_str(&report("lord-howe", "0 0 2 * * *", "Australia/Lord_Howe"));
    let p = Project::new(&reports);
    let config = p.load();
    let whole = plan(
        &config.reports,
        utc("2026-03-01T00:00:00Z"),
        utc("2026-04-15T00:00:00Z"),
    );
    let mut pieces = Vec::new();
    let mut cursor = utc("2026-03-01T00:00:00Z");
    let step = Duration::minutes(37);
    while cursor < utc("2026-04-15T00:00:00Z") {
        let next = (cursor + step).min(utc("2026-04-15T00:00:00Z"));
        pieces.extend(plan(&config.reports, cursor, next));
        cursor = next;
    }
    assert_eq!(pieces, whole);
    for id in ["ny", "berlin", "lord-howe"] {
        let n = whole.iter().filter(|f| f.report.as_str() == id).count();
        assert_eq!(n, 45, "{id}: one job per local date");
    }
}
