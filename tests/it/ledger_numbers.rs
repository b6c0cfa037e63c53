//! Numbered work, on both backends: every job has a number of its own, every delivery its
//! job's number and its place in the job (`ordinal`: 0, 1, 2 … in the order they were
//! created), every attempt its delivery's pair — whichever path wrote the row (a render, a
//! later render that adds a destination, a finish, the rescuer; between the expand and the
//! contract migrations, an older version's insert without them) — and a ledger made before the
//! numbers has its rows numbered by the migration.

use std::collections::{BTreeMap, BTreeSet};

use crate::common;

use chrono::Duration;
use common::fixtures::*;
use common::{TestLedger, jk};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, Finish, Render, RescueBudget};

/// A delivery's (job number, ordinal, its job's number).
type DeliveryNumbers = (Option<i64>, Option<i64>, Option<i64>);

/// A delivery's key and [`DeliveryNumbers`], as a row.
type DeliveryRow = (String, Option<i64>, Option<i64>, Option<i64>);

/// An attempt: (delivery key, its pair, its delivery's pair, class).
type AttemptNumbers = (
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    String,
);

/// Each job's number, by key.
async fn job_numbers(t: &TestLedger) -> BTreeMap<String, Option<i64>> {
    let rows: Vec<(String, Option<i64>)> =
        t.rows(|p| format!("SELECT key, number FROM {p}jobs")).await;
    rows.into_iter().collect()
}

/// Each delivery's (job number, ordinal) and its job's number, by key.
async fn delivery_numbers(t: &TestLedger) -> BTreeMap<String, DeliveryNumbers> {
    let rows: Vec<DeliveryRow> = t
        .rows(|p| {
            format!(
                "SELECT d.key, d.job_number, CAST(d.ordinal AS BIGINT), j.number
                 FROM {p}deliveries d JOIN {p}jobs j ON j.key = d.job_key"
            )
        })
        .await;
    rows.into_iter()
        .map(|(k, n, o, j)| (k, (n, o, j)))
        .collect()
}

/// Every attempt: (delivery key, its pair, its delivery's pair, class).
async fn attempt_numbers(t: &TestLedger) -> Vec<AttemptNumbers> {
    t.rows(|p| {
        format!(
            "SELECT a.delivery_key, a.job_number, CAST(a.ordinal AS BIGINT), d.job_number,
                    CAST(d.ordinal AS BIGINT), a.class
             FROM {p}delivery_attempts a JOIN {p}deliveries d ON d.key = a.delivery_key
             ORDER BY a.id"
        )
    })
    .await
}

/// Every delivery holds its job's number, and a job's ordinals are 0 … n-1 in `order`.
fn numbered_in_order(deliveries: &BTreeMap<String, DeliveryNumbers>, order: &[(&str, &[&str])]) {
    for (job, emails) in order {
        let job_number = deliveries
            .get(&format!("{job}/email:{}", emails[0]))
            .and_then(|d| d.2);
        assert!(job_number.is_some(), "{job} has a number: {deliveries:?}");
        for (i, email) in emails.iter().enumerate() {
            let key = format!("{job}/email:{email}");
            let got = deliveries.get(&key).copied();
            let want = (job_number, i64::try_from(i).ok(), job_number);
            assert_eq!(got, Some(want), "{key}: {deliveries:?}");
        }
    }
}

/// Renders, finishes and the rescuer's attempt rows all write the numbers.
async fn every_job_delivery_and_attempt_carries_its_numbers(t: &TestLedger) {
    let l = &t.ledger;
    let order: [(&str, &[&str]); 3] = [
        (
            "a:2026-10-25",
            &["x@example.com", "y@example.com", "z@example.com"],
        ),
        ("b:2026-10-25", &["y@example.com", "x@example.com"]),
        ("c:2026-10-25", &["w@example.com"]),
    ];
    ready_jobs(t, &order.map(|(job, _)| job)).await;
    let jobs = job_numbers(t).await;
    let numbers: BTreeSet<i64> = jobs.values().filter_map(|n| *n).collect();
    assert_eq!(numbers.len(), 3, "three jobs, three numbers: {jobs:?}");

    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let renders: Vec<Render> = order
        .iter()
        .map(|(job, emails)| Render {
            lease: lease_of(&leased, job),
            artifact: artifact(),
            // A list that names a destination twice makes one delivery of it.
            deliveries: destinations(job, &[*emails, &emails[..1]].concat()),
        })
        .collect();
    let results = l
        .jobs()
        .rendered_many(&renders, t0())
        .await
        .expect("renders");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    numbered_in_order(&delivery_numbers(t).await, &order);
    assert_eq!(
        job_numbers(t).await,
        jobs,
        "a render keeps its job's number"
    );

    // Six sends: five finish (sent, or to retry), the sixth's worker goes silent.
    let sends = l
        .leases()
        .deliveries(&params("w1", t0(), 10))
        .await
        .expect("sends");
    assert_eq!(sends.len(), 6);
    let finishes: Vec<Finish> = sends[..5]
        .iter()
        .enumerate()
        .map(|(i, d)| Finish {
            lease: d.lease.clone(),
            attempt: attempt(
                if i % 2 == 0 {
                    ResponseClass::Accepted
                } else {
                    ResponseClass::Transient
                },
                t0(),
            ),
            next: match i % 2 {
                0 => DeliveryNext::Sent,
                _ => DeliveryNext::Retry {
                    ready_at: t0() + Duration::minutes(1),
                },
            },
        })
        .collect();
    let finished = l
        .deliveries()
        .finish_many(&finishes)
        .await
        .expect("finishes");
    assert!(finished.iter().all(Result::is_ok), "{finished:?}");
    let budget = RescueBudget {
        max_attempts: 8,
        max_age: Duration::hours(6),
    };
    l.leases()
        .rescue(t0() + Duration::minutes(10), &budget)
        .await
        .expect("rescue");

    let attempts = attempt_numbers(t).await;
    assert_eq!(
        attempts.len(),
        6,
        "five finishes and one lost send: {attempts:?}"
    );
    assert!(
        attempts.iter().any(|a| a.5 == "unknown"),
        "the rescuer recorded the lost send: {attempts:?}"
    );
    for (key, job_number, ordinal, d_job_number, d_ordinal, _) in &attempts {
        assert!(
            job_number.is_some() && ordinal.is_some(),
            "{key}: {attempts:?}"
        );
        assert_eq!((job_number, ordinal), (d_job_number, d_ordinal), "{key}");
    }
}

