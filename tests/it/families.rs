//! `[[family]]`: one definition over the rows of a CSV file, a JSON file or an SQL query; each
//! row a report like any other; bad rows named by file, line and column; a reload (SIGHUP)
//! that adds and removes rows without touching the ledger's rows of the removed ones.

use std::sync::Arc;

use dawnpost::config::{Config, NoSqlRows};
use dawnpost::report::catalog::Catalog;
use dawnpost::services::reload::{Reloaded, Reloader};
use dawnpost::services::tick::SchedulerTick;
use dawnpost::{ManualClock, Span};

use crate::common::{self, Project, TestLedger, at};

const FAMILY: &str = r#"
[[family]]
id = "warehouse-{{row.id}}"
rows = { kind = "csv", path = "config/warehouses.csv" }
title = "Warehouse {{row.id}} daily operations"
schedule = "0 30 6 * * *"
timezone = "{{row.timezone}}"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
email = ["{{row.ops_email}}", "{{row.lead_email}}"]
"#;

const THREE: &str = "id,timezone,ops_email,lead_email
17,Europe/Berlin,ops-17@example.com,lead-17@example.com
21,America/New_York,ops-21@example.com,
33,Australia/Sydney,ops-33@example.com,lead-33@example.com
";

fn family(rows_csv: &str) -> Project {
    let p = Project::new(FAMILY);
    p.write("config/warehouses.csv", rows_csv);
    p
}

/// What `check` says of `p`, which it must accept.
fn checked(p: &Project) -> String {
    let out = common::run_in(p.root(), &["--config", "config", "check"]);
    let said = common::text(&out);
    assert!(out.status.success(), "{said}");
    said
}

fn problems(p: &Project) -> String {
    match Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
        Ok(_) => panic!("the configuration should be refused"),
        Err(e) => e.to_string(),
    }
}

