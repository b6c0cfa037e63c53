//! Shared test helpers: config directories in temp folders, and ledgers on both backends.

pub mod browser;
pub mod chat_peers;
pub mod checkers;
pub mod console;
pub mod daemon;
pub mod fixtures;
#[cfg(feature = "s3")]
pub mod moto;
pub mod ops_server;
pub mod peers;
pub mod python;
pub mod world;

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use dawnpost::{Config, Ledger};
use tempfile::TempDir;

pub const POSTGRES_ENV: &str = "DAWNPOST_TEST_POSTGRES_URL";

/// A test that cannot run here, for `why` (a service or tool it needs is missing). Under CI
/// (`CI` set) that is a failure; elsewhere the test says it skipped, and the line is added to
/// the file `DAWNPOST_TEST_SKIPS` names, when set, so a run can count its skips.
pub fn skip(why: &str) {
    if let Some(path) = std::env::var_os("DAWNPOST_TEST_SKIPS") {
        use std::io::Write as _;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(
                f,
                "{}: {why}",
                std::thread::current().name().unwrap_or("a test")
            );
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must provide what this test needs: {why}"
    );
    eprintln!("skipped: {why}");
}

/// The binary run in the project folder `dir` (its default `config/`), with no database URL,
/// configuration directory or log filter inherited from the environment.
pub fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .current_dir(dir)
        .args(args)
        .env_remove("DAWNPOST_DATABASE_URL")
        .env_remove("DAWNPOST_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .expect("run dawnpost")
}

/// What a command printed: its stdout, then its stderr.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `dawnpost preview REPORT` for 2026-11-30 into the project's `preview/` folder: the HTML
/// file's path.
pub fn previewed(dir: &Path, report: &str) -> PathBuf {
    let out = run_in(
        dir,
        &[
            "preview",
            report,
            "--date",
            "2026-11-30",
            "--out",
            "preview",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.ends_with(".html"))
        .expect("an .html path")
        .to_string();
    dir.join(html)
}

/// A copy of the shipped config/, templates/ and sample data.
pub fn shipped_copy() -> tempfile::TempDir {
    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read dir") {
            let p = entry.expect("entry").path();
            let target = to.join(p.file_name().expect("name"));
            if p.is_dir() {
                copy_dir(&p, &target);
            } else {
                std::fs::copy(&p, &target).expect("copy");
            }
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&shipped.join("config"), &dir.path().join("config"));
    copy_dir(&shipped.join("templates"), &dir.path().join("templates"));
    dir
}

/// A project root in a temp folder: `config/`, `templates/` (the shipped ones) and sample data.
pub struct Project {
    pub dir: TempDir,
}

impl Project {
    /// A project with the shipped templates and sample data, and the given reports.toml.
    pub fn new(reports_toml: &str) -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::create_dir_all(root.join("config/sample")).expect("mkdir");
        std::fs::create_dir_all(root.join("templates")).expect("mkdir");
        for entry in std::fs::read_dir(shipped.join("templates")).expect("templates") {
            let p = entry.expect("entry").path();
            if p.is_file() {
                std::fs::copy(
                    &p,
                    root.join("templates").join(p.file_name().expect("name")),
                )
                .expect("copy");
            }
        }
        for entry in std::fs::read_dir(shipped.join("config/sample")).expect("samples") {
            let p = entry.expect("entry").path();
            std::fs::copy(
                &p,
                root.join("config/sample")
                    .join(p.file_name().expect("name")),
            )
            .expect("copy");
        }
        std::fs::write(root.join("config/dawnpost.toml"), "").expect("write");
        std::fs::write(root.join("config/reports.toml"), reports_toml).expect("write");
        Project { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, text).expect("write");
    }

    /// Writes `rel`: the shipped sample's data with `n` copies of its first row as its rows.
    pub fn write_sample_rows(&self, rel: &str, n: usize) {
        let sample = std::fs::read_to_string(self.root().join("config/sample/warehouse-17.json"))
            .expect("sample");
        let mut data: serde_json::Value = serde_json::from_str(&sample).expect("json");
        let row = data["rows"][0].clone();
        data["rows"] = serde_json::Value::Array(vec![row; n]);
        self.write(rel, &data.to_string());
    }

    pub fn load(&self) -> Config {
        match Config::load(&self.config_dir(), &dawnpost::delivery::readers()) {
            Ok(c) => c,
            Err(e) => panic!("config should load: {e}"),
        }
    }
}

