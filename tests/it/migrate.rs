//! Migrations as a deploy step on PostgreSQL: no command migrates by itself, `migrate
//! --dry-run` lists what is pending (each expand or contract) and changes nothing, `migrate`
//! applies it, and a binary runs on a schema a newer version extended (expand) but not on one
//! it contracted. The real binary, a real server, one fresh schema per test.

use crate::common;
use common::text;

use common::{Project, TestLedger, report, run_in};

async fn empty_schema() -> Option<(sqlx::PgPool, String, String)> {
    common::empty_pg_schema("dp_migrate").await
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

async fn drop_schema(admin: &sqlx::PgPool, schema: &str) {
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(admin)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_migrates_by_itself_and_migrate_is_the_deploy_step() {
    let Some((admin, schema, url)) = empty_schema().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
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
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
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
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
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

/// A connection of the test's own to the ledger, for what an older version's SQL does.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    /// Runs `sql` with `$1` = `job`.
    async fn execute(&self, sql: &'static str, job: &str) -> Result<(), sqlx::Error> {
        match self {
            Raw::Sqlite(p) => sqlx::query(sql).bind(job).execute(p).await.map(|_| ()),
            Raw::Postgres(p) => sqlx::query(sql).bind(job).execute(p).await.map(|_| ()),
        }
    }

    async fn count(&self, sql: &'static str, job: &str) -> i64 {
        match self {
            Raw::Sqlite(p) => sqlx::query_scalar(sql).bind(job).fetch_one(p).await,
            Raw::Postgres(p) => sqlx::query_scalar(sql).bind(job).fetch_one(p).await,
        }
        .expect("count")
    }
}

/// An older version's audit writes, as it makes them: through the name `redrives`.
async fn write_the_old_way(raw: &Raw, job: &str) {
    let insert = "INSERT INTO redrives (job_key, delivery_key, redriven_by, reason, at, action, via)
                  VALUES ($1, NULL, 'old-node', 'rerun after the fix', 1764547200000, 'cancel', 'cli')";
    raw.execute(insert, job).await.expect("insert");
    let n = raw
        .count("SELECT COUNT(*) FROM redrives WHERE job_key = $1", job)
        .await;
    assert_eq!(n, 1, "the old name reads what it wrote");
}

async fn delete_the_old_way(raw: &Raw, job: &str) {
    let delete = "DELETE FROM redrives WHERE job_key = $1";
    raw.execute(delete, job).await.expect("delete");
}

/// Between the expand migration that renamed the audit table and the contract one that drops
/// the old name, an older version's audit rows (written, read and deleted as `redrives`) are
/// the new version's (`audit`); the contract migration then removes the old name.
async fn the_audit_table_keeps_its_old_name_until_the_contract_migration(url: &str, raw: Raw) {
    use dawnpost::ledger::Opening;
    let dir = tempfile::tempdir().expect("tempdir");
    let l = dawnpost::Ledger::open(url, dir.path(), 4, Opening::AsIs)
        .await
        .expect("open");
    let now = common::at(2026, 12, 1, 6, 0);
    let expand = l
        .schema()
        .migrate(now, now, true)
        .await
        .expect("expand only");
    assert!(expand.blocked.is_none());
    let pending = l.schema().fit().await.expect("fit").pending;
    let waiting: Vec<(i64, &str)> = pending
        .iter()
        .map(|m| (m.version, m.kind.as_str()))
        .collect();
    assert_eq!(
        waiting,
        [(13, "contract"), (21, "contract"), (24, "contract")],
        "only the contract migrations wait (the audit name's, the delivery state indexes', the \
         deliveries' text keys)"
    );
    let job = common::fixtures::new_job("warehouse-17", "2026-11-30", now);
    l.jobs().insert_many(&[job], now).await.expect("insert");
    write_the_old_way(&raw, "warehouse-17:2026-11-30").await;
    let audit = l
        .deliveries()
        .redrives(&common::jk("warehouse-17:2026-11-30"))
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].by.as_str(), audit[0].action.as_str()),
        ("old-node", "cancel")
    );
    delete_the_old_way(&raw, "warehouse-17:2026-11-30").await;
    assert!(
        l.deliveries()
            .redrives(&common::jk("warehouse-17:2026-11-30"))
            .await
            .expect("audit")
            .is_empty(),
        "deleted through the old name"
    );
    let contract = l.schema().migrate(now, now, false).await.expect("contract");
    assert_eq!(contract.applied.len(), 3);
    assert!(l.schema().fit().await.expect("fit").pending.is_empty());
    let old_name = raw
        .execute("SELECT * FROM redrives WHERE job_key = $1", "w")
        .await
        .is_ok();
    assert!(!old_name, "the contract migration dropped the old name");
    l.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_audit_name_lasts_until_the_contract_migration_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ledger.db");
    let url = format!("sqlite://{}", path.display());
    let l = dawnpost::Ledger::open(&url, dir.path(), 4, dawnpost::ledger::Opening::AsIs)
        .await
        .expect("create");
    l.close().await;
    let raw = sqlx::SqlitePool::connect(&url).await.expect("raw");
    the_audit_table_keeps_its_old_name_until_the_contract_migration(&url, Raw::Sqlite(raw)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_audit_name_lasts_until_the_contract_migration_on_postgres() {
    let Some((admin, schema, url)) = empty_schema().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let raw = sqlx::PgPool::connect(&url).await.expect("raw");
    the_audit_table_keeps_its_old_name_until_the_contract_migration(&url, Raw::Postgres(raw)).await;
    drop_schema(&admin, &schema).await;
}
