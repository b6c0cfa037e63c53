//! "Retention deletes only terminal work, and exactly what is due", over random ledgers, random
//! policies and random interleavings of redrives, cancels, rescues and sweeps at random instants
//! — some sweeps racing a redrive — on SQLite, and on PostgreSQL when it is configured.
//!
//! Its own main (`harness = false`), so the number of cases is an argument:
//! `cargo test --test retention_property -- --cases 10000` (default 1,000 per backend, or
//! `DAWNPOST_PROPTEST_CASES`).

#[path = "it/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::process::ExitCode;

use chrono::{DateTime, Duration, Utc};
use common::TestLedger;
use common::world::*;
use dawnpost::domain::keys::{DeliveryKey, JobKey};
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{DeliveryState, JobState, Ledger, RescueBudget};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// One step of a random history.
#[derive(Debug, Clone, Copy)]
enum Op {
    Sweep,
    /// A sweep and a redrive of job `i` at the same instant, concurrently.
    SweepRacingRedrive(usize),
    Redrive(usize),
    RedriveDelivery(usize),
    Cancel(usize),
    Rescue,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Sweep),
        2 => (0usize..10).prop_map(Op::SweepRacingRedrive),
        2 => (0usize..10).prop_map(Op::Redrive),
        2 => (0usize..10).prop_map(Op::RedriveDelivery),
        1 => (0usize..10).prop_map(Op::Cancel),
        1 => Just(Op::Rescue),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    specs: Vec<Spec>,
    policy: (i64, i64, i64, Option<(i64, i64)>),
    /// Steps at instants (hours after t0), run in time order.
    ops: Vec<(i64, Op)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(spec(), 1..10),
        (1i64..20, 1i64..20, 0i64..10),
        proptest::option::of((1i64..40, 1i64..45)),
        proptest::collection::vec((0i64..(80 * 24), op()), 1..12),
    )
        .prop_map(|(specs, (a, d, extra), over, mut ops)| {
            ops.sort_by_key(|(h, _)| *h);
            Case {
                specs,
                policy: (a, d, extra, over),
                ops,
            }
        })
}

/// What the sweep's verdict depends on, read before it runs.
#[derive(Debug, Clone)]
struct Before {
    print: Footprint,
    terminal_at: Option<DateTime<Utc>>,
    in_flight: bool,
}

async fn before(l: &Ledger, world: &World, key: &JobKey) -> Before {
    let job = l.jobs().get(key).await.expect("get");
    let in_flight = l
        .deliveries()
        .list(key)
        .await
        .expect("deliveries")
        .iter()
        .any(|d| matches!(d.state, DeliveryState::Pending | DeliveryState::Sending));
    Before {
        print: footprint(l, &world.store, key).await,
        terminal_at: job.and_then(|j| j.terminal_at),
        in_flight,
    }
}

/// A sweep at `now` does exactly what the policy says to every job, and nothing to live work.
async fn sweep_exactly(
    l: &Ledger,
    world: &World,
    keys: &[JobKey],
    specs: &[Spec],
    now: DateTime<Utc>,
) {
    let mut was = Vec::new();
    for k in keys {
        was.push(before(l, world, k).await);
    }
    let sweeper = world.sweeper(l, now);
    sweeper.run_once().await.expect("sweep");
    let policy = sweeper.policy();
    for ((k, s), b) in keys.iter().zip(specs).zip(&was) {
        let after = footprint(l, &world.store, k).await;
        let terminal = b.print.state.is_some_and(|st| st.is_terminal()) && !b.in_flight;
        let Some(terminal_at) = b.terminal_at.filter(|_| terminal) else {
            assert_eq!(
                after, b.print,
                "{k} ({:?}) is live: untouched",
                b.print.state
            );
            continue;
        };
        let th = policy.for_report(&s.report);
        let age = now - terminal_at;
        let ledger_due = age > th.ledger.as_chrono();
        let artifact_due = age > th.artifact.as_chrono() || ledger_due;
        let diagnostics_due = age > th.diagnostics.as_chrono();
        assert_eq!(after.row, !ledger_due, "{k}: the row goes exactly when due");
        if b.print.objects > 0 {
            assert_eq!(
                after.objects == 0,
                artifact_due,
                "{k}: objects go exactly when due"
            );
        }
        if !after.row {
            assert_eq!(
                after.objects, 0,
                "{k}: no row deleted while its artifact exists"
            );
        } else {
            assert_eq!(
                after.diagnostics == 0,
                diagnostics_due || b.print.diagnostics == 0,
                "{k}: diagnostics"
            );
            assert_eq!(after.state, b.print.state);
        }
    }
}

/// Whatever raced, live work keeps what it needs: a delivering job has its artifact objects,
/// and a redrive that succeeded left its job and its audit row.
async fn live_work_is_whole(l: &Ledger, world: &World, keys: &[JobKey]) {
    for k in keys {
        let Some(job) = l.jobs().get(k).await.expect("get") else {
            continue;
        };
        if job.state == JobState::Delivering {
            let (report, date) = (k.report().as_str(), k.date().to_string());
            assert!(
                job.artifact_deleted_at.is_none()
                    && world.store.count(report, &date).await.expect("count") > 0,
                "{k}: delivering without its artifact"
            );
        }
    }
}