/// A job rendered again (its first render recorded, then back to `ready`) keeps its
/// deliveries' numbers, and one it adds comes after them.
async fn a_later_render_numbers_what_it_adds_after_the_jobs_others(t: &TestLedger) {
    let l = &t.ledger;
    let key = "a:2026-10-25";
    rendered_job(t, key, &["x@example.com", "y@example.com"]).await;
    t.behind_the_back(|p| {
        format!(
            "UPDATE {p}jobs SET state = 'ready', lease_owner = NULL, lease_expires_at = NULL
             WHERE key = '{key}'"
        )
    })
    .await;
    let leased = l
        .leases()
        .jobs(&params("w2", t0() + Duration::minutes(1), 10))
        .await
        .expect("lease again");
    let lease = lease_of(&leased, key);
    assert!(!lease.is_first(), "a second render lease");
    let emails = ["x@example.com", "y@example.com", "z@example.com"];
    let listed = [&emails[..], &["z@example.com"]].concat();
    l.jobs()
        .rendered(&lease, &artifact(), &destinations(key, &listed), t0())
        .await
        .expect("rendered again");
    assert_eq!(l.deliveries().list(&jk(key)).await.expect("list").len(), 3);
    numbered_in_order(&delivery_numbers(t).await, &[(key, &emails)]);
}

crate::on_both_backends!(
    every_job_delivery_and_attempt_carries_its_numbers,
    a_later_render_numbers_what_it_adds_after_the_jobs_others,
);

/// A ledger at schema 23 (the numbers' expand migration; the contract, 24, not yet applied),
/// reached as an older version reaches it.
enum Expanded {
    /// The pool, and the folder that holds the file for as long as the test runs.
    Sqlite(sqlx::SqlitePool, #[allow(dead_code)] tempfile::TempDir),
    Postgres(sqlx::PgPool, sqlx::PgPool, String),
}

impl Expanded {
    async fn sqlite() -> Expanded {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().expect("url");
        let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .expect("sqlite");
        let migrator = sqlx::migrate!("./migrations/sqlite");
        migrator.run_to(23, &pool).await.expect("schema 23");
        Expanded::Sqlite(pool, dir)
    }

    async fn postgres() -> Option<Expanded> {
        let (admin, schema, url) = common::empty_pg_schema("dp_numbers").await?;
        let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
        let migrator = sqlx::migrate!("./migrations/postgres");
        migrator.run_to(23, &pool).await.expect("schema 23");
        Some(Expanded::Postgres(pool, admin, schema))
    }

    async fn run(&self, sql: String) {
        match self {
            Expanded::Sqlite(p, _) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(p)
                .await
                .map(|_| ()),
            Expanded::Postgres(p, ..) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(p)
                .await
                .map(|_| ()),
        }
        .expect("an older version's write");
    }

    /// `(key, number, ordinal)` rows of `sql`.
    async fn numbers(&self, sql: &str) -> Vec<(String, Option<i64>, Option<i64>)> {
        let sql = sql.to_string();
        match self {
            Expanded::Sqlite(p, _) => sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(p).await,
            Expanded::Postgres(p, ..) => {
                sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(p).await
            }
        }
        .expect("numbers")
    }

    async fn close(self) {
        match self {
            Expanded::Sqlite(p, _) => p.close().await,
            Expanded::Postgres(p, admin, schema) => {
                p.close().await;
                let drop = format!("DROP SCHEMA {schema} CASCADE");
                let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&admin).await;
            }
        }
    }
}

