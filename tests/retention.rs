//! The retention sweeper on both backends: a property test over random ledgers and policies,
//! overrides, reloads, dry runs, and a sweep that died between its steps.

mod common;

use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use common::{TestLedger, at};
use dawnpost::ManualClock;
use dawnpost::artifact::ArtifactStore;
use dawnpost::config::RetentionPolicy;
use dawnpost::keys::{DestinationKind, JobKey, ReportId, delivery_key};
use dawnpost::ledger::{
    DeliveryNext, JobState, LeaseParams, Ledger, NewAttempt, NewDelivery, NewJob, ResponseClass,
};
use dawnpost::render::Rendered;
use dawnpost::schedule::Window;
use dawnpost::sweeper::{Sweeper, SweeperConfig};
use proptest::prelude::*;
use tempfile::TempDir;

fn t0() -> DateTime<Utc> {
    at(2026, 9, 1, 6, 0)
}

/// What a generated job ends up as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Ready,
    Rendering,
    /// Rendered, one delivery still pending.
    Delivering,
    Done,
    Quarantined,
    Cancelled,
    /// Quarantined long ago, then redriven: in flight again.
    Redriven,
}

#[derive(Debug, Clone)]
struct Spec {
    report: String,
    shape: Shape,
    /// When it became terminal, in hours after t0.
    finished_h: i64,
}

struct World {
    store: ArtifactStore,
    _dir: TempDir,
    policy_file: std::path::PathBuf,
}

impl World {
    fn new(policy: &str) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ArtifactStore::open("file://artifacts", dir.path()).expect("store");
        let policy_file = dir.path().join("retention.toml");
        std::fs::write(&policy_file, policy).expect("write policy");
        World {
            store,
            _dir: dir,
            policy_file,
        }
    }

    fn sweeper(&self, ledger: &Ledger, now: DateTime<Utc>) -> Sweeper {
        let policy = RetentionPolicy::load(&self.policy_file).unwrap_or_else(|e| panic!("{e}"));
        Sweeper::new(
            ledger.clone(),
            self.store.clone(),
            Arc::new(ManualClock::new(now)),
            SweeperConfig {
                batch_size: 3, // small, so sweeps cross batch boundaries
                ..SweeperConfig::new(self.policy_file.clone())
            },
            policy,
        )
    }
}

fn lease(now: DateTime<Utc>) -> LeaseParams {
    LeaseParams {
        owner: "builder".into(),
        now,
        lease_for: Duration::minutes(5),
        limit: 1,
    }
}

fn attempt(class: ResponseClass, now: DateTime<Utc>) -> NewAttempt {
    NewAttempt {
        requested_at: now,
        finished_at: now,
        class,
        code: None,
        retry_after: None,
        reason: Some("r".into()),
        diagnostics: Some("verbose transport detail".into()),
    }
}

/// Builds one job of the given shape through the ledger's own transitions.
async fn build(l: &Ledger, store: &ArtifactStore, i: usize, spec: &Spec) -> String {
    let date = NaiveDate::from_ymd_opt(2026, 9, 1).expect("date") + Duration::days(i as i64);
    let key = JobKey::new(ReportId::parse(&spec.report).expect("id"), date);
    let start = t0();
    l.job_insert_many(
        &[NewJob {
            key: key.clone(),
            fire_at: start,
            window: Window {
                start: start - Duration::days(1),
                end: start,
            },
            ready_at: start,
            origin: dawnpost::ledger::JobOrigin::Backfill,
        }],
        start,
    )
    .await
    .expect("insert");
    let k = key.to_string();
    let finished = start + Duration::hours(spec.finished_h);
    match spec.shape {
        Shape::Ready => return k,
        Shape::Cancelled => {
            l.job_cancel(&k, finished).await.expect("cancel");
            return k;
        }
        _ => {}
    }
    let mut leased = None;
    for j in l
        .job_lease(&LeaseParams {
            limit: 100,
            ..lease(start)
        })
        .await
        .expect("lease")
    {
        if j.job.key == k {
            leased = Some(j);
        } else {
            l.job_release(&j.lease, start).await.expect("release");
        }
    }
    let leased = leased.expect("this job's lease");
    if spec.shape == Shape::Rendering {
        return k;
    }
    let rendered = Rendered {
        html: format!("<p>{k}</p>"),
        text: k.clone(),
    };
    let (artifact, _) = store
        .write(&spec.report, &date.to_string(), &rendered)
        .await
        .expect("artifact");
    let deliveries = vec![NewDelivery {
        key: delivery_key(&key, DestinationKind::Email, "ops@example.com"),
        kind: DestinationKind::Email,
        destination: "ops@example.com".into(),
    }];
    l.job_rendered(&leased.lease, &artifact, &deliveries, start)
        .await
        .expect("rendered");
    if spec.shape == Shape::Delivering {
        return k;
    }
    // Lease this job's delivery; hand back any other job's that came along.
    let mut dl = None;
    for d in l
        .delivery_lease(&LeaseParams {
            limit: 100,
            ..lease(start)
        })
        .await
        .expect("lease")
    {
        if d.delivery.job_key == k {
            dl = Some(d);
        } else {
            l.delivery_release(&d.lease, start).await.expect("release");
        }
    }
    let dl = dl.expect("this job's delivery");
    let (class, next) = match spec.shape {
        Shape::Done => (ResponseClass::Accepted, DeliveryNext::Sent),
        _ => (ResponseClass::Permanent, DeliveryNext::Quarantine),
    };
    l.delivery_finish(&dl.lease, &attempt(class, finished), next)
        .await
        .expect("finish");
    l.job_settle(&k, finished).await.expect("settle");
    if spec.shape == Shape::Redriven {
        l.job_redrive(&k, "ops", "again", finished + Duration::hours(1))
            .await
            .expect("redrive");
    }
    k
}

