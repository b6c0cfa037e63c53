//! A report's `window` against a brute-force reference written here: every period × zones with
//! and without DST (Lord Howe's half-hour shift among them) × every local date of 2027 and 2028.
//! The reference finds a local midnight by stepping through UTC instants a quarter-hour at a
//! time, the last complete week, month and quarter by trying every candidate, and the previous
//! fire of a Mon/Wed/Fri schedule by its weekdays: none of it shares code with the schedule.

use crate::common;

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use common::Project;
use dawnpost::report::schedule::window_of;

const ZONES: [&str; 5] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
];

/// `(window, week_starts, schedule)` for each report of each zone.
const PERIODS: [(&str, Option<&str>, &str); 7] = [
    ("day", None, "0 30 6 * * *"),
    ("week", None, "0 0 7 * * MON"),
    ("week", Some("sunday"), "0 0 7 * * SUN"),
    ("week", Some("wednesday"), "0 0 7 * * *"),
    ("month", None, "0 0 7 1 * *"),
    ("quarter", None, "0 0 7 1 1,4,7,10 *"),
    ("since_previous", None, "0 0 7 * * MON,WED,FRI"),
];

/// A report of the shipped template and sample with `keys` added.
fn reading(id: &str, schedule: &str, tz: &str, keys: &str) -> String {
    format!("{}{keys}", common::report(id, schedule, tz))
}

fn project() -> Project {
    let mut toml = String::new();
    for zone in ZONES {
        for (i, (window, starts, schedule)) in PERIODS.iter().enumerate() {
            let id = format!("{}-{i}", zone.replace(['/', '_'], "-").to_lowercase());
            let starts = starts.map(|s| format!("week_starts = \"{s}\"\n"));
            let keys = format!("window = \"{window}\"\n{}", starts.unwrap_or_default());
            toml.push_str(&reading(&id, schedule, zone, &keys));
        }
    }
    Project::new(&toml)
}

/// The first UTC instant whose local date in `tz` is `date`, found a quarter-hour at a time.
fn midnight(
    tz: Tz,
    date: NaiveDate,
    cache: &mut HashMap<NaiveDate, DateTime<Utc>>,
) -> DateTime<Utc> {
    *cache.entry(date).or_insert_with(|| {
        let naive = date.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
        (0..=30 * 4)
            .map(|q| naive - chrono::Duration::hours(15) + chrono::Duration::minutes(15 * q))
            .find(|t| t.with_timezone(&tz).date_naive() == date)
            .expect("a local midnight within 15 hours of UTC's")
    })
}

/// The local dates `[first, end)` the reference says a job fired on `date` reads.
fn reference(window: &str, starts: Option<&str>, date: NaiveDate) -> (NaiveDate, NaiveDate) {
    let back = |n: u64| date.checked_sub_days(Days::new(n)).expect("date");
    match window {
        "day" => (back(1), date),
        "week" => {
            let starts: Weekday = starts.unwrap_or("monday").parse().expect("weekday");
            // The latest start of a week that has ended by the fire's date.
            let first = (7..=13)
                .map(back)
                .find(|s| s.weekday() == starts)
                .expect("a week start within two weeks");
            (first, first + Days::new(7))
        }
        "month" | "quarter" => {
            let step = if window == "month" { 1 } else { 3 };
            let starts: Vec<NaiveDate> = (2025..=2029)
                .flat_map(|y| (1..=12).map(move |m| (y, m)))
                .filter(|(_, m)| (m - 1) % step == 0)
                .map(|(y, m)| NaiveDate::from_ymd_opt(y, m, 1).expect("first"))
                .collect();
            let first = starts
                .into_iter()
                .filter(|s| *s + Months::new(step) <= date)
                .max()
                .expect("a period before");
            (first, first + Months::new(step))
        }
        "since_previous" => {
            let fires = [Weekday::Mon, Weekday::Wed, Weekday::Fri];
            let previous = (1..=7)
                .map(back)
                .find(|d| fires.contains(&d.weekday()))
                .expect("a fire within a week");
            (previous, date)
        }
        other => panic!("no reference for {other}"),
    }
}

