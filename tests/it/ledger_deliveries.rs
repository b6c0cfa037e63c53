//! The ledger's conformance suite, part 2 — a rendered job's deliveries: created with the
//! artifact, sent, retried, settled — on both backends (see `ledger_conformance.rs`).

use crate::common;
use common::jk;

use chrono::Duration;
use common::TestLedger;
use common::fixtures::*;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{DeliveryNext, DeliveryState, JobState, LedgerError, RescueBudget};

async fn rendered_job_gets_artifact_and_one_delivery_per_destination(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(
        t,
        "w:2026-10-25",
        &["a@example.com", "b@example.com", "c@example.com"],
    )
    .await;
    assert_eq!(leases.len(), 3);
    let job = l
        .jobs()
        .get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Delivering);
    assert_eq!(job.artifact, Some(artifact()));
    let deliveries = l
        .deliveries()
        .list(&jk("w:2026-10-25"))
        .await
        .expect("list");
    let keys: Vec<String> = deliveries.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "w:2026-10-25/email:a@example.com",
            "w:2026-10-25/email:b@example.com",
            "w:2026-10-25/email:c@example.com"
        ]
    );
    assert!(
        deliveries
            .iter()
            .all(|d| d.state == DeliveryState::Sending && d.attempts == 1)
    );

    // A job without destinations is done at once.
    ready_jobs(t, &["empty:2026-10-25"]).await;
    let lease = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.jobs()
        .rendered(&lease, &artifact(), &[], t0())
        .await
        .expect("rendered");
    let empty = l
        .jobs()
        .get(&jk("empty:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (empty.state, empty.terminal_at),
        (JobState::Done, Some(t0()))
    );
}

async fn sent_is_final(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com"]).await;
    let lease = &leases[0];
    l.deliveries()
        .finish(
            lease,
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    let d = l
        .deliveries()
        .get(lease.key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Sent);
    assert_eq!(d.last_class, Some(ResponseClass::Accepted));

    // Nothing moves it back: not a late retry, a release, a rescue, a redrive or a new lease.
    let later = t0() + Duration::hours(1);
    let lost = |r: Result<(), LedgerError>| matches!(r, Err(LedgerError::LeaseLost { .. }));
    assert!(lost(
        l.deliveries()
            .finish(
                lease,
                &attempt(ResponseClass::Transient, later),
                DeliveryNext::Retry { ready_at: later }
            )
            .await
    ));
    assert!(lost(l.deliveries().release(lease, later).await));
    assert_eq!(
        l.leases()
            .rescue(later, &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        0
    );
    assert!(matches!(
        l.deliveries()
            .redrive(
                lease.key(),
                &Audit::new("ops", "why not", Via::Cli).expect("audited"),
                later
            )
            .await,
        Err(LedgerError::WrongState {
            expected: "quarantined",
            ..
        })
    ));
    assert!(
        l.leases()
            .deliveries(&params("w2", later, 10))
            .await
            .expect("lease")
            .is_empty()
    );
    let d = l
        .deliveries()
        .get(lease.key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Sent);
    assert_eq!(
        l.deliveries()
            .attempts(lease.key())
            .await
            .expect("attempts")
            .len(),
        1
    );
}

async fn retry_waits_for_ready_at_and_numbers_attempts(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com"]).await;
    let retry_at = t0() + Duration::seconds(30);
    let mut first = attempt(ResponseClass::RateLimited, t0());
    first.code = Some(429);
    first.retry_after = Some(Duration::seconds(30));
    l.deliveries()
        .finish(
            &leases[0],
            &first,
            DeliveryNext::Retry { ready_at: retry_at },
        )
        .await
        .expect("retry");
    assert!(
        l.leases()
            .deliveries(&params("w1", retry_at - Duration::milliseconds(1), 10))
            .await
            .expect("lease")
            .is_empty()
    );
    let again = l
        .leases()
        .deliveries(&params("w1", retry_at, 10))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].lease.token(), leases[0].token() + 1);
    l.deliveries()
        .finish(
            &again[0].lease,
            &attempt(ResponseClass::Accepted, retry_at),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    let attempts = l
        .deliveries()
        .attempts(leases[0].key())
        .await
        .expect("attempts");
    assert_eq!(
        attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(attempts[0].class, ResponseClass::RateLimited);
    assert_eq!(attempts[0].code, Some(429));
    assert_eq!(attempts[0].retry_after_ms, Some(30_000));
    assert_eq!(attempts[0].next_ready_at, Some(retry_at));
    assert_eq!(attempts[1].class, ResponseClass::Accepted);
    assert_eq!(
        attempts[1].finished_at,
        retry_at + Duration::milliseconds(120)
    );
}

async fn settle_follows_deliveries(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    l.deliveries()
        .finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    assert_eq!(
        l.jobs()
            .settle(&jk("w:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Delivering,
        "one still in flight"
    );
    l.deliveries()
        .finish(
            &leases[1],
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    assert_eq!(
        l.jobs()
            .settle(&jk("w:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Done
    );

    let leases = rendered_job(t, "q:2026-10-25", &["a@example.com", "b@example.com"]).await;
    sent_and_quarantined(t, &leases).await;
    assert_eq!(
        l.jobs()
            .settle(&jk("q:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Quarantined
    );
    let q = l
        .jobs()
        .get(&jk("q:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(q.terminal_at, Some(t0()));
    assert_eq!(l.deliveries().quarantined(10).await.expect("dlq").len(), 1);
}

on_both_backends!(
    rendered_job_gets_artifact_and_one_delivery_per_destination,
    sent_is_final,
    retry_waits_for_ready_at_and_numbers_attempts,
    settle_follows_deliveries,
);