/// Everything retention could remove from one job.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Footprint {
    row: bool,
    state: Option<JobState>,
    objects: usize,
    diagnostics: i64,
}

async fn footprint(l: &Ledger, store: &ArtifactStore, key: &str) -> Footprint {
    let (report, date) = key.split_once(':').expect("key");
    let job = l.job_get(key).await.expect("get");
    let diagnostics = if job.is_some() {
        l.job_retention_sizes(key)
            .await
            .expect("sizes")
            .diagnostics_rows
    } else {
        0
    };
    Footprint {
        row: job.is_some(),
        state: job.map(|j| j.state),
        objects: store.count(report, date).await.expect("count"),
        diagnostics,
    }
}

fn days(d: i64) -> Duration {
    Duration::days(d)
}

fn policy_text(a: i64, d: i64, ledger: i64, over: Option<(i64, i64)>) -> String {
    let mut s = format!(
        "artifact = \"{a}d\"\ndiagnostics = \"{d}d\"\nledger = \"{ledger}d\"\nsweep_every = \"1m\"\n"
    );
    if let Some((oa, ol)) = over {
        s.push_str(&format!(
            "[[override]]\nreports = \"keep-*\"\nartifact = \"{oa}d\"\nledger = \"{ol}d\"\n"
        ));
    }
    s
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Ready),
        Just(Shape::Rendering),
        Just(Shape::Delivering),
        Just(Shape::Done),
        Just(Shape::Quarantined),
        Just(Shape::Cancelled),
        Just(Shape::Redriven),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just("keep-a"), Just("plain"), Just("other")],
        shape(),
        0i64..(50 * 24),
    )
        .prop_map(|(report, shape, finished_h)| Spec {
            report: report.to_string(),
            shape,
            finished_h,
        })
}

async fn property_case(
    t: &TestLedger,
    specs: Vec<Spec>,
    a: i64,
    d: i64,
    extra: i64,
    over: Option<(i64, i64)>,
    now_h: i64,
) {
    let ledger_days = a.max(d) + extra;
    let over = over.map(|(oa, ol)| (oa, ol.max(oa).max(d)));
    let world = World::new(&policy_text(a, d, ledger_days, over));
    let l = &t.ledger;
    let mut keys = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        keys.push(build(l, &world.store, i, s).await);
    }
    let now = t0() + Duration::hours(now_h);
    let mut before = Vec::new();
    for k in &keys {
        before.push(footprint(l, &world.store, k).await);
    }
    let sweeper = world.sweeper(l, now);
    sweeper.run_once().await.expect("sweep");
    let policy = sweeper.policy();
    for ((k, s), b) in keys.iter().zip(&specs).zip(&before) {
        let after = footprint(l, &world.store, k).await;
        let terminal = matches!(s.shape, Shape::Done | Shape::Quarantined | Shape::Cancelled);
        if !terminal {
            assert_eq!(&after, b, "{k} ({:?}) is not terminal: untouched", s.shape);
            continue;
        }
        let th = policy.for_report(&s.report);
        let age = now - (t0() + Duration::hours(s.finished_h));
        let ledger_due = age > th.ledger.as_chrono();
        let artifact_due = age > th.artifact.as_chrono() || ledger_due;
        let diagnostics_due = age > th.diagnostics.as_chrono();
        assert_eq!(
            after.row, !ledger_due,
            "{k}: the row goes exactly when the ledger threshold passed"
        );
        if b.objects > 0 {
            assert_eq!(
                after.objects == 0,
                artifact_due,
                "{k}: objects go exactly when due"
            );
        }
        if !after.row {
            assert_eq!(
                after.objects, 0,
                "{k}: no ledger row deleted while its artifact exists"
            );
        } else {
            assert_eq!(
                after.diagnostics == 0,
                diagnostics_due || b.diagnostics == 0,
                "{k}: diagnostics"
            );
            assert_eq!(after.state, b.state);
        }
    }
    // A second sweep at the same instant finds nothing more to do.
    let again = world.sweeper(l, now).run_once().await.expect("sweep again");
    assert_eq!(
        again.artifacts_deleted + again.diagnostics_cleared + again.jobs_deleted,
        0,
        "{again:?}"
    );
}

