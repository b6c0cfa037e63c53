//! Bulk redrive runbooks on both backends: dead letters grouped by report, host and class; a
//! dry run; a canary, then batches, each judged once its deliveries are sent or back in
//! quarantine; stopping by itself on a repeated class; every step audited.

use crate::common;

use chrono::Duration;
use common::TestLedger;
use common::fixtures::*;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::RunbookSpec;
use dawnpost::ledger::Via;
use dawnpost::services::runbook::{self, Advance};

fn spec(canary: u32, batch: u32) -> RunbookSpec {
    RunbookSpec {
        report: "carrier".into(),
        host: "carrier-y.example".into(),
        class: ResponseClass::Permanent,
        since: None,
        canary,
        batch,
        by: "ann".into(),
        reason: "carrier fixed its inbox".into(),
        via: Via::Cli,
    }
}

/// `n` deliveries of report `carrier` quarantined permanent at `bad@carrier-y.example`.
async fn carrier_y_dead_letters(t: &TestLedger, n: u32) {
    dead_letters(
        t,
        "carrier",
        1,
        n,
        "bad@carrier-y.example",
        ResponseClass::Permanent,
    )
    .await;
}

async fn dead_letters_group_by_report_host_and_class(t: &TestLedger) {
    dead_letters(
        t,
        "carrier",
        1,
        3,
        "bad@Carrier-Y.example",
        ResponseClass::Permanent,
    )
    .await;
    dead_letters(
        t,
        "carrier",
        10,
        1,
        "x@other.example",
        ResponseClass::Permanent,
    )
    .await;
    dead_letters(
        t,
        "carrier",
        20,
        2,
        "slow@carrier-y.example",
        ResponseClass::Transient,
    )
    .await;
    let (groups, truncated) = runbook::groups(&t.ledger).await.expect("groups");
    assert!(!truncated);
    let shape: Vec<(&str, &str, &str, usize)> = groups
        .iter()
        .map(|g| {
            (
                g.report.as_str(),
                g.host.as_str(),
                g.class.as_str(),
                g.count,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("carrier", "carrier-y.example", "permanent", 3),
            ("carrier", "carrier-y.example", "transient", 2),
            ("carrier", "other.example", "permanent", 1),
        ]
    );
}

async fn a_runbook_goes_canary_then_batches_and_stops_on_a_repeat(t: &TestLedger) {
    carrier_y_dead_letters(t, 6).await;
    dead_letters(
        t,
        "carrier",
        10,
        1,
        "x@other.example",
        ResponseClass::Permanent,
    )
    .await;
    let l = &t.ledger;
    let now = t0() + Duration::hours(1);

    let (rb, found) = runbook::plan(l, &spec(1, 2), now).await.expect("plan");
    assert_eq!(
        (rb.planned, found.len(), rb.state.as_str()),
        (6, 6, "planned")
    );
    assert_eq!(
        runbook::advance(l, rb.id, now).await.expect("advance"),
        Advance::Planned
    );
    assert_eq!(
        deliver_due(t, now, ResponseClass::Accepted).await,
        0,
        "a dry run redrives nothing"
    );

    let first = runbook::start(l, rb.id, "ann", now).await.expect("start");
    assert_eq!(first, Advance::Redrove { step: 1, count: 1 });
    assert_eq!(
        runbook::advance(l, rb.id, now).await.expect("wait"),
        Advance::Waiting(1)
    );

    // The canary is sent: the first batch of two goes, and only once however many drivers.
    assert_eq!(deliver_due(t, now, ResponseClass::Accepted).await, 1);
    let (a, b) = tokio::join!(
        runbook::advance(l, rb.id, now),
        runbook::advance(l, rb.id, now)
    );
    let taken: Vec<Advance> = [a.expect("a"), b.expect("b")]
        .into_iter()
        .filter(|x| matches!(x, Advance::Redrove { .. }))
        .collect();
    assert_eq!(taken, [Advance::Redrove { step: 2, count: 2 }]);
    // The driver that lost the race (it saw `Finished`) still reads the step from the audit
    // trail, as `dawnpost redrive` reports every step whoever took it.
    let seen = |after| async move {
        runbook::redrives_after(l, rb.id, after)
            .await
            .expect("steps")
            .into_iter()
            .map(|s| (s.step, s.action, s.count))
            .collect::<Vec<_>>()
    };
    assert_eq!(seen(1).await, [(2, "batch".to_string(), 2)]);
    assert_eq!(
        seen(0).await,
        [(1, "canary".to_string(), 1), (2, "batch".to_string(), 2)]
    );

    // The batch comes back quarantined permanent: the runbook stops by itself.
    assert_eq!(deliver_due(t, now, ResponseClass::Permanent).await, 2);
    match runbook::advance(l, rb.id, now).await.expect("judge") {
        Advance::Stopped(why) => {
            assert!(why.contains("2 of 2") && why.contains("permanent"), "{why}")
        }
        other => panic!("expected a stop, got {other:?}"),
    }
    assert_eq!(
        runbook::advance(l, rb.id, now).await.expect("after"),
        Advance::Finished
    );
    assert_eq!(
        deliver_due(t, now, ResponseClass::Accepted).await,
        0,
        "nothing more redriven"
    );

    let steps: Vec<String> = l
        .runbooks()
        .steps(rb.id)
        .await
        .expect("steps")
        .into_iter()
        .map(|s| format!("{} {}", s.action, s.count))
        .collect();
    assert_eq!(
        steps,
        ["plan 6", "start 0", "canary 1", "batch 2", "stopped 0"]
    );
    let stopped = l
        .runbooks()
        .get(rb.id)
        .await
        .expect("get")
        .expect("runbook");
    assert_eq!(stopped.state.as_str(), "stopped");
    let audit = l
        .deliveries()
        .redrives(&common::jk("carrier:2026-09-01"))
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert!(
        audit[0]
            .reason
            .starts_with(&format!("runbook #{} canary: ", rb.id)),
        "{:?}",
        audit[0]
    );
    assert_eq!(audit[0].by, "ann");
}

async fn a_canary_back_in_quarantine_stops_before_any_batch(t: &TestLedger) {
    carrier_y_dead_letters(t, 4).await;
    let l = &t.ledger;
    let now = t0() + Duration::hours(1);
    let (rb, _) = runbook::plan(l, &spec(1, 50), now).await.expect("plan");
    runbook::start(l, rb.id, "ann", now).await.expect("start");
    assert_eq!(deliver_due(t, now, ResponseClass::Permanent).await, 1);
    match runbook::advance(l, rb.id, now).await.expect("judge") {
        Advance::Stopped(why) => assert!(why.contains("the canary"), "{why}"),
        other => panic!("expected a stop, got {other:?}"),
    }
    assert_eq!(deliver_due(t, now, ResponseClass::Accepted).await, 0);
}

async fn a_runbook_whose_work_is_sent_finishes_done(t: &TestLedger) {
    carrier_y_dead_letters(t, 3).await;
    let l = &t.ledger;
    let now = t0() + Duration::hours(1);
    let (rb, _) = runbook::plan(l, &spec(1, 5), now).await.expect("plan");
    runbook::start(l, rb.id, "ann", now).await.expect("start");
    deliver_due(t, now, ResponseClass::Accepted).await;
    assert_eq!(
        runbook::advance(l, rb.id, now).await.expect("batch"),
        Advance::Redrove { step: 2, count: 2 }
    );
    deliver_due(t, now, ResponseClass::Accepted).await;
    match runbook::advance(l, rb.id, now).await.expect("done") {
        Advance::Done(why) => assert!(why.contains("3 deliver"), "{why}"),
        other => panic!("expected done, got {other:?}"),
    }
    let rejected = runbook::plan(
        l,
        &RunbookSpec {
            reason: " ".into(),
            ..spec(1, 5)
        },
        now,
    )
    .await;
    assert!(rejected.is_err(), "a plan needs a reason");
}

/// The daemon's driver looks every `runbooks_every` while a runbook runs and five times as
/// seldom while none does (each look is a read, a commit on a shared ledger).
async fn the_driver_looks_seldom_while_no_runbook_runs(t: &TestLedger) {
    carrier_y_dead_letters(t, 3).await;
    let l = &t.ledger;
    let now = t0() + Duration::hours(1);
    let clock = std::sync::Arc::new(dawnpost::domain::clock::ManualClock::new(now));
    let every = std::time::Duration::from_secs(2);
    let driver = runbook::Driver::new(l.clone(), clock, every);
    let idle = every * runbook::IDLE_ROUNDS;
    let round = driver.round().await.expect("round");
    assert_eq!((round.running, driver.pause(round.running)), (0, idle));

    let (rb, _) = runbook::plan(l, &spec(1, 5), now).await.expect("plan");
    let round = driver.round().await.expect("round");
    assert_eq!(round.running, 0, "a planned runbook is not running");
    runbook::start(l, rb.id, "ann", now).await.expect("start");
    let round = driver.round().await.expect("round");
    assert_eq!((round.running, round.moved), (1, 0), "waits for its canary");
    assert_eq!(driver.pause(round.running), every);

    deliver_due(t, now, ResponseClass::Accepted).await;
    let round = driver.round().await.expect("round");
    assert_eq!((round.running, round.moved), (1, 1), "the batch went");
    deliver_due(t, now, ResponseClass::Accepted).await;
    let round = driver.round().await.expect("round");
    assert_eq!((round.running, round.moved), (1, 1), "done");
    let round = driver.round().await.expect("round");
    assert_eq!((round.running, driver.pause(round.running)), (0, idle));
}

on_both_backends!(
    dead_letters_group_by_report_host_and_class,
    a_runbook_goes_canary_then_batches_and_stops_on_a_repeat,
    a_canary_back_in_quarantine_stops_before_any_batch,
    a_runbook_whose_work_is_sent_finishes_done,
    the_driver_looks_seldom_while_no_runbook_runs,
);