/// Between the expand migration and the contract one, an older version's rows (a job, its
/// deliveries, an attempt, written without numbers) are numbered by the ledger as they go in:
/// the deliveries in the order the statement inserted them, the attempt as its delivery.
async fn an_older_versions_rows_are_numbered_as_they_go_in(old: Expanded) {
    let key = "old:2026-10-25";
    old.run(format!(
        "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start,
             window_end, ready_at, created_at, updated_at)
         VALUES ('{key}', 'old', '2026-10-25', 'delivering', 'schedule', 0, 0, 0, 0, 0, 0)"
    ))
    .await;
    let row = |dest: &str| {
        format!("('{key}/email:{dest}', '{key}', 'email', '{dest}', 'sending', 0, 1, 0, 0)")
    };
    old.run(format!(
        "INSERT INTO deliveries (key, job_key, kind, destination, state, ready_at, attempts,
             created_at, updated_at)
         VALUES {}, {}",
        row("q@example.com"),
        row("p@example.com")
    ))
    .await;
    old.run(format!(
        "INSERT INTO delivery_attempts (delivery_key, attempt, requested_at, finished_at, class)
         VALUES ('{key}/email:p@example.com', 1, 0, 0, 'accepted')"
    ))
    .await;
    let jobs = old.numbers("SELECT key, number, NULL FROM jobs").await;
    let number = jobs[0].1;
    assert!(number.is_some(), "{jobs:?}");
    let deliveries = old
        .numbers("SELECT key, job_number, CAST(ordinal AS BIGINT) FROM deliveries ORDER BY key")
        .await;
    assert_eq!(
        deliveries,
        [
            (format!("{key}/email:p@example.com"), number, Some(1)),
            (format!("{key}/email:q@example.com"), number, Some(0)),
        ]
    );
    let attempts = old
        .numbers("SELECT delivery_key, job_number, CAST(ordinal AS BIGINT) FROM delivery_attempts")
        .await;
    assert_eq!(
        attempts,
        [(format!("{key}/email:p@example.com"), number, Some(1))]
    );
    old.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_versions_rows_are_numbered_as_they_go_in_on_sqlite() {
    an_older_versions_rows_are_numbered_as_they_go_in(Expanded::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_versions_rows_are_numbered_as_they_go_in_on_postgres() {
    let Some(old) = Expanded::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    an_older_versions_rows_are_numbered_as_they_go_in(old).await;
}

/// A SQLite ledger at the schema before the numbers, with a night's rows, numbers them when
/// it opens: jobs in the order they were made, each job's deliveries in theirs, attempts as
/// their deliveries; the next job takes the next number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_ledger_made_before_the_numbers_has_its_rows_numbered_when_it_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let options: sqlx::sqlite::SqliteConnectOptions = url.parse().expect("url");
    let raw = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
        .await
        .expect("raw");
    let migrator = sqlx::migrate!("./migrations/sqlite");
    migrator.run_to(22, &raw).await.expect("schema 22");
    let job = |key: &str, made: i64| {
        let (report, date) = key.split_once(':').expect("key");
        format!(
            "INSERT INTO jobs (key, report, local_date, state, origin, fire_at, window_start,
                 window_end, ready_at, created_at, updated_at)
             VALUES ('{key}', '{report}', '{date}', 'done', 'schedule', 0, 0, 0, 0, {made}, 0)"
        )
    };
    let delivery = |job: &str, dest: &str, made: i64| {
        format!(
            "INSERT INTO deliveries (key, job_key, kind, destination, state, ready_at,
                 attempts, created_at, updated_at)
             VALUES ('{job}/email:{dest}', '{job}', 'email', '{dest}', 'sent', 0, 1, {made}, 0)"
        )
    };
    let statements = [
        job("b:2026-10-24", 1),
        job("a:2026-10-25", 2),
        delivery("a:2026-10-25", "z@example.com", 3),
        delivery("a:2026-10-25", "y@example.com", 4),
        delivery("b:2026-10-24", "x@example.com", 5),
        "INSERT INTO delivery_attempts (delivery_key, attempt, requested_at, finished_at, class)
         VALUES ('a:2026-10-25/email:y@example.com', 1, 0, 0, 'accepted')"
            .to_string(),
    ];
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&raw)
            .await
            .expect("an old row");
    }
    raw.close().await;

    let ledger = dawnpost::Ledger::connect(&url, dir.path())
        .await
        .expect("open");
    let t = TestLedger::sqlite_of(ledger, dir);
    let jobs = job_numbers(&t).await;
    assert_eq!(jobs["b:2026-10-24"], Some(1), "made first: {jobs:?}");
    assert_eq!(jobs["a:2026-10-25"], Some(2), "{jobs:?}");
    let deliveries = delivery_numbers(&t).await;
    numbered_in_order(
        &deliveries,
        &[
            ("a:2026-10-25", &["z@example.com", "y@example.com"]),
            ("b:2026-10-24", &["x@example.com"]),
        ],
    );
    let attempts = attempt_numbers(&t).await;
    assert_eq!(
        attempts.iter().map(|a| (a.1, a.2)).collect::<Vec<_>>(),
        [(Some(2), Some(1))]
    );
    ready_jobs(&t, &["c:2026-10-25"]).await;
    assert_eq!(job_numbers(&t).await["c:2026-10-25"], Some(3));
    t.cleanup().await;
}