#[test]
fn every_period_in_every_zone_agrees_with_the_reference_over_two_years() {
    let p = project();
    let config = p.load();
    let first = NaiveDate::from_ymd_opt(2027, 1, 1).expect("date");
    let mut hours: HashMap<(String, String), BTreeSet<i64>> = HashMap::new();
    for report in &config.reports {
        let tz = report.timezone();
        let i: usize = (report.id.as_str().rsplit('-').next())
            .and_then(|n| n.parse().ok())
            .expect("the period's index");
        let (window, starts, _) = PERIODS[i];
        let mut cache = HashMap::new();
        for date in first.iter_days().take_while(|d| d.year() <= 2028) {
            let got = window_of(report, date).expect("a window");
            let (from, to) = reference(window, starts, date);
            let want = (midnight(tz, from, &mut cache), midnight(tz, to, &mut cache));
            assert_eq!(
                (got.start, got.end),
                want,
                "{} fired {date}: window {window}",
                report.id
            );
            hours
                .entry((tz.name().to_string(), window.to_string()))
                .or_default()
                .insert((got.end - got.start).num_minutes());
        }
    }
    // Across a DST change a week is an hour (Lord Howe: half an hour) short or long, and so is
    // a month; a zone without DST keeps whole days.
    let minutes = |zone: &str, window: &str| hours[&(zone.to_string(), window.to_string())].clone();
    let h = |list: &[f64]| {
        list.iter()
            .map(|h| (h * 60.0) as i64)
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(minutes("Europe/Berlin", "week"), h(&[167.0, 168.0, 169.0]));
    assert_eq!(
        minutes("Australia/Lord_Howe", "week"),
        h(&[167.5, 168.0, 168.5])
    );
    assert_eq!(minutes("Asia/Kolkata", "week"), h(&[168.0]));
    // March and October in Berlin, March and November (30 days) in New York.
    assert_eq!(
        minutes("Europe/Berlin", "month"),
        h(&[672.0, 696.0, 720.0, 743.0, 744.0, 745.0])
    );
    assert_eq!(
        minutes("America/New_York", "month"),
        h(&[672.0, 696.0, 720.0, 721.0, 743.0, 744.0])
    );
    assert_eq!(minutes("UTC", "day"), h(&[24.0]));
}

#[test]
fn since_previous_follows_the_calendar_that_skips_a_fire() {
    let p = Project::new(&reading(
        "mwf",
        "0 0 7 * * MON,WED,FRI",
        "Europe/Berlin",
        "window = \"since_previous\"\ncalendar = \"config/holidays.toml\"\n",
    ));
    p.write(
        "config/holidays.toml",
        "[[holiday]]\ndate = \"2026-12-09\"\nname = \"Stocktake\"\n",
    );
    let config = p.load();
    let report = &config.reports[0];
    let dates = |fired: &str| {
        let date: NaiveDate = fired.parse().expect("date");
        let (first, end) = window_of(report, date)
            .expect("window")
            .local_dates(report.timezone());
        (first.to_string(), end.to_string())
    };
    // Wednesday the 9th is closed: Friday reads from Monday.
    assert_eq!(
        dates("2026-12-11"),
        ("2026-12-07".into(), "2026-12-11".into())
    );
    assert_eq!(
        dates("2026-12-07"),
        ("2026-12-04".into(), "2026-12-07".into())
    );
}

/// What the HTTP source was asked for: its `from` and `to` query parameters.
type Asked = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// An HTTP source on 127.0.0.1 that records the window it is asked for and answers with it.
async fn http_source(asked: Asked) -> std::net::SocketAddr {
    use axum::extract::{Query, State};
    async fn data(
        State(asked): State<Asked>,
        Query(q): Query<HashMap<String, String>>,
    ) -> axum::Json<serde_json::Value> {
        let (from, to) = (q["from"].clone(), q["to"].clone());
        asked.lock().expect("lock").push((from.clone(), to.clone()));
        axum::Json(serde_json::json!({ "from": from, "to": to }))
    }
    let app = axum::Router::new()
        .route("/data", axum::routing::get(data))
        .with_state(asked);
    crate::common::peers::serve(app).await
}

/// A weekly report reads its week from an HTTP source and a monthly one its month from an SQL
/// query, through the whole pipeline: the bounds each source received, and what the template
/// says of the window (`window.label`, `window.days`, `window.first`, `window.last`).
#[tokio::test]
async fn the_sources_and_the_template_see_the_jobs_period() {
    let asked = Asked::default();
    let addr = http_source(asked.clone()).await;
    let env = "DAWNPOST_TEST_PERIOD_SQL_URL";
    let p = Project::new(&format!(
        r#"
[[report]]
id = "weekly"
title = "Weekly"
schedule = "0 0 7 * * MON"
timezone = "Europe/Berlin"
template = "win_http"
source = {{ kind = "http", url = "http://{addr}/data?from={{{{window.start}}}}&to={{{{window.end}}}}" }}
sample = "config/sample/win_http.json"
window = "week"

[[report]]
id = "monthly"
title = "Monthly"
schedule = "0 0 7 * * MON"
timezone = "Europe/Berlin"
template = "win_sql"
source = {{ kind = "sql", url_env = "{env}", query = "config/window.sql" }}
sample = "config/sample/win_sql.json"
window = "month"
"#
    ));
    let said =
        "{{window.label}}|{{window.days}}|{{window.first}}|{{window.last}}|{{window.period}}";
    for (name, data) in [
        ("win_http", "{{data.from}}..{{data.to}}"),
        (
            "win_sql",
            "{{#each data}}{{this.start}}..{{this.end}}{{/each}}",
        ),
    ] {
        p.write(
            &format!("templates/{name}.html.hbs"),
            &format!("<p>{said}|{data}</p>"),
        );
        p.write(
            &format!("templates/{name}.txt.hbs"),
            &format!("{said}|{data}"),
        );
    }
    p.write("config/sample/win_http.json", r#"{"from": "a", "to": "b"}"#);
    p.write(
        "config/sample/win_sql.json",
        r#"[{"start": "a", "end": "b"}]"#,
    );
    p.write("config/window.sql", "SELECT $1 AS \"start\", $2 AS \"end\"");
    let db = p.root().join("ops.db");
    std::fs::write(&db, b"").expect("db");
    // SAFETY: set once, read by this test only.
    unsafe { std::env::set_var(env, format!("sqlite://{}", db.display())) };

    let t = common::TestLedger::sqlite().await;
    let summary = common::run_date(
        &p.load(),
        &t.ledger,
        "2026-12-07",
        std::time::Duration::from_secs(60),
    )
    .await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");

    let week = ("2026-11-29T23:00:00Z", "2026-12-06T23:00:00Z");
    let month = ("2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z");
    assert_eq!(
        *asked.lock().expect("lock"),
        [(week.0.to_string(), week.1.to_string())],
        "the HTTP source was asked for the complete week before the Monday"
    );
    let store = dawnpost::report::artifact::ArtifactStore::open("file://var/artifacts", p.root())
        .expect("store");
    for (key, bounds, said) in [
        (
            "weekly:2026-12-07",
            week,
            "week 49, 2026|7|2026-11-30|2026-12-06|week",
        ),
        (
            "monthly:2026-12-07",
            month,
            "November 2026|30|2026-11-01|2026-11-30|month",
        ),
    ] {
        let job = t
            .ledger
            .jobs()
            .get(&common::jk(key))
            .await
            .expect("job")
            .expect("a job");
        assert_eq!(
            (
                dawnpost::domain::window::rfc3339(job.window.start),
                dawnpost::domain::window::rfc3339(job.window.end)
            ),
            (bounds.0.to_string(), bounds.1.to_string()),
            "{key}: the window recorded on the job"
        );
        let rendered = store
            .read_rendered(&job.artifact.expect("an artifact"))
            .await
            .expect("read back");
        assert_eq!(
            rendered.text,
            format!("{said}|{}..{}", bounds.0, bounds.1),
            "{key}"
        );
    }
}

/// `check` prints each next fire with the period it reads, and warns of a schedule that fires
/// several times in its period; `enqueue` without a date makes the job of today's local date,
/// reading its period.
#[test]
fn check_shows_the_windows_and_enqueue_takes_today() {
    let p = Project::new(&format!(
        "{}{}",
        reading(
            "weekly",
            "0 0 7 * * MON",
            "Europe/Berlin",
            "window = \"week\"\n"
        ),
        reading(
            "daily-reads-a-month",
            "0 0 7 * * *",
            "Europe/Berlin",
            "window = \"month\"\n"
        ),
    ));
    let out = crate::cli::dawnpost(&p, &["check"]);
    let (text, said) = (crate::cli::stdout(&out), crate::cli::stderr(&out));
    assert!(out.status.success(), "{said}");
    let weekly: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("next weekly:"))
        .collect();
    assert_eq!(weekly.len(), 3, "{text}");
    for line in weekly {
        let date: NaiveDate = line
            .split_whitespace()
            .nth(1)
            .and_then(|k| k.strip_prefix("weekly:"))
            .and_then(|d| d.parse().ok())
            .expect("a key");
        let week = (date - Days::new(4)).iso_week();
        let label = format!("reads week {}, {}", week.week(), week.year());
        assert!(line.contains(&label), "{line}: {label}");
    }
    let all = format!("{text}{said}");
    assert!(
        all.contains("report \"daily-reads-a-month\": window: the schedule fires 31 times in the month of 2027-01-01: each fire in a month reads the same complete month before it"),
        "{all}"
    );

    let berlin: Tz = "Europe/Berlin".parse().expect("zone");
    let today = || Utc::now().with_timezone(&berlin).date_naive();
    let before = today();
    let out = crate::cli::dawnpost(&p, &["enqueue", "weekly", "--json"]);
    let after = today();
    assert!(out.status.success(), "{}", crate::cli::stderr(&out));
    let line: serde_json::Value =
        serde_json::from_str(crate::cli::stdout(&out).trim()).expect("json");
    let key = line["key"].as_str().expect("key");
    let date: NaiveDate = key
        .strip_prefix("weekly:")
        .expect("weekly")
        .parse()
        .expect("date");
    assert!(
        date == before || date == after,
        "{key}: today is {before} or {after}"
    );
    let (first, _) = reference("week", None, date);
    let mut cache = HashMap::new();
    assert_eq!(
        line["window_start"],
        dawnpost::domain::window::rfc3339(midnight(berlin, first, &mut cache))
    );
}

/// A `[[family]]` takes `window` (and `week_starts`) from a row as any key: each warehouse's
/// report reads the week its own row starts on.
#[test]
fn a_family_row_sets_its_reports_period() {
    let p = Project::new(
        r#"
[[family]]
id = "site-{{row.id}}"
rows = { kind = "csv", path = "config/sites.csv" }
title = "Site {{row.id}}, last week"
schedule = "0 0 7 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
window = "week"
week_starts = "{{row.week_starts}}"
"#,
    );
    p.write("config/sites.csv", "id,week_starts\nde,monday\nil,sunday\n");
    let config = p.load();
    let fired: NaiveDate = "2026-12-09".parse().expect("date");
    let weeks: Vec<(String, String)> = config
        .reports
        .iter()
        .map(|r| {
            let (first, end) = window_of(r, fired)
                .expect("window")
                .local_dates(r.timezone());
            (r.id.to_string(), format!("{first}..{end}"))
        })
        .collect();
    assert_eq!(
        weeks,
        [
            ("site-de".to_string(), "2026-11-30..2026-12-07".to_string()),
            ("site-il".to_string(), "2026-11-29..2026-12-06".to_string()),
        ]
    );
}