fn property_config() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(property_config())]

    #[test]
    fn sweeps_delete_only_finished_work_past_its_threshold_sqlite(
        specs in proptest::collection::vec(spec(), 1..10),
        a in 1i64..20, d in 1i64..20, extra in 0i64..10,
        over in proptest::option::of((1i64..40, 1i64..45)),
        now_h in 0i64..(80 * 24),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        rt.block_on(async {
            let t = TestLedger::sqlite().await;
            property_case(&t, specs, a, d, extra, over, now_h).await;
            t.cleanup().await;
        });
    }

    #[test]
    fn sweeps_delete_only_finished_work_past_its_threshold_postgres(
        specs in proptest::collection::vec(spec(), 1..10),
        a in 1i64..20, d in 1i64..20, extra in 0i64..10,
        over in proptest::option::of((1i64..40, 1i64..45)),
        now_h in 0i64..(80 * 24),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        rt.block_on(async {
            let Some(t) = TestLedger::postgres().await else { return };
            property_case(&t, specs, a, d, extra, over, now_h).await;
            t.cleanup().await;
        });
    }
}

async fn overrides_keep_matching_reports_longer(t: &TestLedger) {
    let world = World::new(&policy_text(7, 14, 30, Some((30, 60))));
    let l = &t.ledger;
    let keep = build(
        l,
        &world.store,
        0,
        &Spec {
            report: "keep-a".into(),
            shape: Shape::Done,
            finished_h: 0,
        },
    )
    .await;
    let plain = build(
        l,
        &world.store,
        1,
        &Spec {
            report: "plain".into(),
            shape: Shape::Done,
            finished_h: 0,
        },
    )
    .await;
    let counts = world
        .sweeper(l, t0() + days(10))
        .run_once()
        .await
        .expect("sweep");
    assert_eq!(counts.artifacts_deleted, 1);
    assert_eq!(
        footprint(l, &world.store, &keep).await.objects,
        2,
        "keep-* keeps artifacts 30d"
    );
    assert_eq!(footprint(l, &world.store, &plain).await.objects, 0);
    world
        .sweeper(l, t0() + days(45))
        .run_once()
        .await
        .expect("sweep");
    assert!(
        footprint(l, &world.store, &keep).await.row,
        "keep-* keeps rows 60d"
    );
    assert!(!footprint(l, &world.store, &plain).await.row);
}

async fn an_invalid_reload_keeps_the_previous_policy(t: &TestLedger) {
    let world = World::new(&policy_text(7, 14, 30, None));
    let l = &t.ledger;
    let k = build(
        l,
        &world.store,
        0,
        &Spec {
            report: "plain".into(),
            shape: Shape::Done,
            finished_h: 0,
        },
    )
    .await;
    let sweeper = world.sweeper(l, t0() + days(10));
    // An operator's edit that does not validate (ledger shorter than artifact).
    std::fs::write(&world.policy_file, "artifact = \"1d\"\nledger = \"1h\"\n").expect("write");
    let counts = sweeper.run_once().await.expect("sweep");
    assert_eq!(
        sweeper
            .reload_failures
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        sweeper.policy().defaults.ledger.to_string(),
        "30d",
        "the previous policy stays"
    );
    assert_eq!(
        counts.jobs_deleted, 0,
        "nothing deleted under a policy that did not validate"
    );
    assert!(footprint(l, &world.store, &k).await.row);
    // A valid edit takes effect at the next sweep.
    std::fs::write(&world.policy_file, policy_text(1, 1, 5, None)).expect("write");
    let counts = sweeper.run_once().await.expect("sweep");
    assert_eq!(counts.jobs_deleted, 1);
    assert!(!footprint(l, &world.store, &k).await.row);
}

