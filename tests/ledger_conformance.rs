//! One conformance suite for the ledger, run against SQLite always and PostgreSQL when
//! `DAWNPOST_TEST_POSTGRES_URL` is set. Each test exercises one store behaviour, refusals included.

mod common;
use common::{dk, jk};

use chrono::Duration;
use common::fixtures::*;
use common::{TestLedger, at};
use dawnpost::keys::DeliveryKey;
use dawnpost::ledger::DeliveryLease;
use dawnpost::ledger::{
    DeliveryNext, DeliveryState, Finish, JobFilter, JobState, LedgerError, NewJob, Render,
    RescueBudget, ResponseClass,
};
use dawnpost::schedule::Window;

async fn duplicate_job_keys_insert_nothing(t: &TestLedger) {
    let l = &t.ledger;
    let first = l
        .job_insert_many(
            &[
                new_job("a", "2026-10-25", t0()),
                new_job("b", "2026-10-25", t0()),
            ],
            t0(),
        )
        .await
        .expect("insert");
    assert_eq!(first.len(), 2);
    // A repeated key, inside one batch and across batches, inserts nothing and changes nothing.
    let later = t0() + Duration::hours(1);
    let second = l
        .job_insert_many(
            &[
                new_job("a", "2026-10-25", later),
                new_job("c", "2026-10-25", later),
                new_job("c", "2026-10-25", later),
            ],
            later,
        )
        .await
        .expect("insert again");
    assert_eq!(second, vec!["c:2026-10-25".to_string()]);
    let a = l
        .job_get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        a.ready_at,
        t0(),
        "the duplicate must not overwrite the first row"
    );
    assert_eq!(
        l.job_list(&JobFilter::default()).await.expect("list").len(),
        3
    );
}

