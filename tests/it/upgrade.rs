//! A rolling deploy with the real previous release (`tests/upgrade/PREVIOUS`, built from the
//! git history by `tests/upgrade/build-previous.sh`) beside this binary on one PostgreSQL: a
//! read command of the new version changes nothing, `migrate --dry-run` then `migrate
//! --expand-only`, both versions drain with nothing lost and nothing sent twice, an old node
//! restarts mid-deploy, a rollback to the old binary alone finishes the new version's work, and
//! the contract migration refuses, then waits, while the old node is live.

use crate::common;
use common::text;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Project;
use common::daemon::Daemon;
use common::peers::{HttpRule, Receiver};

const REPORTS: usize = 10;
const HOOKS: usize = 2;

/// The previous release's binary, built once (minutes, the first time on a machine); `None`
/// when its commit is not in this clone's history (the script's exit code 3).
fn previous_binary() -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade/build-previous.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .expect("run build-previous.sh");
    if out.status.code() == Some(3) {
        common::skip(String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    assert!(
        out.status.success(),
        "building the previous release failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// One deploy: the project both versions run (one configuration, one artifact folder), the
/// schema they share, the receiver of every webhook.
struct Deploy {
    p: Project,
    previous: PathBuf,
    admin: sqlx::PgPool,
    schema: String,
    rx: Receiver,
}

impl Deploy {
    /// None when no PostgreSQL server is configured, or the previous release is not in the
    /// history.
    async fn new() -> Option<Deploy> {
        let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(20)));
        let rx = Receiver::start(rule).await;
        std::env::var(common::POSTGRES_ENV).ok()?;
        let previous = previous_binary()?;
        let (admin, schema, url) = common::empty_pg_schema("dp_upgrade").await?;
        let reports: String = (0..REPORTS)
            .map(|i| common::hooked_report(&format!("w{i}"), &rx.url(""), HOOKS, None))
            .collect();
        let p = Project::new(&reports);
        p.write(
            "config/dawnpost.toml",
            &format!(
                "[database]\nurl = \"{url}\"\n[server]\nbind = \"127.0.0.1:0\"\n\
                 [services]\nheartbeat_every = \"1s\"\n[retry]\nbase = \"100ms\"\ncap = \"1s\"\n"
            ),
        );
        Some(Deploy {
            p,
            previous,
            admin,
            schema,
            rx,
        })
    }

    fn command(&self, old: bool, args: &[&str]) -> Command {
        let binary = if old {
            self.previous.clone()
        } else {
            PathBuf::from(env!("CARGO_BIN_EXE_dawnpost"))
        };
        let mut c = Command::new(binary);
        c.arg("--config")
            .arg(self.p.config_dir())
            .args(args)
            .env_remove("DAWNPOST_DATABASE_URL")
            .env_remove("RUST_LOG");
        c
    }

    fn run(&self, old: bool, args: &[&str]) -> Output {
        self.command(old, args).output().expect("run dawnpost")
    }

    fn daemon(&self, old: bool) -> Daemon {
        Daemon::start(self.command(old, &["run"]))
    }

    /// The jobs of every report for January 1st of `year`.
    fn backfill(&self, old: bool, year: i32) {
        let (from, to) = (
            format!("{year}-01-01T00:00:00Z"),
            format!("{year}-01-02T00:00:00Z"),
        );
        let out = self.run(old, &["backfill", "--from", &from, "--to", &to]);
        assert!(out.status.success(), "backfill {year}: {}", text(&out));
    }

    /// The schema as the catalog describes it: every migration, table, view and column.
    async fn shape(&self) -> Vec<String> {
        let q = format!(
            "SELECT table_name || '.' || column_name || ' ' || data_type
             FROM information_schema.columns WHERE table_schema = $1
             UNION ALL
             SELECT 'migration ' || version::text FROM {}._sqlx_migrations
             ORDER BY 1",
            self.schema
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(q))
            .bind(&self.schema)
            .fetch_all(&self.admin)
            .await
            .expect("shape")
    }

    /// `nodes --json` once it lists `n` nodes (a node registers just after it starts).
    async fn live_nodes(&self, n: usize) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.run(false, &["nodes", "--json"]);
            let listed = String::from_utf8_lossy(&out.stdout).to_string();
            if listed.lines().count() == n {
                return listed;
            }
            assert!(
                Instant::now() < until,
                "not {n} live nodes: {listed}{}",
                text(&out)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn applied(&self) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT MAX(version) FROM {}._sqlx_migrations",
            self.schema
        )))
        .fetch_one(&self.admin)
        .await
        .expect("applied")
    }

    async fn has_view(&self, name: &str) -> bool {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT to_regclass('{}.{name}') IS NOT NULL",
            self.schema
        )))
        .fetch_one(&self.admin)
        .await
        .expect("regclass")
    }

    /// What the numbers (migration 23) say of the work since the expand migration, the
    /// deliveries and attempts of either version: (deliveries whose job number is not their
    /// job's or who have no ordinal, attempts whose pair is not their delivery's, pairs held
    /// twice, attempts looked at).
    async fn numbered_since_the_expand(&self) -> (i64, i64, i64, i64) {
        let s = &self.schema;
        let q = format!(
            "SELECT
               (SELECT COUNT(*) FROM {s}.deliveries d JOIN {s}.jobs j ON j.key = d.job_key
                 WHERE j.local_date >= '2021-01-01'
                   AND (d.job_number IS DISTINCT FROM j.number OR j.number IS NULL
                        OR d.ordinal IS NULL)),
               (SELECT COUNT(*) FROM {s}.delivery_attempts a
                  JOIN {s}.deliveries d ON d.key = a.delivery_key
                  JOIN {s}.jobs j ON j.key = d.job_key
                 WHERE j.local_date >= '2021-01-01'
                   AND (a.job_number, a.ordinal) IS DISTINCT FROM (d.job_number, d.ordinal)),
               (SELECT COUNT(*) FROM (SELECT 1 FROM {s}.deliveries WHERE job_number IS NOT NULL
                  GROUP BY job_number, ordinal HAVING COUNT(*) > 1) twice),
               (SELECT COUNT(*) FROM {s}.delivery_attempts a
                  JOIN {s}.deliveries d ON d.key = a.delivery_key
                  JOIN {s}.jobs j ON j.key = d.job_key WHERE j.local_date >= '2021-01-01')"
        );
        sqlx::query_as(sqlx::AssertSqlSafe(q))
            .fetch_one(&self.admin)
            .await
            .expect("numbers")
    }

    /// Waits until the receiver has `years × REPORTS × HOOKS` distinct deliveries and every job
    /// is done; then checks that none arrived twice.
    async fn drained(&self, years: usize, what: &str) {
        let n = years * REPORTS * HOOKS;
        assert!(
            self.rx.keys_reached(n, 1, Duration::from_secs(120)).await,
            "{what}: {} of {n} deliveries arrived",
            self.rx.delivered().len()
        );
        let q = format!(
            "SELECT COUNT(*) FROM {}.jobs WHERE state <> 'done'",
            self.schema
        );
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let open: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(q.clone()))
                .fetch_one(&self.admin)
                .await
                .expect("count");
            if open == 0 {
                break;
            }
            assert!(Instant::now() < until, "{what}: {open} jobs never finished");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let arrivals = self.rx.arrivals();
        assert_eq!(arrivals.len(), n, "{what}: lost or extra deliveries");
        let twice: Vec<_> = arrivals.iter().filter(|(_, c)| **c > 1).collect();
        assert!(twice.is_empty(), "{what}: sent twice: {twice:?}");
    }

    async fn drop(self) {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.schema
        )))
        .execute(&self.admin)
        .await;
    }
}