/// `run --once` for a local date `YYYY-MM-DD` on the system clock, waiting up to `max_wait`.
pub async fn run_date(
    config: &Config,
    ledger: &Ledger,
    date: &str,
    max_wait: std::time::Duration,
) -> dawnpost::node::runner::RunOnceSummary {
    let (clock, cancel) = (
        std::sync::Arc::new(dawnpost::SystemClock),
        Default::default(),
    );
    run_date_on(config, ledger, date, max_wait, clock, cancel)
        .await
        .expect("run once")
}

/// [`run_date`] on `clock`, until `cancel`.
pub async fn run_date_on(
    config: &Config,
    ledger: &Ledger,
    date: &str,
    max_wait: std::time::Duration,
    clock: dawnpost::SharedClock,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<dawnpost::node::runner::RunOnceSummary, dawnpost::node::runner::RunError> {
    let opts = dawnpost::node::runner::RunOnceOptions {
        date: Some(chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date")),
        max_wait,
        progress: false,
        metrics: None,
    };
    dawnpost::node::runner::run_once(config, ledger.clone(), clock, &opts, cancel).await
}

/// A report block for reports.toml with the shipped template and sample data.
pub fn report(id: &str, schedule: &str, tz: &str) -> String {
    format!(
        r#"
[[report]]
id = "{id}"
title = "Report {id}"
schedule = "{schedule}"
timezone = "{tz}"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
email = ["ops@example.com"]
"#
    )
}

/// A job key from its text.
/// `reports.toml` with one report `id` that fires on January 1st only (so a backfill makes its
/// jobs and the tick adds none), from the sample file, with `hooks` webhooks `h0`, `h1`, … of
/// the receiver at `base` (`Receiver::url("")`), signed with the key in `secret_env` if given.
pub fn hooked_report(id: &str, base: &str, hooks: usize, secret_env: Option<&str>) -> String {
    let mut toml = format!(
        "[[report]]\nid = \"{id}\"\ntitle = \"Report {id}\"\nschedule = \"0 30 6 1 1 *\"\ntimezone = \"UTC\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }}\n"
    );
    for h in 0..hooks {
        toml.push_str(&format!("[[report.webhook]]\nurl = \"{base}h{h}\"\n"));
        if let Some(env) = secret_env {
            toml.push_str(&format!("secret_env = \"{env}\"\n"));
        }
    }
    toml
}

pub fn jk(s: &str) -> dawnpost::domain::keys::JobKey {
    s.parse().expect("job key")
}

/// A delivery key from its text.
pub fn dk(s: &str) -> dawnpost::domain::keys::DeliveryKey {
    s.parse().expect("delivery key")
}

pub fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("rfc3339")
        .with_timezone(&Utc)
}

pub fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .expect("valid instant")
}

/// A ledger for one test, isolated: its own SQLite file, or its own PostgreSQL schema.
pub struct TestLedger {
    pub ledger: Ledger,
    schema: Option<String>,
    _dir: Option<TempDir>,
}

impl TestLedger {
    pub async fn sqlite() -> TestLedger {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
        let ledger = Ledger::connect(&url, dir.path())
            .await
            .expect("sqlite ledger");
        TestLedger {
            ledger,
            schema: None,
            _dir: Some(dir),
        }
    }

    /// A SQLite ledger the test opened itself, in `dir`.
    pub fn sqlite_of(ledger: Ledger, dir: TempDir) -> TestLedger {
        TestLedger {
            ledger,
            schema: None,
            _dir: Some(dir),
        }
    }

    /// None when `DAWNPOST_TEST_POSTGRES_URL` is unset.
    pub async fn postgres() -> Option<TestLedger> {
        let url = std::env::var(POSTGRES_ENV).ok()?;
        Self::postgres_at(&url).await
    }

    async fn postgres_at(url: &str) -> Option<TestLedger> {
        let url = url.to_string();
        let schema = format!("dp_test_{}", unique_suffix());
        let ledger = Ledger::connect_postgres_schema(&url, &schema)
            .await
            .unwrap_or_else(|e| panic!("{POSTGRES_ENV} is set but PostgreSQL is unusable: {e}"));
        Some(TestLedger {
            ledger,
            schema: Some(schema),
            _dir: None,
        })
    }

