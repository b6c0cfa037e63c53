//! The ledger's conformance suite, part 1 — jobs and their leases — run against SQLite always
//! and PostgreSQL when `DAWNPOST_TEST_POSTGRES_URL` is set. Each test exercises one store
//! behaviour, refusals included. Part 2 (deliveries) is `ledger_deliveries.rs`, part 3
//! (operators and the rescuer) `ledger_operations.rs`, the batched reads, claims and finishes
//! `ledger_batches.rs`, the batched renders and commits of outcomes `ledger_outcomes.rs`.

use crate::common;
use common::jk;

use chrono::Duration;
use common::fixtures::*;
use common::{TestLedger, at};
use dawnpost::domain::window::Window;
use dawnpost::ledger::{DeliveryState, JobFilter, JobState, LedgerError, NewJob, RescueBudget};

async fn duplicate_job_keys_insert_nothing(t: &TestLedger) {
    let l = &t.ledger;
    let first = l
        .jobs()
        .insert_many(
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
        .jobs()
        .insert_many(
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
        .jobs()
        .get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(
        a.ready_at,
        t0(),
        "the duplicate must not overwrite the first row"
    );
    assert_eq!(
        l.jobs()
            .list(&JobFilter::default())
            .await
            .expect("list")
            .len(),
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
    l.jobs().insert_many(&[j], t0()).await.expect("insert");
    let job = l
        .jobs()
        .get(&jk("warehouse-17:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.key.report().as_str(), "warehouse-17");
    assert_eq!(job.key.date().to_string(), "2026-10-25");
    assert_eq!(job.state, JobState::Ready);
    assert_eq!(job.origin.as_str(), "schedule");
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
        l.jobs()
            .get(&jk("nope:2026-10-25"))
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
    l.jobs().insert_many(&jobs, t0()).await.expect("insert");
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 2))
        .await
        .expect("lease");
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
    let rest = l
        .leases()
        .jobs(&params("w2", t0(), 10))
        .await
        .expect("lease");
    assert_eq!(rest.len(), 1, "d is not due yet");
    assert_eq!(rest[0].job.key, "c:2026-10-25");
    assert!(
        l.leases()
            .jobs(&params("w2", t0(), 10))
            .await
            .expect("lease")
            .is_empty()
    );
}

async fn concurrent_leases_never_share_a_job(t: &TestLedger) {
    let jobs: Vec<NewJob> = (0..60)
        .map(|i| new_job(&format!("r{i}"), "2026-10-25", t0()))
        .collect();
    t.ledger
        .jobs()
        .insert_many(&jobs, t0())
        .await
        .expect("insert");
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
                    .leases()
                    .jobs(&params(&format!("w{w}"), t0(), 4))
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
    ready_jobs(t, &["a:2026-10-25"]).await;
    let old = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    // The lease expires and the rescuer returns the job.
    let later = t0() + Duration::minutes(6);
    let rescued = l
        .leases()
        .rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.jobs, 1);
    let job = l
        .jobs()
        .get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.state, JobState::Ready);

    // The old owner wakes up: every write of its lease is refused.
    let lost = |r: Result<(), LedgerError>| matches!(r, Err(LedgerError::LeaseLost { .. }));
    assert!(lost(
        l.jobs()
            .rendered(
                &old,
                &artifact(),
                &destinations("a:2026-10-25", &["x@example.com"]),
                later
            )
            .await
    ));
    assert!(lost(l.jobs().retry(&old, later, "x", later).await));
    assert!(lost(l.jobs().quarantine(&old, "x", later).await));
    assert!(lost(
        l.leases()
            .extend_job(&old, later + Duration::hours(1))
            .await
    ));

    // Another worker takes it; the token grew, and the old token stays refused.
    let new = l
        .leases()
        .jobs(&params("w2", later, 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    assert_eq!(new.token(), old.token() + 1);
    assert!(lost(l.jobs().rendered(&old, &artifact(), &[], later).await));
    l.jobs()
        .rendered(
            &new,
            &artifact(),
            &destinations("a:2026-10-25", &["x@example.com"]),
            later,
        )
        .await
        .expect("the current owner may write");
    let job = l
        .jobs()
        .get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.state, JobState::Delivering);
    assert_eq!(job.attempts, 2);
    assert!(
        l.deliveries()
            .list(&jk("a:2026-10-25"))
            .await
            .expect("list")
            .len()
            == 1,
        "no deliveries from the old owner"
    );
}

async fn extended_lease_is_not_rescued(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25"]).await;
    let lease = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.leases()
        .extend_job(&lease, t0() + Duration::minutes(20))
        .await
        .expect("extend");
    assert_eq!(
        l.leases()
            .rescue(t0() + Duration::minutes(10), &RescueBudget::default())
            .await
            .expect("rescue")
            .jobs,
        0
    );
    assert_eq!(
        l.jobs()
            .get(&jk("a:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Rendering
    );
    assert_eq!(
        l.leases()
            .rescue(t0() + Duration::minutes(21), &RescueBudget::default())
            .await
            .expect("rescue")
            .jobs,
        1
    );
}

async fn render_retry_and_quarantine(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 2))
        .await
        .expect("lease");
    let retry_at = t0() + Duration::minutes(3);
    l.jobs()
        .retry(&leased[0].lease, retry_at, "source answered 503", t0())
        .await
        .expect("retry");
    l.jobs()
        .quarantine(&leased[1].lease, "template: missing field data.rows", t0())
        .await
        .expect("quarantine");
    let a = l
        .jobs()
        .get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (a.state, a.ready_at, a.last_error.as_deref()),
        (JobState::Ready, retry_at, Some("source answered 503"))
    );
    assert!(
        l.leases()
            .jobs(&params("w1", t0() + Duration::minutes(2), 5))
            .await
            .expect("lease")
            .is_empty()
    );
    assert_eq!(
        l.leases()
            .jobs(&params("w1", retry_at, 5))
            .await
            .expect("lease")
            .len(),
        1
    );
    let b = l
        .jobs()
        .get(&jk("b:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(b.state, JobState::Quarantined);
    assert_eq!(b.terminal_at, Some(t0()));
    // A quarantined job is never leased again without a redrive.
    assert!(
        l.leases()
            .jobs(&params("w1", t0() + Duration::days(1), 5))
            .await
            .expect("lease")
            .iter()
            .all(|j| j.job.key != "b:2026-10-25")
    );
}

async fn release_does_not_count_an_attempt(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25"]).await;
    let lease = l
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease")
        .remove(0)
        .lease;
    l.jobs().release(&lease, t0()).await.expect("release");
    let a = l
        .jobs()
        .get(&jk("a:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!((a.state, a.attempts), (JobState::Ready, 0));

    let leases = rendered_job(t, "b:2026-10-25", &["x@example.com"]).await;
    l.deliveries()
        .release(&leases[0], t0())
        .await
        .expect("release");
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0));
    assert!(
        l.deliveries()
            .attempts(&d.key)
            .await
            .expect("attempts")
            .is_empty()
    );
    assert!(matches!(
        l.deliveries().release(&leases[0], t0()).await,
        Err(LedgerError::LeaseLost { .. })
    ));
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
);