/// A warning every row shares (an unset `secret_env`) is listed 20 times, then counted, as the
/// rows' problems are.
#[test]
fn a_familys_row_warnings_are_capped() {
    let mut csv = "id,timezone,ops_email,lead_email\n".to_string();
    for n in 0..100 {
        csv.push_str(&format!("{n},UTC,ops-{n}@example.com,\n"));
    }
    let p = Project::new(&format!(
        "{FAMILY}[[family.webhook]]\nurl = \"https://carrier.example/hook\"\nsecret_env = \"DAWNPOST_TEST_UNSET_SECRET\"\n"
    ));
    p.write("config/warehouses.csv", &csv);
    let config = p.load();
    let unset: Vec<&String> = (config.warnings.iter())
        .filter(|w| w.contains("DAWNPOST_TEST_UNSET_SECRET is not set"))
        .collect();
    assert_eq!(unset.len(), 20, "{:?}", config.warnings);
    assert!(
        (config.warnings.iter()).any(|w| w.contains("… and 80 more warning(s) in its rows")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn each_row_makes_a_report_with_its_columns() {
    let config = family(THREE).load();
    let ids: Vec<&str> = config.reports.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["warehouse-17", "warehouse-21", "warehouse-33"]);
    let w21 = config.report("warehouse-21").expect("warehouse-21");
    assert_eq!(w21.title, "Warehouse 21 daily operations");
    assert_eq!(w21.timezone().name(), "America/New_York");
    // An element the row leaves empty is dropped.
    let emails = w21.destinations.to(dawnpost::delivery::email::KIND);
    assert_eq!(emails, ["ops-21@example.com"]);
    let origin = w21.family.as_ref().expect("from a family");
    assert_eq!(
        origin.origin(),
        "family \"warehouse-{{row.id}}\", config/warehouses.csv line 3"
    );
    assert_eq!(config.families.len(), 1);
    assert_eq!(config.families[0].reports, 3);
    // The template sees the row as `row`.
    let window = dawnpost::domain::window::Window::previous_local_day(
        chrono::NaiveDate::from_ymd_opt(2026, 12, 2).expect("date"),
        w21.timezone(),
    )
    .expect("window");
    let context = dawnpost::report::render::context(
        w21,
        (window.end.date_naive(), window.end),
        &window,
        serde_json::json!({}),
        (false, None),
    );
    assert_eq!(context["row"]["id"], "21");
    assert_eq!(context["row"]["lead_email"], "");
}

#[test]
fn json_rows_and_values_that_are_not_strings() {
    let p = Project::new(&FAMILY.replace(
        r#"{ kind = "csv", path = "config/warehouses.csv" }"#,
        r#"{ kind = "json", path = "config/warehouses.json" }"#,
    ));
    p.write(
        "config/warehouses.json",
        r#"[{"id": 5, "timezone": "UTC", "ops_email": "a@example.com", "lead_email": null}]"#,
    );
    let config = p.load();
    let r = config.report("warehouse-5").expect("warehouse-5");
    assert_eq!(r.destinations.to(dawnpost::delivery::email::KIND).len(), 1);
    assert_eq!(
        r.family.as_ref().map(|f| f.row.as_str()),
        Some("config/warehouses.json item 1")
    );
}

#[test]
fn a_missing_column_names_the_file_the_line_and_the_column() {
    let p = family(THREE);
    p.write(
        "config/reports.toml",
        &FAMILY.replace("{{row.timezone}}", "{{row.tz}}"),
    );
    let said = problems(&p);
    assert!(
        said.contains("reports.toml: family \"warehouse-{{row.id}}\", config/warehouses.csv line 2: timezone: column \"tz\" is not in the row (its columns: id, lead_email, ops_email, timezone)"),
        "{said}"
    );
}

#[test]
fn bad_rows_are_refused_by_line() {
    // A row whose id is not a report id, and one whose address is not one.
    let said = problems(&family(
        "id,timezone,ops_email,lead_email\n17,UTC,ops@example.com,\nno space,UTC,ops@example.com,\n9,UTC,not-an-address,\n",
    ));
    assert!(
        said.contains("config/warehouses.csv line 3: report \"warehouse-no space\": id:"),
        "{said}"
    );
    assert!(said.contains("config/warehouses.csv line 4: report \"warehouse-9\": email[0]: \"not-an-address\" is not an email address"), "{said}");
    // Two rows making one id.
    let said = problems(&family(
        "id,timezone,ops_email,lead_email\n17,UTC,a@example.com,\n17,UTC,b@example.com,\n",
    ));
    assert!(
        said.contains("config/warehouses.csv line 2 and config/warehouses.csv line 3 both make report warehouse-17"),
        "{said}"
    );
    // A broken CSV line.
    let said = problems(&family("id,timezone,ops_email,lead_email\n17,UTC\n"));
    assert!(
        said.contains(
            "rows.path: config/warehouses.csv line 2: 2 field(s), but the header names 4"
        ),
        "{said}"
    );
    // A missing file.
    let p = Project::new(FAMILY);
    let said = problems(&p);
    assert!(
        said.contains("rows.path: cannot read config/warehouses.csv"),
        "{said}"
    );
}

#[test]
fn a_row_whose_id_collides_with_a_report_is_refused() {
    let p = family(THREE);
    let mut toml = common::report("warehouse-21", "0 0 7 * * *", "UTC");
    toml.push_str(FAMILY);
    p.write("config/reports.toml", &toml);
    let said = problems(&p);
    assert!(
        said.contains("family \"warehouse-{{row.id}}\", config/warehouses.csv line 3: report \"warehouse-21\": id: duplicate report id"),
        "{said}"
    );
}

#[test]
fn a_thousand_bad_rows_are_twenty_problems_and_a_count() {
    let mut csv = String::from("id,timezone,ops_email,lead_email\n");
    for i in 0..1000 {
        csv.push_str(&format!("{i},Nowhere/City,ops@example.com,\n"));
    }
    let said = problems(&family(&csv));
    assert!(said.starts_with("21 configuration problem(s)"), "{said}");
    assert!(
        said.contains("… and 980 more problem(s) in its rows"),
        "{said}"
    );
}

/// `check` says which family and row each report came from.
#[test]
fn check_names_the_family_and_row() {
    let p = family(THREE);
    let said = checked(&p);
    assert!(
        said.contains("family \"warehouse-{{row.id}}\"")
            && said.contains("3 report(s) from CSV config/warehouses.csv"),
        "{said}"
    );
    assert!(
        said.contains("from family \"warehouse-{{row.id}}\", config/warehouses.csv line 4"),
        "{said}"
    );
}

/// `check` details a family's first three reports and counts the rest: ten rows print three
/// reports, not ten.
#[test]
fn check_details_three_reports_of_a_family_and_counts_the_rest() {
    let mut csv = String::from("id,timezone,ops_email,lead_email\n");
    for i in 0..10 {
        csv.push_str(&format!("{i},UTC,ops-{i}@example.com,\n"));
    }
    let p = family(&csv);
    let said = checked(&p);
    assert!(
        said.contains("10 report(s) from CSV config/warehouses.csv")
            && said.contains("the first 3 shown below"),
        "{said}"
    );
    assert_eq!(said.matches("  from family").count(), 3, "{said}");
    assert!(
        said.contains("… and 7 more report(s) of family \"warehouse-{{row.id}}\""),
        "{said}"
    );
}

/// Rows from a query, on both backends: a SQLite file and a PostgreSQL table.
#[tokio::test]
async fn sql_rows_from_sqlite_and_postgres() {
    let p = Project::new(&FAMILY.replace(
        r#"{ kind = "csv", path = "config/warehouses.csv" }"#,
        r#"{ kind = "sql", url_env = "FAMILY_ROWS_URL", query = "config/warehouses.sql" }"#,
    ));
    p.write(
        "config/warehouses.sql",
        "SELECT id, timezone, ops_email, '' AS lead_email FROM warehouses ORDER BY id",
    );
    let db = p.root().join("rows.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&url).await.expect("sqlite");
        sqlx::raw_sql("CREATE TABLE warehouses (id TEXT, timezone TEXT, ops_email TEXT); INSERT INTO warehouses VALUES ('4', 'UTC', 'a@example.com'), ('8', 'Asia/Kolkata', 'b@example.com')")
            .execute(&mut c)
            .await
            .expect("rows");
    }
    let mut urls = vec![(format!("sqlite://{}", db.display()), None)];
    if let Some((pool, schema, pg_url)) = common::empty_pg_schema("family_rows").await {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE TABLE {schema}.warehouses (id TEXT, timezone TEXT, ops_email TEXT); INSERT INTO {schema}.warehouses VALUES ('4', 'UTC', 'a@example.com'), ('8', 'Asia/Kolkata', 'b@example.com')")))
            .execute(&pool)
            .await
            .expect("pg rows");
        urls.push((pg_url, Some(pool)));
    }
    for (url, _pool) in &urls {
        // SAFETY: this test alone reads the variable; no other thread changes the environment.
        unsafe { std::env::set_var("FAMILY_ROWS_URL", url) };
        let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let ids: Vec<&str> = config.reports.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["warehouse-4", "warehouse-8"], "{url}");
        let w8 = config.report("warehouse-8").expect("warehouse-8");
        assert_eq!(w8.timezone().name(), "Asia/Kolkata");
        assert_eq!(
            w8.family.as_ref().map(|f| f.row.as_str()),
            Some("query config/warehouses.sql row 2")
        );
    }
    // Without a reader of SQL rows, the family is refused, saying why.
    let said = Config::load(
        &p.config_dir(),
        &dawnpost::config::Readers {
            rows: &NoSqlRows,
            ..dawnpost::delivery::readers()
        },
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        said.contains("rows.query: this command does not read rows from a database"),
        "{said}"
    );
}

/// A reload that adds a row, removes one, and one that is broken, with the scheduler ticking
/// over the reloaded set, on both backends: the added report starts with its next fire, the
/// removed one makes no new jobs and keeps its rows, a broken reload changes nothing.
async fn reload_adds_and_removes_rows(t: &TestLedger) {
    let p = family(THREE);
    let config = p.load();
    let catalog = Catalog::load(&config).expect("templates");
    let metrics = Arc::new(dawnpost::runtime::metrics::Metrics::default());
    // 2026-12-02 07:00 UTC: warehouse-17 (Berlin, 06:30 = 05:30 UTC) fired today already.
    let clock = ManualClock::new(at(2026, 12, 2, 7, 0));
    let reloader = Reloader::new(&config, catalog.clone(), metrics, Arc::new(clock.clone()));
    let tick = SchedulerTick::new(
        t.ledger.clone(),
        catalog.clone(),
        Arc::new(clock.clone()),
        Span::from_secs(86_400),
    );
    tick.run_once().await.expect("first tick");
    let keys = |jobs: Vec<dawnpost::ledger::Job>| {
        let mut k: Vec<String> = jobs.iter().map(|j| j.key.to_string()).collect();
        k.sort();
        k
    };
    let all = dawnpost::ledger::JobFilter::default();
    let before = keys(t.ledger.jobs().list(&all).await.expect("jobs"));
    assert!(
        before.contains(&"warehouse-17:2026-12-02".to_string()),
        "{before:?}"
    );

    // Row 21 removed, row 40 (Berlin, already past today's 06:30) added.
    p.write(
        "config/warehouses.csv",
        "id,timezone,ops_email,lead_email\n17,Europe/Berlin,ops-17@example.com,\n33,Australia/Sydney,ops-33@example.com,\n40,Europe/Berlin,ops-40@example.com,\n",
    );
    let done = reloader.reload().await;
    assert_eq!(
        done,
        Reloaded::InForce {
            reports: 3,
            added: vec!["warehouse-40".into()],
            removed: vec!["warehouse-21".into()],
        }
    );
    // A day later: 40 fires from tomorrow, not today (it was not in force at today's fire).
    clock.set(at(2026, 12, 3, 7, 0));
    tick.run_once().await.expect("tick");
    let after = keys(t.ledger.jobs().list(&all).await.expect("jobs"));
    assert!(
        after.contains(&"warehouse-40:2026-12-03".to_string()),
        "{after:?}"
    );
    assert!(
        !after.contains(&"warehouse-40:2026-12-02".to_string()),
        "{after:?}"
    );
    assert!(
        !after
            .iter()
            .any(|k| k.starts_with("warehouse-21:2026-12-03")),
        "{after:?}"
    );
    // The removed report's rows stay.
    for k in before.iter().filter(|k| k.starts_with("warehouse-21:")) {
        assert!(after.contains(k), "{k} kept: {after:?}");
    }

    // A broken reload leaves the set in force.
    p.write("config/warehouses.csv", "id,timezone\n17\n");
    assert!(matches!(reloader.reload().await, Reloaded::Refused(m) if m.contains("line 2")));
    assert!(catalog.get("warehouse-40").is_some());
    assert_eq!(catalog.current().list.len(), 3);
}

crate::on_both_backends!(reload_adds_and_removes_rows);

/// The daemon reloads on SIGHUP: a row added to the CSV is a report in force (the metrics
/// count the reload; a broken file is counted as failed and logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_reloads_its_rows_on_sighup() {
    let p = family(THREE);
    p.write("config/dawnpost.toml", "[server]\nbind = \"127.0.0.1:0\"\n");
    let daemon = common::daemon::Daemon::start(common::daemon::run_command(&p));
    let mut csv = THREE.to_string();
    csv.push_str("50,UTC,ops-50@example.com,\n");
    p.write("config/warehouses.csv", &csv);
    daemon.signal("HUP");
    let counted = |result: &str| format!("dawnpost_config_reloads_total{{result=\"{result}\"}} 1");
    common::daemon::wait_for_metric(&daemon.addr, &counted("ok")).await;
    p.write("config/warehouses.csv", "id,timezone\n17\n");
    daemon.signal("HUP");
    common::daemon::wait_for_metric(&daemon.addr, &counted("failed")).await;
    let (code, log) = daemon.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("reports reloaded") && log.contains("added=1"),
        "{log}"
    );
    assert!(
        log.contains("the configuration did not load; the reports in force are unchanged"),
        "{log}"
    );
}