/// Before the deploy: the previous release's schema, node and night's work; then the new
/// version's read command and dry run, which change nothing. The old node and its schema.
async fn the_fleet_before_the_deploy(d: &Deploy) -> (Daemon, i64) {
    let out = d.run(true, &["migrate"]);
    assert!(out.status.success(), "old migrate: {}", text(&out));
    let old_schema = d.applied().await;
    let old = d.daemon(true);
    d.backfill(true, 2020);
    d.drained(1, "the previous release alone").await;

    // A read command of the new version changes nothing: it says what to run.
    let before = d.shape().await;
    let jobs = d.run(false, &["jobs", "--limit", "1"]);
    let said = text(&jobs);
    assert!(!jobs.status.success(), "{said}");
    assert!(said.contains("run `dawnpost migrate`"), "{said}");
    let dry = d.run(false, &["migrate", "--dry-run"]);
    let said = text(&dry);
    assert!(dry.status.success(), "{said}");
    assert!(
        said.contains("(expand)") && said.contains("(contract)"),
        "{said}"
    );
    assert!(
        said.contains("would wait") && said.contains("live nodes"),
        "{said}"
    );
    assert_eq!(
        d.shape().await,
        before,
        "a read command or a dry run changed the schema"
    );
    (old, old_schema)
}