async fn run_case(t: &TestLedger, c: Case) {
    let (a, d, extra, over) = c.policy;
    let over = over.map(|(oa, ol)| (oa, ol.max(oa).max(d)));
    let world = World::new(&policy_text(a, d, a.max(d) + extra, over));
    let l = &t.ledger;
    let mut keys = Vec::new();
    for (i, s) in c.specs.iter().enumerate() {
        keys.push(build(l, &world.store, i, s).await);
    }
    let pick = |i: usize| keys[i % keys.len()].clone();
    for (h, op) in &c.ops {
        let now = t0() + Duration::hours(*h);
        match *op {
            Op::Sweep => sweep_exactly(l, &world, &keys, &c.specs, now).await,
            Op::SweepRacingRedrive(i) => {
                let key = pick(i);
                let sweeper = world.sweeper(l, now);
                let audit = Audit::new("ops", "race", Via::Cli).expect("audited");
                let (swept, redriven) =
                    tokio::join!(sweeper.run_once(), l.jobs().redrive(&key, &audit, now));
                swept.expect("sweep");
                if redriven.is_ok() {
                    assert!(
                        l.jobs().get(&key).await.expect("get").is_some(),
                        "{key}: redriven, then deleted"
                    );
                    assert!(
                        !l.deliveries()
                            .redrives(&key)
                            .await
                            .expect("audit")
                            .is_empty()
                    );
                }
            }
            Op::Redrive(i) => {
                let _ = l
                    .jobs()
                    .redrive(
                        &pick(i),
                        &Audit::new("ops", "again", Via::Cli).expect("audited"),
                        now,
                    )
                    .await;
            }
            Op::RedriveDelivery(i) => {
                let dk =
                    DeliveryKey::new(pick(i), dawnpost::delivery::email::KIND, "ops@example.com");
                let _ = l
                    .deliveries()
                    .redrive(
                        &dk,
                        &Audit::new("ops", "again", Via::Cli).expect("audited"),
                        now,
                    )
                    .await;
            }
            Op::Cancel(i) => {
                let _ = l
                    .jobs()
                    .cancel(
                        &pick(i),
                        &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
                        now,
                    )
                    .await;
            }
            Op::Rescue => {
                l.leases()
                    .rescue(now, &RescueBudget::default())
                    .await
                    .expect("rescue");
            }
        }
        live_work_is_whole(l, &world, &keys).await;
    }
    // A last sweep far in the future, then one at the same instant that finds nothing to do.
    let end = t0() + Duration::days(400);
    sweep_exactly(l, &world, &keys, &c.specs, end).await;
    let again = world.sweeper(l, end).run_once().await.expect("sweep again");
    assert_eq!(
        again.artifacts_deleted + again.diagnostics_cleared + again.jobs_deleted,
        0,
        "{again:?}"
    );
}

/// A second way into the test's ledger, to empty it between cases (one ledger per backend
/// serves every case).
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool, String),
}

impl Raw {
    async fn open(t: &TestLedger) -> Raw {
        if let Some(schema) = t.schema() {
            let url = std::env::var(common::POSTGRES_ENV).expect("url");
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            Raw::Postgres(pool, format!("{schema}."))
        } else {
            let path = t.sqlite_path().expect("a sqlite ledger");
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
                .await
                .expect("connect");
            Raw::Sqlite(pool)
        }
    }

    async fn wipe(&self) {
        const TABLES: [&str; 6] = [
            "delivery_attempts",
            "audit",
            "ingest_events",
            "deliveries",
            "jobs",
            "schedule_state",
        ];
        for table in TABLES {
            match self {
                Raw::Sqlite(pool) => {
                    sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table}")))
                        .execute(pool)
                        .await
                        .map(|_| ())
                }
                Raw::Postgres(pool, schema) => {
                    sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {schema}{table}")))
                        .execute(pool)
                        .await
                        .map(|_| ())
                }
            }
            .expect("wipe");
        }
    }

    async fn close(self) {
        match self {
            Raw::Sqlite(pool) => pool.close().await,
            Raw::Postgres(pool, _) => pool.close().await,
        }
    }
}

fn cases_wanted() -> u32 {
    let args: Vec<String> = std::env::args().collect();
    let from_args = args
        .iter()
        .position(|a| a == "--cases")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    from_args
        .or_else(|| {
            std::env::var("DAWNPOST_PROPTEST_CASES")
                .ok()
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(1000)
}

fn main() -> ExitCode {
    // `cargo test -- --list` and filters that name other tests: nothing to run here.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("retention_property: test");
        return ExitCode::SUCCESS;
    }
    let cases = cases_wanted();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut failed = false;
    for backend in ["sqlite", "postgres"] {
        let t = rt.block_on(async {
            match backend {
                "sqlite" => Some(TestLedger::sqlite().await),
                _ => TestLedger::postgres().await,
            }
        });
        let Some(t) = t else {
            println!(
                "retention_property {backend}: skipped ({} is not set)",
                common::POSTGRES_ENV
            );
            continue;
        };
        let raw = rt.block_on(Raw::open(&t));
        let started = std::time::Instant::now();
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&case(), |c| {
            rt.block_on(async {
                raw.wipe().await;
                run_case(&t, c).await;
            });
            Ok(())
        });
        match result {
            Ok(()) => println!(
                "retention_property {backend}: {cases} random ledgers and histories ... ok ({:.1} s)",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("retention_property {backend}: FAILED: {e}");
                failed = true;
            }
        }
        rt.block_on(async {
            raw.close().await;
            t.cleanup().await;
        });
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
