//! The ledger's conformance suite, part 3 — what operators and the rescuer do: redrive,
//! rescue, cancel, list, retention's search, the scheduler's tick record — on both backends
//! (see `ledger_conformance.rs`).

use crate::common;
use common::{dk, jk};

use chrono::Duration;
use common::TestLedger;
use common::fixtures::*;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{
    DeliveryNext, DeliveryState, JobFilter, JobState, LedgerError, RescueBudget,
};

async fn redrive_is_audited_and_keeps_keys(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    sent_and_quarantined(t, &leases).await;
    l.jobs()
        .settle(&jk("w:2026-10-25"), t0())
        .await
        .expect("settle");

    let later = t0() + Duration::hours(2);
    let out = l
        .deliveries()
        .redrive(
            leases[1].key(),
            &Audit::new("alice", "mailbox fixed by carrier", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("redrive");
    assert_eq!(out.job_key, "w:2026-10-25");
    let d = l
        .deliveries()
        .get(leases[1].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(
        (d.state, d.redrive_count, d.ready_at),
        (DeliveryState::Pending, 1, later)
    );
    assert_eq!(
        l.jobs()
            .get(&jk("w:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Delivering
    );
    let audit = l
        .deliveries()
        .redrives(&jk("w:2026-10-25"))
        .await
        .expect("redrives");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].by, "alice");
    assert_eq!(audit[0].reason, "mailbox fixed by carrier");
    assert_eq!(audit[0].delivery_key.as_ref(), Some(leases[1].key()));
    assert_eq!(audit[0].at, later);

    // The retry budget starts afresh; attempt numbers keep counting.
    assert_eq!(
        (d.attempts, d.budget_attempts_used(), d.budget_since),
        (1, 0, later)
    );

    // The same key is leased again; a second redrive of pending work is refused.
    let again = l
        .leases()
        .deliveries(&params("w1", later, 10))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    assert_eq!(&again[0].delivery.key, leases[1].key());
    assert_eq!(again[0].delivery.budget_attempts_used(), 1);
    l.deliveries()
        .finish(
            &again[0].lease,
            &attempt(ResponseClass::Accepted, later),
            DeliveryNext::Sent,
        )
        .await
        .expect("the redriven delivery records its attempt");
    let numbers: Vec<i64> = l
        .deliveries()
        .attempts(leases[1].key())
        .await
        .expect("attempts")
        .iter()
        .map(|a| a.attempt)
        .collect();
    assert_eq!(numbers, [1, 2]);
    assert!(matches!(
        l.deliveries()
            .redrive(
                leases[1].key(),
                &Audit::new("alice", "again", Via::Cli).expect("audited"),
                later
            )
            .await,
        Err(LedgerError::WrongState { .. })
    ));
    assert!(matches!(
        l.deliveries()
            .redrive(
                &dk("nope:2026-10-25/email:x@example.com"),
                &Audit::new("alice", "x", Via::Cli).expect("audited"),
                later
            )
            .await,
        Err(LedgerError::NotFound { .. })
    ));

    // A job quarantined at render goes back to ready.
    ready_jobs(t, &["r:2026-10-25"]).await;
    let lease = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.jobs()
        .quarantine(&lease, "bad template", t0())
        .await
        .expect("quarantine");
    l.jobs()
        .redrive(
            &jk("r:2026-10-25"),
            &Audit::new("bob", "template fixed", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("redrive job");
    let r = l
        .jobs()
        .get(&jk("r:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (r.state, r.redrive_count, r.terminal_at),
        (JobState::Ready, 1, None)
    );
    assert!(matches!(
        l.jobs()
            .redrive(
                &jk("r:2026-10-25"),
                &Audit::new("bob", "twice", Via::Cli).expect("audited"),
                later
            )
            .await,
        Err(LedgerError::WrongState {
            expected: "quarantined",
            ..
        })
    ));
    assert_eq!(
        l.deliveries()
            .redrives(&jk("r:2026-10-25"))
            .await
            .expect("redrives")[0]
            .delivery_key,
        None
    );
}

async fn job_redrive_returns_quarantined_deliveries(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    sent_and_quarantined(t, &leases).await;
    l.jobs()
        .settle(&jk("w:2026-10-25"), t0())
        .await
        .expect("settle");
    let out = l
        .jobs()
        .redrive(
            &jk("w:2026-10-25"),
            &Audit::new("ops", "receiver fixed", Via::Cli).expect("audited"),
            t0(),
        )
        .await
        .expect("redrive");
    assert_eq!(out.deliveries, 1, "only the quarantined delivery returns");
    let states: Vec<DeliveryState> = l
        .deliveries()
        .list(&jk("w:2026-10-25"))
        .await
        .expect("list")
        .iter()
        .map(|d| d.state)
        .collect();
    assert_eq!(states, [DeliveryState::Sent, DeliveryState::Pending]);
    assert_eq!(
        l.jobs()
            .get(&jk("w:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Delivering
    );
}

async fn rescue_returns_expired_deliveries_and_explains(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com"]).await;
    let later = t0() + Duration::minutes(10);
    assert_eq!(
        l.leases()
            .rescue(t0() + Duration::minutes(4), &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        0
    );
    assert_eq!(
        l.leases()
            .rescue(later, &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        1
    );
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(
        (d.state, d.attempts),
        (DeliveryState::Pending, 1),
        "the lost attempt still counts"
    );
    let attempts = l
        .deliveries()
        .attempts(leases[0].key())
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].class, ResponseClass::Unknown);
    assert!(
        attempts[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("lease expired")
    );
    // The old owner cannot record its late result.
    assert!(matches!(
        l.deliveries()
            .finish(
                &leases[0],
                &attempt(ResponseClass::Accepted, later),
                DeliveryNext::Sent
            )
            .await,
        Err(LedgerError::LeaseLost { .. })
    ));
    let next = l
        .leases()
        .deliveries(&params("w2", later, 1))
        .await
        .expect("lease")
        .remove(0);
    l.deliveries()
        .finish(
            &next.lease,
            &attempt(ResponseClass::Accepted, later),
            DeliveryNext::Sent,
        )
        .await
        .expect("new owner records");
    let numbers: Vec<i64> = l
        .deliveries()
        .attempts(leases[0].key())
        .await
        .expect("attempts")
        .iter()
        .map(|a| a.attempt)
        .collect();
    assert_eq!(numbers, [1, 2]);
}

async fn cancel_only_from_ready_or_quarantined(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25"]).await;
    l.jobs()
        .cancel(
            &jk("a:2026-10-25"),
            &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
            t0(),
        )
        .await
        .expect("cancel ready");
    assert_eq!(
        l.jobs()
            .get(&jk("a:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Cancelled
    );
    let _lease = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease");
    assert!(matches!(
        l.jobs()
            .cancel(
                &jk("b:2026-10-25"),
                &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
                t0()
            )
            .await,
        Err(LedgerError::WrongState {
            expected: "ready, waiting or quarantined",
            ..
        })
    ));
    assert!(matches!(
        l.jobs()
            .cancel(
                &jk("zz:2026-10-25"),
                &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
                t0()
            )
            .await,
        Err(LedgerError::NotFound { .. })
    ));
}

async fn lists_filter_by_state_and_report(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-24", "a:2026-10-25", "b:2026-10-25"]).await;
    l.jobs()
        .cancel(
            &jk("b:2026-10-25"),
            &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
            t0(),
        )
        .await
        .expect("cancel");
    let ready = l
        .jobs()
        .list(&JobFilter {
            state: Some(JobState::Ready),
            ..JobFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(
        ready.iter().map(|j| j.key.to_string()).collect::<Vec<_>>(),
        ["a:2026-10-25", "a:2026-10-24"]
    );
    let b = l
        .jobs()
        .list(&JobFilter {
            report: Some("b".into()),
            ..JobFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(b.len(), 1);
    let counts = l.jobs().count_by_state().await.expect("counts");
    assert_eq!(counts, [(JobState::Cancelled, 1), (JobState::Ready, 2)]);
}

async fn terminal_before_finds_only_finished_old_work(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["old:2026-10-25", "new:2026-10-25", "live:2026-10-25"]).await;
    l.jobs()
        .cancel(
            &jk("old:2026-10-25"),
            &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
            t0(),
        )
        .await
        .expect("cancel");
    l.jobs()
        .cancel(
            &jk("new:2026-10-25"),
            &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
            t0() + Duration::days(5),
        )
        .await
        .expect("cancel");
    let found = l
        .retention()
        .terminal_before(t0() + Duration::days(1), 100)
        .await
        .expect("query");
    assert_eq!(
        found.iter().map(|j| j.key.to_string()).collect::<Vec<_>>(),
        ["old:2026-10-25"]
    );
    let all = l
        .retention()
        .terminal_before(t0() + Duration::days(30), 100)
        .await
        .expect("query");
    assert_eq!(all.len(), 2, "a ready job is never returned, however old");
}

async fn schedule_tick_never_moves_backwards(t: &TestLedger) {
    let l = &t.ledger;
    assert_eq!(l.ticks().last("a").await.expect("get"), None);
    l.ticks().record("a", t0()).await.expect("record");
    l.ticks()
        .record("a", t0() - Duration::hours(1))
        .await
        .expect("record older");
    assert_eq!(l.ticks().last("a").await.expect("get"), Some(t0()));
    l.ticks()
        .record("a", t0() + Duration::hours(1))
        .await
        .expect("record newer");
    assert_eq!(
        l.ticks().last("a").await.expect("get"),
        Some(t0() + Duration::hours(1))
    );
}

async fn delivery_lease_carries_its_job(t: &TestLedger) {
    let l = &t.ledger;
    rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let later = t0() + Duration::hours(1);
    let rescued = l
        .leases()
        .rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.deliveries, 2);
    let leased = l
        .leases()
        .deliveries(&params("w2", later, 10))
        .await
        .expect("lease");
    assert_eq!(leased.len(), 2);
    for d in &leased {
        let job = d.job.as_deref().expect("the job comes with its delivery");
        assert_eq!(job.key, "w:2026-10-25");
        assert_eq!(job.artifact, Some(artifact()));
        assert_eq!(job.key.date().to_string(), "2026-10-25");
    }
    let (a, b) = (&leased[0].job, &leased[1].job);
    assert!(
        a.as_ref()
            .zip(b.as_ref())
            .is_some_and(|(a, b)| std::sync::Arc::ptr_eq(a, b)),
        "deliveries of one job share one job value"
    );
}

on_both_backends!(
    redrive_is_audited_and_keeps_keys,
    job_redrive_returns_quarantined_deliveries,
    rescue_returns_expired_deliveries_and_explains,
    cancel_only_from_ready_or_quarantined,
    lists_filter_by_state_and_report,
    terminal_before_finds_only_finished_old_work,
    schedule_tick_never_moves_backwards,
    delivery_lease_carries_its_job,
);
