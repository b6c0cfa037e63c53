//! The retention sweeper on both backends: overrides, reloads, dry runs, and a sweep that died
//! between its steps. The property test over random ledgers is `retention_property.rs`.

use crate::common;

use common::TestLedger;
use common::world::*;

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
    let listed = |items: &[dawnpost::services::sweeper::SweepItem]| {
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
    let job = l.jobs().get(&k).await.expect("get").expect("job");
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
        l.jobs()
            .get(&k)
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
    assert!(
        !l.retention()
            .mark_artifact_deleted(&k, now)
            .await
            .expect("mark")
    );
    assert_eq!(
        l.retention()
            .clear_diagnostics(&k, now)
            .await
            .expect("clear"),
        None
    );
    assert_eq!(l.retention().delete(&k).await.expect("delete"), None);
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
