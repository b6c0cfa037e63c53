//! Readiness probes of each kind against real peers (a file, SQLite and PostgreSQL queries, an
//! HTTP server that answers, refuses or hangs), and the readiness keys `check` refuses.

use crate::common;
use common::text;

use std::sync::Arc;
use std::time::Duration;

use common::peers::{HttpRule, Receiver};
use common::{Project, run_in};
use dawnpost::report::readiness::ProbeOutcome;

/// A readiness of `probe`, every minute, with `timeout`.
fn readiness(probe: dawnpost::config::SourceSpec, timeout: u64) -> dawnpost::config::Readiness {
    dawnpost::config::Readiness {
        probe,
        every: dawnpost::Span::from_secs(60),
        timeout: dawnpost::Span::from_secs(timeout),
        wait_until: dawnpost::config::Deadline::AfterFire(dawnpost::Span::from_secs(3600)),
        on_late: dawnpost::config::OnLate::Send,
    }
}

async fn asked(r: &dawnpost::config::Readiness) -> dawnpost::report::readiness::Answer {
    let window = dawnpost::domain::window::Window {
        start: common::utc("2026-11-29T00:00:00Z"),
        end: common::utc("2026-11-30T00:00:00Z"),
    };
    let date = "2026-11-30".parse().expect("date");
    dawnpost::report::readiness::probe(r, date, &window, &reqwest::Client::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_probe_kind_answers_ready_not_ready_or_failed() {
    use ProbeOutcome::{Failed, NotReady, Ready};
    use dawnpost::config::SourceSpec;
    use dawnpost::report::source::{FileProbe, HttpProbe, SqlProbe};
    let dir = tempfile::tempdir().expect("tempdir");
    // A file: its path takes the job's date.
    let template = dir.path().join("ready-{{date}}.flag").display().to_string();
    let file = readiness(SourceSpec::new(FileProbe { path: template }), 5);
    assert_eq!(asked(&file).await.outcome, NotReady);
    std::fs::write(dir.path().join("ready-2026-11-30.flag"), "").expect("flag");
    assert_eq!(asked(&file).await.outcome, Ready);

    // SQLite: the first column of the first row, the window bound as $1 and $2.
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("ops.db").display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db)
        .await
        .expect("sqlite");
    sqlx::query("CREATE TABLE loads (day TEXT, done INTEGER)")
        .execute(&mut conn)
        .await
        .expect("create");
    sqlx::query("INSERT INTO loads VALUES ('2026-11-30', 0)")
        .execute(&mut conn)
        .await
        .expect("insert");
    let query = dir.path().join("ready.sql");
    std::fs::write(
        &query,
        "SELECT done, 'x' FROM loads WHERE day = substr($2, 1, 10)",
    )
    .expect("query");
    // SAFETY: set once, before any probe reads it; no other test reads this variable.
    unsafe { std::env::set_var("DAWNPOST_TEST_READY_DB", &db) };
    let sql = readiness(
        SourceSpec::new(SqlProbe {
            url_env: "DAWNPOST_TEST_READY_DB".into(),
            query: query.clone(),
        }),
        5,
    );
    let not_yet = asked(&sql).await;
    assert_eq!(
        (not_yet.outcome, not_yet.text.as_str()),
        (NotReady, "the query answered 0")
    );
    sqlx::query("UPDATE loads SET done = 1")
        .execute(&mut conn)
        .await
        .expect("update");
    assert_eq!(asked(&sql).await.outcome, Ready);
    sqlx::query("DELETE FROM loads")
        .execute(&mut conn)
        .await
        .expect("delete");
    let none = asked(&sql).await;
    assert_eq!(
        (none.outcome, none.text.as_str()),
        (NotReady, "the query returned no rows")
    );
    std::fs::write(&query, "SELECT nonsense FROM nowhere").expect("query");
    assert_eq!(
        asked(&sql).await.outcome,
        Failed,
        "an error counts as not ready"
    );

    // PostgreSQL: a boolean.
    if std::env::var_os("DAWNPOST_TEST_POSTGRES_URL").is_some() {
        let pg = dir.path().join("pg.sql");
        let pg_sql = |q: &str| {
            std::fs::write(&pg, q).expect("query");
            readiness(
                SourceSpec::new(SqlProbe {
                    url_env: "DAWNPOST_TEST_POSTGRES_URL".into(),
                    query: pg.clone(),
                }),
                5,
            )
        };
        assert_eq!(
            asked(&pg_sql("SELECT $2::text > $1::text")).await.outcome,
            Ready
        );
        assert_eq!(asked(&pg_sql("SELECT false")).await.outcome, NotReady);
    }

    // HTTP: 2xx is ready, other answers not, a hang is cut at the probe's timeout.
    let rule: HttpRule = Arc::new(|path: &str, _, _| match path {
        "up" => (204, None, Duration::ZERO),
        "down" => (404, None, Duration::ZERO),
        _ => (200, None, Duration::from_secs(30)),
    });
    let rx = Receiver::start(rule).await;
    let http = |path: &str| readiness(SourceSpec::new(HttpProbe { url: rx.url(path) }), 1);
    assert_eq!(asked(&http("up")).await.outcome, Ready);
    let down = asked(&http("down")).await;
    assert_eq!(down.outcome, NotReady);
    assert!(
        down.text.contains("HTTP 404") && !down.text.contains("down"),
        "no path shown: {}",
        down.text
    );
    let started = std::time::Instant::now();
    assert_eq!(asked(&http("hang")).await.outcome, Failed);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cut at 1s: {:?}",
        started.elapsed()
    );
}

#[test]
fn bad_readiness_keys_are_refused_naming_file_report_and_field() {
    let cases = [
        (
            "ready_when = { kind = \"ftp\", every = \"1m\" }\nwait_until = \"3h\"",
            "ready_when.kind",
            "not a readiness kind",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"0s\" }\nwait_until = \"3h\"",
            "ready_when.every",
            "at least 1s",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"500ms\" }\nwait_until = \"3h\"",
            "ready_when.every",
            "at least 1s",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\" }\nwait_until = \"3h\"",
            "ready_when.every",
            "missing",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"1m\" }\nwait_until = \"05:00\"",
            "wait_until",
            "not after the schedule's fire at 06:30:00",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"1m\" }\nwait_until = \"0s\"",
            "wait_until",
            "longer than zero",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"1m\" }",
            "wait_until",
            "needs a deadline",
        ),
        ("wait_until = \"09:00\"", "wait_until", "needs ready_when"),
        (
            "ready_when = { kind = \"file\", path = \"x\", every = \"1m\" }\nwait_until = \"3h\"\non_late = \"later\"",
            "on_late",
            "not one of",
        ),
        (
            "ready_when = { kind = \"file\", path = \"x-{{day}}\", every = \"1m\" }\nwait_until = \"3h\"",
            "ready_when.path",
            "may be templated",
        ),
        (
            "ready_when = { kind = \"http\", url = \"ftp://x\", every = \"1m\" }\nwait_until = \"3h\"",
            "ready_when.url",
            "not an http",
        ),
    ];
    for (keys, field, says) in cases {
        let p = Project::new(
            &common::report("warehouse-17", "0 30 6 * * *", "UTC")
                .replace("email =", &format!("{keys}\nemail =")),
        );
        let check = run_in(p.root(), &["check"]);
        let said = text(&check);
        assert!(!check.status.success(), "{keys}: {said}");
        assert!(
            said.contains("reports.toml")
                && said.contains("warehouse-17")
                && said.contains(field)
                && said.contains(says),
            "{keys}: expected {field}: {says} in {said}"
        );
    }
}
