//! Migrations as a deploy step on PostgreSQL: no command migrates by itself, `migrate
//! --dry-run` lists what is pending (each expand or contract) and changes nothing, `migrate`
//! applies it, and a binary runs on a schema a newer version extended (expand) but not on one
//! it contracted. The real binary, a real server, one fresh schema per test.

use crate::common;

use common::{Project, TestLedger, report, run_in};

/// An empty schema of its own on the test server, and the URL whose connections use it.
async fn empty_schema() -> Option<(sqlx::PgPool, String, String)> {
    let base = std::env::var(common::POSTGRES_ENV).ok()?;
    let schema = format!("dp_migrate_{}", common::unique_suffix());
    let admin = sqlx::PgPool::connect(&base).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .expect("create schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    Some((admin, schema, url))
}

fn project(url: &str, migrate: Option<&str>) -> Project {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let mode = migrate.map_or(String::new(), |m| format!("migrate = \"{m}\"\n"));
    p.write(
        "config/dawnpost.toml",
        &format!("[database]\nurl = \"{url}\"\n{mode}"),
    );
    p
}

/// Whether `schema` has a `jobs` table.
async fn has_jobs(admin: &sqlx::PgPool, schema: &str) -> bool {
    let (exists,): (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT to_regclass('{schema}.jobs') IS NOT NULL"
    )))
    .fetch_one(admin)
    .await
    .expect("query");
    exists
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn drop_schema(admin: &sqlx::PgPool, schema: &str) {
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(admin)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_migrates_by_itself_and_migrate_is_the_deploy_step() {
    let Some((admin, schema, url)) = empty_schema().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let p = project(&url, None);
    let jobs = run_in(p.root(), &["jobs", "--limit", "1"]);
    assert!(!jobs.status.success(), "{}", text(&jobs));
    let said = text(&jobs);
    assert!(
        said.contains("at version 0") && said.contains("run `dawnpost migrate`"),
        "{said}"
    );
    assert!(!has_jobs(&admin, &schema).await, "a read command migrated");

    let dry = run_in(p.root(), &["migrate", "--dry-run"]);
    let said = text(&dry);
    assert!(dry.status.success(), "{said}");
    assert!(said.contains("pending: 1 ledger (expand)"), "{said}");
    assert!(said.contains("migration(s) pending"), "{said}");
    assert!(!has_jobs(&admin, &schema).await, "a dry run migrated");

    let done = run_in(p.root(), &["migrate"]);
    let said = text(&done);
    assert!(done.status.success(), "{said}");
    assert!(said.contains("migration(s) applied"), "{said}");
    assert!(has_jobs(&admin, &schema).await);
    let again = run_in(p.root(), &["migrate"]);
    assert!(text(&again).contains("up to date"), "{}", text(&again));
    let jobs = run_in(p.root(), &["jobs", "--limit", "1"]);
    assert!(jobs.status.success(), "{}", text(&jobs));
    drop_schema(&admin, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_migrates_on_open_as_before() {
    let Some((admin, schema, url)) = empty_schema().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let p = project(&url, Some("auto"));
    let jobs = run_in(p.root(), &["jobs", "--limit", "1"]);
    assert!(jobs.status.success(), "{}", text(&jobs));
    assert!(has_jobs(&admin, &schema).await);
    let bad = project(&url, Some("sometimes"));
    let check = run_in(bad.root(), &["check"]);
    let said = text(&check);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("database.migrate") && said.contains("\"auto\" or \"manual\""),
        "{said}"
    );
    drop_schema(&admin, &schema).await;
}

/// A newer version's migrations, recorded as sqlx records them.
async fn record_newer(t: &TestLedger, version: i64, description: &str) {
    let base = std::env::var(common::POSTGRES_ENV).expect("url");
    let admin = sqlx::PgPool::connect(&base).await.expect("connect");
    let schema = t.schema().expect("schema");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {schema}._sqlx_migrations
             (version, description, success, checksum, execution_time)
         VALUES ($1, $2, TRUE, '\\x00', 1)"
    )))
    .bind(version)
    .bind(description)
    .execute(&admin)
    .await
    .expect("record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_a_newer_version_expanded_runs_one_it_contracted_does_not() {
    let Some(t) = TestLedger::postgres().await else {
        eprintln!("skipped: {} is not set", common::POSTGRES_ENV);
        return;
    };
    let base = std::env::var(common::POSTGRES_ENV).expect("url");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!(
        "{base}{sep}options=-c%20search_path%3D{}",
        t.schema().expect("schema")
    );
    let p = project(&url, None);
    record_newer(&t, 9001, "expand a table of the next version").await;
    let jobs = run_in(p.root(), &["jobs", "--limit", "1"]);
    assert!(jobs.status.success(), "{}", text(&jobs));
    let dry = run_in(p.root(), &["migrate", "--dry-run"]);
    let said = text(&dry);
    assert!(
        said.contains(
            "applied by a newer version: 9001 expand a table of the next version (expand)"
        ),
        "{said}"
    );
    assert!(said.contains("up to date"), "{said}");

    record_newer(&t, 9002, "contract drop what this version reads").await;
    for args in [&["jobs", "--limit", "1"][..], &["migrate"][..]] {
        let out = run_in(p.root(), args);
        let said = text(&out);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("9002")
                && said.contains("contract migration")
                && said.contains("newer binary"),
            "{args:?}: {said}"
        );
    }
    t.cleanup().await;
}