async fn job_round_trips_instants_and_fields(t: &TestLedger) {
    let l = &t.ledger;
    let mut j = new_job(
        "warehouse-17",
        "2026-10-25",
        t0() + Duration::milliseconds(7),
    );
    j.window = Window {
        start: at(2026, 10, 23, 22, 0),
        end: at(2026, 10, 24, 22, 0),
    };
    l.job_insert_many(&[j], t0()).await.expect("insert");
    let job = l
        .job_get(&jk("warehouse-17:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.report, "warehouse-17");
    assert_eq!(job.date, "2026-10-25");
    assert_eq!(job.state, JobState::Ready);
    assert_eq!(job.origin, "schedule");
    assert_eq!(
        job.ready_at,
        t0() + Duration::milliseconds(7),
        "instants keep milliseconds"
    );
    assert_eq!(job.window.start, at(2026, 10, 23, 22, 0));
    assert_eq!(job.window.end, at(2026, 10, 24, 22, 0));
    assert_eq!(job.attempts, 0);
    assert!(job.artifact.is_none());
    assert!(
        l.job_get(&jk("nope:2026-10-25"))
            .await
            .expect("get")
            .is_none()
    );
}

async fn lease_takes_only_due_ready_jobs_up_to_limit(t: &TestLedger) {
    let l = &t.ledger;
    let jobs = vec![
        new_job("a", "2026-10-25", t0() - Duration::minutes(2)),
        new_job("b", "2026-10-25", t0() - Duration::minutes(1)),
        new_job("c", "2026-10-25", t0()),
        new_job("d", "2026-10-25", t0() + Duration::minutes(1)),
    ];
    l.job_insert_many(&jobs, t0()).await.expect("insert");
    let leased = l.job_lease(&params("w1", t0(), 2)).await.expect("lease");
    let keys: Vec<String> = leased.iter().map(|j| j.job.key.to_string()).collect();
    assert_eq!(
        keys,
        ["a:2026-10-25", "b:2026-10-25"],
        "oldest ready_at first, at most limit"
    );
    for j in &leased {
        assert_eq!(j.job.state, JobState::Rendering);
        assert_eq!(j.job.attempts, 1);
        assert_eq!(j.lease.token(), 1);
        assert_eq!(j.job.lease_owner.as_deref(), Some("w1"));
        assert_eq!(j.job.lease_expires_at, Some(t0() + Duration::minutes(5)));
    }
    let rest = l.job_lease(&params("w2", t0(), 10)).await.expect("lease");
    assert_eq!(rest.len(), 1, "d is not due yet");
    assert_eq!(rest[0].job.key, "c:2026-10-25");
    assert!(
        l.job_lease(&params("w2", t0(), 10))
            .await
            .expect("lease")
            .is_empty()
    );
}

async fn concurrent_leases_never_share_a_job(t: &TestLedger) {
    let jobs: Vec<NewJob> = (0..60)
        .map(|i| new_job(&format!("r{i}"), "2026-10-25", t0()))
        .collect();
    t.ledger.job_insert_many(&jobs, t0()).await.expect("insert");
    let other = t.reopen().await;
    let mut tasks = Vec::new();
    for w in 0..6 {
        let l = if w % 2 == 0 {
            t.ledger.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = l
                    .job_lease(&params(&format!("w{w}"), t0(), 4))
                    .await
                    .expect("lease");
                if batch.is_empty() {
                    break got;
                }
                got.extend(batch.into_iter().map(|j| j.job.key));
            }
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("join"));
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(n, 60, "every job leased");
    assert_eq!(all.len(), 60, "no job leased twice");
    other.close().await;
}

async fn fenced_out_lease_cannot_write(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(&[new_job("a", "2026-10-25", t0())], t0())
        .await
        .expect("insert");
    let old = l
        .job_lease(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    // The lease expires and the rescuer returns the job.
    let later = t0() + Duration::minutes(6);
    let rescued = l
        .lease_rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.jobs, 1);
    let job = l
        .job_get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.state, JobState::Ready);

    // The old owner wakes up: every write of its lease is refused.
    let lost = |r: Result<(), LedgerError>| matches!(r, Err(LedgerError::LeaseLost { .. }));
    assert!(lost(
        l.job_rendered(
            &old,
            &artifact(),
            &destinations("a:2026-10-25", &["x@example.com"]),
            later
        )
        .await
    ));
    assert!(lost(l.job_retry(&old, later, "x", later).await));
    assert!(lost(l.job_quarantine(&old, "x", later).await));
    assert!(lost(
        l.job_extend_lease(&old, later + Duration::hours(1)).await
    ));

    // Another worker takes it; the token grew, and the old token stays refused.
    let new = l
        .job_lease(&params("w2", later, 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    assert_eq!(new.token(), old.token() + 1);
    assert!(lost(l.job_rendered(&old, &artifact(), &[], later).await));
    l.job_rendered(
        &new,
        &artifact(),
        &destinations("a:2026-10-25", &["x@example.com"]),
        later,
    )
    .await
    .expect("the current owner may write");
    let job = l
        .job_get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.state, JobState::Delivering);
    assert_eq!(job.attempts, 2);
    assert!(
        l.delivery_list(&jk("a:2026-10-25"))
            .await
            .expect("list")
            .len()
            == 1,
        "no deliveries from the old owner"
    );
}

async fn extended_lease_is_not_rescued(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(&[new_job("a", "2026-10-25", t0())], t0())
        .await
        .expect("insert");
    let lease = l
        .job_lease(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.job_extend_lease(&lease, t0() + Duration::minutes(20))
        .await
        .expect("extend");
    assert_eq!(
        l.lease_rescue(t0() + Duration::minutes(10), &RescueBudget::default())
            .await
            .expect("rescue")
            .jobs,
        0
    );
    assert_eq!(
        l.job_get(&jk("a:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Rendering
    );
    assert_eq!(
        l.lease_rescue(t0() + Duration::minutes(21), &RescueBudget::default())
            .await
            .expect("rescue")
            .jobs,
        1
    );
}

async fn render_retry_and_quarantine(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(
        &[
            new_job("a", "2026-10-25", t0()),
            new_job("b", "2026-10-25", t0()),
        ],
        t0(),
    )
    .await
    .expect("insert");
    let leased = l.job_lease(&params("w1", t0(), 2)).await.expect("lease");
    let retry_at = t0() + Duration::minutes(3);
    l.job_retry(&leased[0].lease, retry_at, "source answered 503", t0())
        .await
        .expect("retry");
    l.job_quarantine(&leased[1].lease, "template: missing field data.rows", t0())
        .await
        .expect("quarantine");
    let a = l
        .job_get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (a.state, a.ready_at, a.last_error.as_deref()),
        (JobState::Ready, retry_at, Some("source answered 503"))
    );
    assert!(
        l.job_lease(&params("w1", t0() + Duration::minutes(2), 5))
            .await
            .expect("lease")
            .is_empty()
    );
    assert_eq!(
        l.job_lease(&params("w1", retry_at, 5))
            .await
            .expect("lease")
            .len(),
        1
    );
    let b = l
        .job_get(&jk("b:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(b.state, JobState::Quarantined);
    assert_eq!(b.terminal_at, Some(t0()));
    // A quarantined job is never leased again without a redrive.
    assert!(
        l.job_lease(&params("w1", t0() + Duration::days(1), 5))
            .await
            .expect("lease")
            .iter()
            .all(|j| j.job.key != "b:2026-10-25")
    );
}

async fn release_does_not_count_an_attempt(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(&[new_job("a", "2026-10-25", t0())], t0())
        .await
        .expect("insert");
    let lease = l
        .job_lease(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.job_release(&lease, t0()).await.expect("release");
    let a = l
        .job_get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!((a.state, a.attempts), (JobState::Ready, 0));

    let leases = rendered_job(t, "b:2026-10-25", &["x@example.com"]).await;
    l.delivery_release(&leases[0], t0()).await.expect("release");
    let d = l
        .delivery_get(leases[0].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0));
    assert!(l.attempt_list(&d.key).await.expect("attempts").is_empty());
    assert!(matches!(
        l.delivery_release(&leases[0], t0()).await,
        Err(LedgerError::LeaseLost { .. })
    ));
}

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
        .job_get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Delivering);
    assert_eq!(job.artifact, Some(artifact()));
    let deliveries = l.delivery_list(&jk("w:2026-10-25")).await.expect("list");
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
    l.job_insert_many(&[new_job("empty", "2026-10-25", t0())], t0())
        .await
        .expect("insert");
    let lease = l
        .job_lease(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.job_rendered(&lease, &artifact(), &[], t0())
        .await
        .expect("rendered");
    let empty = l
        .job_get(&jk("empty:2026-10-25"))
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
    l.delivery_finish(
        lease,
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    let d = l
        .delivery_get(lease.key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Sent);
    assert_eq!(d.last_class, Some(ResponseClass::Accepted));

    // Nothing moves it back: not a late retry, a release, a rescue, a redrive or a new lease.
    let later = t0() + Duration::hours(1);
    let lost = |r: Result<(), LedgerError>| matches!(r, Err(LedgerError::LeaseLost { .. }));
    assert!(lost(
        l.delivery_finish(
            lease,
            &attempt(ResponseClass::Transient, later),
            DeliveryNext::Retry { ready_at: later }
        )
        .await
    ));
    assert!(lost(l.delivery_release(lease, later).await));
    assert_eq!(
        l.lease_rescue(later, &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        0
    );
    assert!(matches!(
        l.delivery_redrive(lease.key(), "ops", "why not", later)
            .await,
        Err(LedgerError::WrongState {
            expected: "quarantined",
            ..
        })
    ));
    assert!(
        l.delivery_lease(&params("w2", later, 10))
            .await
            .expect("lease")
            .is_empty()
    );
    let d = l
        .delivery_get(lease.key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Sent);
    assert_eq!(
        l.attempt_list(lease.key()).await.expect("attempts").len(),
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
    l.delivery_finish(
        &leases[0],
        &first,
        DeliveryNext::Retry { ready_at: retry_at },
    )
    .await
    .expect("retry");
    assert!(
        l.delivery_lease(&params("w1", retry_at - Duration::milliseconds(1), 10))
            .await
            .expect("lease")
            .is_empty()
    );
    let again = l
        .delivery_lease(&params("w1", retry_at, 10))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].lease.token(), leases[0].token() + 1);
    l.delivery_finish(
        &again[0].lease,
        &attempt(ResponseClass::Accepted, retry_at),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    let attempts = l.attempt_list(leases[0].key()).await.expect("attempts");
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
    l.delivery_finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    assert_eq!(
        l.job_settle(&jk("w:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Delivering,
        "one still in flight"
    );
    l.delivery_finish(
        &leases[1],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    assert_eq!(
        l.job_settle(&jk("w:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Done
    );

    let leases = rendered_job(t, "q:2026-10-25", &["a@example.com", "b@example.com"]).await;
    l.delivery_finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    l.delivery_finish(
        &leases[1],
        &attempt(ResponseClass::Permanent, t0()),
        DeliveryNext::Quarantine,
    )
    .await
    .expect("quarantine");
    assert_eq!(
        l.job_settle(&jk("q:2026-10-25"), t0())
            .await
            .expect("settle"),
        JobState::Quarantined
    );
    let q = l
        .job_get(&jk("q:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(q.terminal_at, Some(t0()));
    assert_eq!(l.delivery_list_quarantined(10).await.expect("dlq").len(), 1);
}

async fn redrive_is_audited_and_keeps_keys(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    l.delivery_finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    l.delivery_finish(
        &leases[1],
        &attempt(ResponseClass::Permanent, t0()),
        DeliveryNext::Quarantine,
    )
    .await
    .expect("quarantine");
    l.job_settle(&jk("w:2026-10-25"), t0())
        .await
        .expect("settle");

    let later = t0() + Duration::hours(2);
    let out = l
        .delivery_redrive(leases[1].key(), "alice", "mailbox fixed by carrier", later)
        .await
        .expect("redrive");
    assert_eq!(out.job_key, "w:2026-10-25");
    let d = l
        .delivery_get(leases[1].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(
        (d.state, d.redrive_count, d.ready_at),
        (DeliveryState::Pending, 1, later)
    );
    assert_eq!(
        l.job_get(&jk("w:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Delivering
    );
    let audit = l.redrive_list(&jk("w:2026-10-25")).await.expect("redrives");
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
        .delivery_lease(&params("w1", later, 10))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    assert_eq!(&again[0].delivery.key, leases[1].key());
    assert_eq!(again[0].delivery.budget_attempts_used(), 1);
    l.delivery_finish(
        &again[0].lease,
        &attempt(ResponseClass::Accepted, later),
        DeliveryNext::Sent,
    )
    .await
    .expect("the redriven delivery records its attempt");
    let numbers: Vec<i64> = l
        .attempt_list(leases[1].key())
        .await
        .expect("attempts")
        .iter()
        .map(|a| a.attempt)
        .collect();
    assert_eq!(numbers, [1, 2]);
    assert!(matches!(
        l.delivery_redrive(leases[1].key(), "alice", "again", later)
            .await,
        Err(LedgerError::WrongState { .. })
    ));
    assert!(matches!(
        l.delivery_redrive(
            &dk("nope:2026-10-25/email:x@example.com"),
            "alice",
            "x",
            later
        )
        .await,
        Err(LedgerError::NotFound { .. })
    ));

    // A job quarantined at render goes back to ready.
    l.job_insert_many(&[new_job("r", "2026-10-25", t0())], t0())
        .await
        .expect("insert");
    let lease = l
        .job_lease(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.job_quarantine(&lease, "bad template", t0())
        .await
        .expect("quarantine");
    l.job_redrive(&jk("r:2026-10-25"), "bob", "template fixed", later)
        .await
        .expect("redrive job");
    let r = l
        .job_get(&jk("r:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (r.state, r.redrive_count, r.terminal_at),
        (JobState::Ready, 1, None)
    );
    assert!(matches!(
        l.job_redrive(&jk("r:2026-10-25"), "bob", "twice", later)
            .await,
        Err(LedgerError::WrongState {
            expected: "quarantined",
            ..
        })
    ));
    assert_eq!(
        l.redrive_list(&jk("r:2026-10-25")).await.expect("redrives")[0].delivery_key,
        None
    );
}

async fn job_redrive_returns_quarantined_deliveries(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    l.delivery_finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    l.delivery_finish(
        &leases[1],
        &attempt(ResponseClass::Permanent, t0()),
        DeliveryNext::Quarantine,
    )
    .await
    .expect("quarantine");
    l.job_settle(&jk("w:2026-10-25"), t0())
        .await
        .expect("settle");
    let out = l
        .job_redrive(&jk("w:2026-10-25"), "ops", "receiver fixed", t0())
        .await
        .expect("redrive");
    assert_eq!(out.deliveries, 1, "only the quarantined delivery returns");
    let states: Vec<DeliveryState> = l
        .delivery_list(&jk("w:2026-10-25"))
        .await
        .expect("list")
        .iter()
        .map(|d| d.state)
        .collect();
    assert_eq!(states, [DeliveryState::Sent, DeliveryState::Pending]);
    assert_eq!(
        l.job_get(&jk("w:2026-10-25"))
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
        l.lease_rescue(t0() + Duration::minutes(4), &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        0
    );
    assert_eq!(
        l.lease_rescue(later, &RescueBudget::default())
            .await
            .expect("rescue")
            .deliveries,
        1
    );
    let d = l
        .delivery_get(leases[0].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(
        (d.state, d.attempts),
        (DeliveryState::Pending, 1),
        "the lost attempt still counts"
    );
    let attempts = l.attempt_list(leases[0].key()).await.expect("attempts");
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
        l.delivery_finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, later),
            DeliveryNext::Sent
        )
        .await,
        Err(LedgerError::LeaseLost { .. })
    ));
    let next = l
        .delivery_lease(&params("w2", later, 1))
        .await
        .expect("lease")
        .remove(0);
    l.delivery_finish(
        &next.lease,
        &attempt(ResponseClass::Accepted, later),
        DeliveryNext::Sent,
    )
    .await
    .expect("new owner records");
    let numbers: Vec<i64> = l
        .attempt_list(leases[0].key())
        .await
        .expect("attempts")
        .iter()
        .map(|a| a.attempt)
        .collect();
    assert_eq!(numbers, [1, 2]);
}

async fn cancel_only_from_ready_or_quarantined(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(
        &[
            new_job("a", "2026-10-25", t0()),
            new_job("b", "2026-10-25", t0()),
        ],
        t0(),
    )
    .await
    .expect("insert");
    l.job_cancel(&jk("a:2026-10-25"), t0())
        .await
        .expect("cancel ready");
    assert_eq!(
        l.job_get(&jk("a:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Cancelled
    );
    let _lease = l.job_lease(&params("w1", t0(), 1)).await.expect("lease");
    assert!(matches!(
        l.job_cancel(&jk("b:2026-10-25"), t0()).await,
        Err(LedgerError::WrongState {
            expected: "ready or quarantined",
            ..
        })
    ));
    assert!(matches!(
        l.job_cancel(&jk("zz:2026-10-25"), t0()).await,
        Err(LedgerError::NotFound { .. })
    ));
}

async fn lists_filter_by_state_and_report(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(
        &[
            new_job("a", "2026-10-24", t0()),
            new_job("a", "2026-10-25", t0()),
            new_job("b", "2026-10-25", t0()),
        ],
        t0(),
    )
    .await
    .expect("insert");
    l.job_cancel(&jk("b:2026-10-25"), t0())
        .await
        .expect("cancel");
    let ready = l
        .job_list(&JobFilter {
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
        .job_list(&JobFilter {
            report: Some("b".into()),
            ..JobFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(b.len(), 1);
    let counts = l.job_count_by_state().await.expect("counts");
    assert_eq!(counts, [(JobState::Cancelled, 1), (JobState::Ready, 2)]);
}

async fn terminal_before_finds_only_finished_old_work(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(
        &[
            new_job("old", "2026-10-25", t0()),
            new_job("new", "2026-10-25", t0()),
            new_job("live", "2026-10-25", t0()),
        ],
        t0(),
    )
    .await
    .expect("insert");
    l.job_cancel(&jk("old:2026-10-25"), t0())
        .await
        .expect("cancel");
    l.job_cancel(&jk("new:2026-10-25"), t0() + Duration::days(5))
        .await
        .expect("cancel");
    let found = l
        .job_terminal_before(t0() + Duration::days(1), 100)
        .await
        .expect("query");
    assert_eq!(
        found.iter().map(|j| j.key.to_string()).collect::<Vec<_>>(),
        ["old:2026-10-25"]
    );
    let all = l
        .job_terminal_before(t0() + Duration::days(30), 100)
        .await
        .expect("query");
    assert_eq!(all.len(), 2, "a ready job is never returned, however old");
}

async fn schedule_tick_never_moves_backwards(t: &TestLedger) {
    let l = &t.ledger;
    assert_eq!(l.schedule_last_tick("a").await.expect("get"), None);
    l.schedule_record_tick("a", t0()).await.expect("record");
    l.schedule_record_tick("a", t0() - Duration::hours(1))
        .await
        .expect("record older");
    assert_eq!(l.schedule_last_tick("a").await.expect("get"), Some(t0()));
    l.schedule_record_tick("a", t0() + Duration::hours(1))
        .await
        .expect("record newer");
    assert_eq!(
        l.schedule_last_tick("a").await.expect("get"),
        Some(t0() + Duration::hours(1))
    );
}

async fn delivery_lease_carries_its_job(t: &TestLedger) {
    let l = &t.ledger;
    rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let later = t0() + Duration::hours(1);
    let rescued = l
        .lease_rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.deliveries, 2);
    let leased = l
        .delivery_lease(&params("w2", later, 10))
        .await
        .expect("lease");
    assert_eq!(leased.len(), 2);
    for d in &leased {
        let job = d.job.as_deref().expect("the job comes with its delivery");
        assert_eq!(job.key, "w:2026-10-25");
        assert_eq!(job.artifact, Some(artifact()));
        assert_eq!(job.date, "2026-10-25");
    }
    let (a, b) = (&leased[0].job, &leased[1].job);
    assert!(
        a.as_ref()
            .zip(b.as_ref())
            .is_some_and(|(a, b)| std::sync::Arc::ptr_eq(a, b)),
        "deliveries of one job share one job value"
    );
}

/// A batch records each finish as `delivery_finish` would, in one transaction: a lost lease
/// in it is refused alone, and settling the batch's jobs afterwards finishes exactly those
/// whose deliveries are all terminal.
async fn finish_many_records_each_and_refuses_lost_leases(t: &TestLedger) {
    let l = &t.ledger;
    let w = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let q = rendered_job(t, "q:2026-10-25", &["a@example.com"]).await;
    let r = rendered_job(t, "r:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let retry_at = t0() + Duration::minutes(1);
    // A lease no longer held: r[1] released, then leased again by another worker.
    let stale = r[1].clone();
    l.delivery_release(&stale, t0()).await.expect("release");
    let relet = l
        .delivery_lease(&params("w2", t0(), 10))
        .await
        .expect("lease again");
    assert_eq!(relet.len(), 1);
    let finish = |lease: &DeliveryLease, class, next| Finish {
        lease: lease.clone(),
        attempt: attempt(class, t0()),
        next,
    };
    let results = l
        .delivery_finish_many(&[
            finish(&w[0], ResponseClass::Accepted, DeliveryNext::Sent),
            finish(&w[1], ResponseClass::Accepted, DeliveryNext::Sent),
            finish(&q[0], ResponseClass::Permanent, DeliveryNext::Quarantine),
            finish(
                &r[0],
                ResponseClass::Transient,
                DeliveryNext::Retry { ready_at: retry_at },
            ),
            finish(&stale, ResponseClass::Accepted, DeliveryNext::Sent),
        ])
        .await
        .expect("batch");
    assert_eq!(results.len(), 5);
    assert!(results[..4].iter().all(Result::is_ok), "{results:?}");
    assert!(matches!(results[4], Err(LedgerError::LeaseLost { .. })));

    let state = |key: &DeliveryKey| {
        let key = key.clone();
        async move { l.delivery_get(&key).await.expect("get").expect("delivery") }
    };
    assert_eq!(state(w[0].key()).await.state, DeliveryState::Sent);
    assert_eq!(state(q[0].key()).await.state, DeliveryState::Quarantined);
    let retried = state(r[0].key()).await;
    assert_eq!(
        (retried.state, retried.ready_at),
        (DeliveryState::Pending, retry_at)
    );
    assert_eq!(
        state(r[1].key()).await.state,
        DeliveryState::Sending,
        "the stale lease changed nothing"
    );
    assert!(
        l.attempt_list(r[1].key())
            .await
            .expect("attempts")
            .is_empty()
    );
    let attempts = l.attempt_list(r[0].key()).await.expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (attempts[0].attempt, attempts[0].next_ready_at),
        (1, Some(retry_at))
    );
    assert_eq!(
        attempts[0].diagnostics.as_deref(),
        Some("<- 250 2.0.0 queued")
    );

    let settled = l
        .job_settle_many(
            &[
                &jk("w:2026-10-25"),
                &jk("q:2026-10-25"),
                &jk("r:2026-10-25"),
            ],
            t0(),
        )
        .await
        .expect("settle");
    assert_eq!(settled, 2, "r still has deliveries to send");
    let job =
        |key: &'static str| async move { l.job_get(&jk(key)).await.expect("get").expect("job") };
    assert_eq!(job("w:2026-10-25").await.state, JobState::Done);
    assert_eq!(job("q:2026-10-25").await.state, JobState::Quarantined);
    assert_eq!(job("r:2026-10-25").await.state, JobState::Delivering);
    assert!(l.delivery_finish_many(&[]).await.expect("empty").is_empty());
}

/// A worker that recorded a job's last delivery and stopped before settling the job leaves it
/// delivering; the rescuer settles it.
async fn rescue_settles_jobs_with_nothing_left_to_send(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com"]).await;
    l.delivery_finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    )
    .await
    .expect("sent");
    let job = l
        .job_get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Delivering, "not settled yet");
    let other = rendered_job(t, "x:2026-10-25", &["a@example.com"]).await;
    assert_eq!(other.len(), 1);
    let later = t0() + Duration::minutes(1);
    let rescued = l
        .lease_rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.settled, 1, "{rescued:?}");
    let job = l
        .job_get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!((job.state, job.terminal_at), (JobState::Done, Some(later)));
    let busy = l
        .job_get(&jk("x:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        busy.state,
        JobState::Delivering,
        "a job still sending stays"
    );
}

/// A batch of renders records each as `job_rendered` would, in one transaction: a lost lease
/// in it is refused alone and creates no deliveries.
async fn rendered_many_records_each_and_refuses_lost_leases(t: &TestLedger) {
    let l = &t.ledger;
    l.job_insert_many(
        &[
            new_job("a", "2026-10-25", t0()),
            new_job("b", "2026-10-25", t0()),
            new_job("c", "2026-10-25", t0()),
        ],
        t0(),
    )
    .await
    .expect("insert");
    let leased = l.job_lease(&params("w1", t0(), 10)).await.expect("lease");
    assert_eq!(leased.len(), 3);
    let lease = |key: &str| {
        leased
            .iter()
            .find(|j| j.job.key == key)
            .expect("leased")
            .lease
            .clone()
    };
    // A lease no longer held: c released, then leased again by another worker.
    let stale = lease("c:2026-10-25");
    l.job_release(&stale, t0()).await.expect("release");
    let relet = l
        .job_lease(&params("w2", t0(), 10))
        .await
        .expect("lease again");
    assert_eq!(relet.len(), 1);
    let results = l
        .job_rendered_many(
            &[
                Render {
                    lease: lease("a:2026-10-25"),
                    artifact: artifact(),
                    deliveries: destinations("a:2026-10-25", &["x@example.com", "y@example.com"]),
                },
                Render {
                    lease: lease("b:2026-10-25"),
                    artifact: artifact(),
                    deliveries: Vec::new(),
                },
                Render {
                    lease: stale,
                    artifact: artifact(),
                    deliveries: destinations("c:2026-10-25", &["x@example.com"]),
                },
            ],
            t0(),
        )
        .await
        .expect("batch");
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(matches!(results[2], Err(LedgerError::LeaseLost { .. })));
    let job =
        |key: &'static str| async move { l.job_get(&jk(key)).await.expect("get").expect("job") };
    let a = job("a:2026-10-25").await;
    assert_eq!(
        (a.state, a.artifact),
        (JobState::Delivering, Some(artifact()))
    );
    assert_eq!(
        l.delivery_list(&jk("a:2026-10-25"))
            .await
            .expect("list")
            .len(),
        2
    );
    assert_eq!(
        job("b:2026-10-25").await.state,
        JobState::Done,
        "no destinations: done at once"
    );
    let c = job("c:2026-10-25").await;
    assert_eq!(
        (c.state, c.artifact),
        (JobState::Rendering, None),
        "the stale lease changed nothing"
    );
    assert!(
        l.delivery_list(&jk("c:2026-10-25"))
            .await
            .expect("list")
            .is_empty()
    );
    assert!(
        l.job_rendered_many(&[], t0())
            .await
            .expect("empty")
            .is_empty()
    );
}

on_both_backends!(
    duplicate_job_keys_insert_nothing,
    job_round_trips_instants_and_fields,
    lease_takes_only_due_ready_jobs_up_to_limit,
    concurrent_leases_never_share_a_job,
    fenced_out_lease_cannot_write,
    extended_lease_is_not_rescued,
    render_retry_and_quarantine,
    release_does_not_count_an_attempt,
    rendered_job_gets_artifact_and_one_delivery_per_destination,
    sent_is_final,
    retry_waits_for_ready_at_and_numbers_attempts,
    settle_follows_deliveries,
    redrive_is_audited_and_keeps_keys,
    job_redrive_returns_quarantined_deliveries,
    rescue_returns_expired_deliveries_and_explains,
    cancel_only_from_ready_or_quarantined,
    lists_filter_by_state_and_report,
    terminal_before_finds_only_finished_old_work,
    schedule_tick_never_moves_backwards,
    delivery_lease_carries_its_job,
    finish_many_records_each_and_refuses_lost_leases,
    rescue_settles_jobs_with_nothing_left_to_send,
    rendered_many_records_each_and_refuses_lost_leases,
);