/// The expand migrations while the old node works on; then both versions on one ledger, the
/// old node restarted mid-deploy on the expanded schema. The new node and the restarted old one.
async fn two_versions_side_by_side(d: &Deploy, old: Daemon, old_schema: i64) -> (Daemon, Daemon) {
    let expand = d.run(false, &["migrate", "--expand-only"]);
    let said = text(&expand);
    assert!(expand.status.success(), "{said}");
    assert!(said.contains("still pending"), "{said}");
    assert!(d.applied().await > old_schema);

    let new = d.daemon(false);
    d.backfill(false, 2021);
    let (code, log) = old.stop();
    assert_eq!(code, Some(0), "the old node stops cleanly: {log}");
    let old = d.daemon(true);
    let listed = d.live_nodes(2).await;
    assert!(
        listed.contains(&format!("\"schema_version\":{old_schema}")),
        "{listed}"
    );
    let binaries: std::collections::BTreeSet<&str> = listed
        .lines()
        .filter_map(|l| l.split("\"binary\":\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(binaries.len(), 2, "two versions: {listed}");
    assert!(binaries.contains(env!("CARGO_PKG_VERSION")), "{listed}");
    d.drained(2, "two versions side by side").await;
    (new, old)
}

/// `migrate --wait 60s` while `old` is live: it says it waits, `old` stops, the contract
/// migration runs.
fn the_contract_migration_waits_for(d: &Deploy, old: Daemon) {
    let mut waiting = d
        .command(false, &["migrate", "--wait", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("migrate --wait");
    let stdout = waiting.stdout.take().expect("stdout");
    let (said_tx, said_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if line.starts_with("waiting") {
                let _ = said_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    assert!(
        said_rx.recv_timeout(Duration::from_secs(30)).is_ok(),
        "migrate --wait never said what it waits for"
    );
    let (code, log) = old.stop();
    assert_eq!(code, Some(0), "{log}");
    let done = waiting.wait_with_output().expect("migrate --wait");
    let said = reader.join().unwrap_or_default();
    assert!(done.status.success(), "{said}{}", text(&done));
    assert!(said.contains("applied: 13"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_beside_the_previous_release_loses_nothing_and_sends_nothing_twice() {
    let Some(d) = Deploy::new().await else {
        common::skip(&format!(
            "{} is not set, or no previous release",
            common::POSTGRES_ENV
        ));
        return;
    };
    let (old, old_schema) = the_fleet_before_the_deploy(&d).await;
    let (new, old) = two_versions_side_by_side(&d, old, old_schema).await;

    // The contract migration refuses while the old node is live, naming it.
    let contract = d.run(false, &["migrate"]);
    let said = text(&contract);
    assert!(!contract.status.success(), "{said}");
    assert!(
        said.contains("contract migration") && said.contains(&format!(":{}", old.pid())),
        "{said}"
    );
    assert!(d.has_view("redrives").await, "nothing contracted");

    // A rollback: the new node goes, the old binary alone finishes the new version's work.
    let (code, log) = new.stop();
    assert_eq!(code, Some(0), "{log}");
    d.backfill(false, 2022);
    d.drained(3, "the rollback").await;
    // The old binary's deliveries and attempts since the expand migration are numbered as the
    // new one numbers its own (the migration's triggers).
    let (wrong, attempts_wrong, twice, attempts) = d.numbered_since_the_expand().await;
    assert_eq!((wrong, attempts_wrong, twice), (0, 0, 0), "numbered");
    let two_nights = i64::try_from(REPORTS * HOOKS * 2).unwrap_or(i64::MAX);
    assert!(attempts >= two_nights, "{attempts} attempts");
    let show = d.run(true, &["show", "w0:2022-01-01"]);
    assert!(show.status.success(), "old show: {}", text(&show));

    the_contract_migration_waits_for(&d, old);
    assert!(!d.has_view("redrives").await, "the contract migration ran");

    // The old binary now refuses the contracted ledger; the new one runs on it.
    let refused = d.run(true, &["jobs", "--limit", "1"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("newer"), "{}", text(&refused));
    let _new = d.daemon(false);
    d.backfill(false, 2023);
    d.drained(4, "the new version alone, contracted").await;
    d.drop().await;
}