async fn a_dry_run_deletes_nothing_and_predicts_the_sweep(t: &TestLedger) {
    let world = World::new(&policy_text(7, 14, 30, None));
    let l = &t.ledger;
    let mut keys = Vec::new();
    for (i, (shape, h)) in [
        (Shape::Done, 0),
        (Shape::Quarantined, 24 * 20),
        (Shape::Cancelled, 0),
        (Shape::Delivering, 0),
    ]
    .into_iter()
    .enumerate()
    {
        keys.push(
            build(
                l,
                &world.store,
                i,
                &Spec {
                    report: "plain".into(),
                    shape,
                    finished_h: h,
                },
            )
            .await,
        );
    }
    let mut before = Vec::new();
    for k in &keys {
        before.push(footprint(l, &world.store, k).await);
    }
    let now = t0() + days(31);
    let sweeper = world.sweeper(l, now);
    let plan = sweeper.plan(now).await.expect("plan");
    for (k, b) in keys.iter().zip(&before) {
        assert_eq!(
            &footprint(l, &world.store, k).await,
            b,
            "dry run touched {k}"
        );
    }
    let listed = |items: &[dawnpost::sweeper::SweepItem]| {
        items.iter().map(|i| i.job.clone()).collect::<Vec<_>>()
    };
    assert_eq!(listed(&plan.artifact), [keys[0].clone(), keys[1].clone()]);
    assert_eq!(
        listed(&plan.ledger),
        [keys[0].clone(), keys[2].clone()],
        "done and cancelled are past 30d"
    );
    assert_eq!(
        listed(&plan.diagnostics),
        [keys[0].clone()],
        "the quarantined job is 11 days old: its diagnostics stay 14d"
    );
    assert!(plan.counts.artifact_bytes > 0);
    let counts = sweeper.run_once().await.expect("sweep");
    assert_eq!(counts, plan.counts, "the dry run predicts the sweep");
}

async fn a_sweep_that_died_after_deleting_objects_is_finished_by_the_next(t: &TestLedger) {
    let world = World::new(&policy_text(7, 14, 30, None));
    let l = &t.ledger;
    let k = build(
        l,
        &world.store,
        0,
        &Spec {
            report: "plain".into(),
            shape: Shape::Done,
            finished_h: 0,
        },
    )
    .await;
    // The objects are gone but the ledger was never told: the crash window between the steps.
    let job = l.job_get(&k).await.expect("get").expect("job");
    let artifact = job.artifact.expect("artifact");
    world
        .store
        .delete(&artifact.html_key)
        .await
        .expect("delete");
    world
        .store
        .delete(&artifact.text_key)
        .await
        .expect("delete");
    assert!(
        l.job_get(&k)
            .await
            .expect("get")
            .expect("job")
            .artifact_deleted_at
            .is_none()
    );
    let counts = world
        .sweeper(l, t0() + days(40))
        .run_once()
        .await
        .expect("sweep");
    assert_eq!((counts.artifacts_deleted, counts.jobs_deleted), (1, 1));
    assert!(!footprint(l, &world.store, &k).await.row);
}

async fn retention_never_touches_work_in_flight(t: &TestLedger) {
    let world = World::new(&policy_text(1, 1, 1, None));
    let l = &t.ledger;
    let k = build(
        l,
        &world.store,
        0,
        &Spec {
            report: "plain".into(),
            shape: Shape::Redriven,
            finished_h: 0,
        },
    )
    .await;
    let counts = world
        .sweeper(l, t0() + days(400))
        .run_once()
        .await
        .expect("sweep");
    assert_eq!(counts.jobs_examined, 0);
    // The store refuses too, whatever a caller asks.
    let now = t0() + days(400);
    assert!(!l.job_mark_artifact_deleted(&k, now).await.expect("mark"));
    assert_eq!(l.job_clear_diagnostics(&k, now).await.expect("clear"), None);
    assert_eq!(l.job_delete(&k).await.expect("delete"), None);
    let f = footprint(l, &world.store, &k).await;
    assert!(f.row && f.objects == 2 && f.diagnostics == 1);
}

on_both_backends!(
    overrides_keep_matching_reports_longer,
    an_invalid_reload_keeps_the_previous_policy,
    a_dry_run_deletes_nothing_and_predicts_the_sweep,
    a_sweep_that_died_after_deleting_objects_is_finished_by_the_next,
    retention_never_touches_work_in_flight,
);