    /// A second handle on the same ledger, as another process would have.
    pub async fn reopen(&self) -> Ledger {
        match (&self.schema, &self._dir) {
            (Some(schema), _) => {
                let url = std::env::var(POSTGRES_ENV).expect("postgres url");
                Ledger::connect_postgres_schema(&url, schema)
                    .await
                    .expect("reopen")
            }
            (None, Some(dir)) => {
                let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
                Ledger::connect(&url, dir.path()).await.expect("reopen")
            }
            _ => unreachable!("a test ledger is sqlite or postgres"),
        }
    }

    /// The SQLite file of this ledger (None on PostgreSQL).
    pub fn sqlite_path(&self) -> Option<PathBuf> {
        match (&self.schema, &self._dir) {
            (None, Some(dir)) => Some(dir.path().join("ledger.db")),
            _ => None,
        }
    }

    /// The URL another process (the binary) opens this ledger by.
    pub fn url(&self) -> String {
        match (&self.schema, &self._dir) {
            (Some(schema), _) => {
                let base = std::env::var(POSTGRES_ENV).expect("postgres url");
                let sep = if base.contains('?') { '&' } else { '?' };
                format!("{base}{sep}options=-c%20search_path%3D{schema}")
            }
            (None, Some(dir)) => format!("sqlite://{}", dir.path().join("ledger.db").display()),
            _ => unreachable!("a test ledger is sqlite or postgres"),
        }
    }

    /// The PostgreSQL schema of this ledger (None on SQLite).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// Runs the statement `sql` makes of the tables' prefix (`""` on SQLite, `"<schema>."` on
    /// PostgreSQL) on a connection of its own, behind the ledger's back: what another binary
    /// (an older or a newer version) writes.
    pub async fn behind_the_back(&self, sql: impl FnOnce(&str) -> String) {
        match (&self.schema, self.sqlite_path()) {
            (Some(schema), _) => {
                let url = std::env::var(POSTGRES_ENV).expect("postgres url");
                let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
                let sql = sql(&format!("{schema}."));
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&pool)
                    .await
                    .expect("behind the ledger's back");
                pool.close().await;
            }
            (None, Some(path)) => {
                let url = format!("sqlite://{}", path.display());
                let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
                sqlx::query(sqlx::AssertSqlSafe(sql("")))
                    .execute(&pool)
                    .await
                    .expect("behind the ledger's back");
                pool.close().await;
            }
            _ => unreachable!("a test ledger is sqlite or postgres"),
        }
    }

    /// The rows of the query `sql` makes of the tables' prefix (as [`behind_the_back`]), read
    /// on a connection of its own: what the ledger's API does not show.
    ///
    /// [`behind_the_back`]: TestLedger::behind_the_back
    pub async fn rows<T>(&self, sql: impl FnOnce(&str) -> String) -> Vec<T>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + Send
            + Unpin,
    {
        match (&self.schema, self.sqlite_path()) {
            (Some(schema), _) => {
                let url = std::env::var(POSTGRES_ENV).expect("postgres url");
                let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
                let sql = sql(&format!("{schema}."));
                let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&pool)
                    .await
                    .expect("read behind the ledger's back");
                pool.close().await;
                rows
            }
            (None, Some(path)) => {
                let url = format!("sqlite://{}", path.display());
                let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
                let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql("")))
                    .fetch_all(&pool)
                    .await
                    .expect("read behind the ledger's back");
                pool.close().await;
                rows
            }
            _ => unreachable!("a test ledger is sqlite or postgres"),
        }
    }

    pub async fn cleanup(self) {
        if let Some(schema) = &self.schema {
            let _ = self.ledger.drop_postgres_schema(schema).await;
        }
        self.ledger.close().await;
    }
}

/// An empty schema `PREFIX_…` of its own on the test server (None when no server is
/// configured): an admin pool, the schema's name, and the URL whose connections use it.
pub async fn empty_pg_schema(prefix: &str) -> Option<(sqlx::PgPool, String, String)> {
    let base = std::env::var(POSTGRES_ENV).ok()?;
    let schema = format!("{prefix}_{}", unique_suffix());
    let admin = sqlx::PgPool::connect(&base).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .expect("create schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    Some((admin, schema, url))
}

pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs one store test against SQLite, and against PostgreSQL when it is configured.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let t = $crate::common::TestLedger::sqlite().await;
                    super::$name(&t).await;
                    t.cleanup().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(t) = $crate::common::TestLedger::postgres().await else {
                        $crate::common::skip(&format!("{} is not set", $crate::common::POSTGRES_ENV));
                        return;
                    };
                    super::$name(&t).await;
                    t.cleanup().await;
                }
            )*
        }
    };
}
