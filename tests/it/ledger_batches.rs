//! Batches, on both backends: reads of any number of keys in a few statements, across the
//! statement-size boundary (what `run --once`'s progress and summary use); claims whose size
//! changes from one to the next; and batched finishes, each recorded as its single form would
//! be, a lost lease refused alone, with the settles that follow them. The renders' batches and
//! a commit of outcomes with its claim are in `ledger_outcomes.rs`.

use crate::common;

use chrono::Duration;
use common::fixtures::*;
use common::{TestLedger, jk};
use dawnpost::domain::keys::{DeliveryKey, JobKey};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{
    DeliveryLease, DeliveryNext, DeliveryState, Finish, GroupCommit, JobState, LedgerError,
    RescueBudget,
};

async fn many_jobs_and_their_deliveries_in_few_reads(t: &TestLedger) {
    let l = &t.ledger;
    let n = 503;
    let jobs: Vec<_> = (0..n)
        .map(|i| new_job(&format!("r{i}"), "2026-10-25", t0()))
        .collect();
    l.jobs().insert_many(&jobs, t0()).await.expect("insert");
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), n as u32 + 10))
        .await
        .expect("lease");
    assert_eq!(leased.len(), n);
    for job in &leased {
        let key = job.job.key.to_string();
        l.jobs()
            .rendered(
                &job.lease,
                &artifact(),
                &destinations(&key, &["a@example.com", "b@example.com"]),
                t0(),
            )
            .await
            .expect("rendered");
    }
    let missing = jk("nobody:2026-10-25");
    let mut keys: Vec<&JobKey> = jobs.iter().map(|j| &j.key).collect();
    keys.push(&missing);

    let got = l.jobs().get_many(&keys).await.expect("jobs");
    assert_eq!(got.len(), n, "every job once, the missing key left out");
    let deliveries = l.deliveries().list_many(&keys).await.expect("deliveries");
    assert_eq!(deliveries.len(), 2 * n);
    let order: Vec<String> = deliveries.iter().map(|d| d.key.to_string()).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "ordered by key across statements");
    for job in &jobs {
        let of_job: Vec<String> = deliveries
            .iter()
            .filter(|d| d.key.job() == &job.key)
            .map(|d| d.key.to_string())
            .collect();
        assert_eq!(
            of_job,
            [
                format!("{}/email:a@example.com", job.key),
                format!("{}/email:b@example.com", job.key)
            ],
            "each job's deliveries, in key order"
        );
    }
    let some = l
        .deliveries()
        .list_many(&keys[..2])
        .await
        .expect("deliveries of two jobs");
    assert_eq!(some.len(), 4, "only the jobs asked for");
    assert!(
        l.deliveries()
            .list_many(&[])
            .await
            .expect("none")
            .is_empty(),
        "no keys, no deliveries"
    );
}

/// The pool asks for as many items as it has free slots, a different number almost every time:
/// each claim takes what it asked for, whatever the previous one asked.
async fn each_claim_takes_its_own_limit(t: &TestLedger) {
    let l = &t.ledger;
    let jobs: Vec<_> = (0..7)
        .map(|i| new_job(&format!("r{i}"), "2026-10-25", t0()))
        .collect();
    l.jobs().insert_many(&jobs, t0()).await.expect("insert");
    let mut taken = Vec::new();
    for limit in [1, 3, 2, 5] {
        let leased = l
            .leases()
            .jobs(&params("w1", t0(), limit))
            .await
            .expect("lease");
        taken.push(leased.len());
        for j in &leased {
            let key = j.job.key.to_string();
            let emails: Vec<String> = (0..3).map(|e| format!("{e}@example.com")).collect();
            let emails: Vec<&str> = emails.iter().map(String::as_str).collect();
            l.jobs()
                .rendered(&j.lease, &artifact(), &destinations(&key, &emails), t0())
                .await
                .expect("rendered");
        }
    }
    assert_eq!(
        taken,
        [1, 3, 2, 1],
        "jobs: each claim's own limit, then what is left"
    );
    let mut sent = Vec::new();
    for limit in [2, 7, 1, 4, 30] {
        let leased = l
            .leases()
            .deliveries(&params("w1", t0(), limit))
            .await
            .expect("lease deliveries");
        sent.push(leased.len());
    }
    assert_eq!(
        sent,
        [2, 7, 1, 4, 7],
        "deliveries: each claim's own limit, then the rest"
    );
}

/// A batch records each finish as `ledger.deliveries().finish` would, in one transaction: a lost lease
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
    l.deliveries().release(&stale, t0()).await.expect("release");
    let relet = l
        .leases()
        .deliveries(&params("w2", t0(), 10))
        .await
        .expect("lease again");
    assert_eq!(relet.len(), 1);
    let finish = |lease: &DeliveryLease, class, next| Finish {
        lease: lease.clone(),
        attempt: attempt(class, t0()),
        next,
    };
    let results = l
        .deliveries()
        .finish_many(&[
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
        async move {
            l.deliveries()
                .get(&key)
                .await
                .expect("get")
                .expect("delivery")
        }
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
        l.deliveries()
            .attempts(r[1].key())
            .await
            .expect("attempts")
            .is_empty()
    );
    let attempts = l.deliveries().attempts(r[0].key()).await.expect("attempts");
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
        .jobs()
        .settle_many(
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
        |key: &'static str| async move { l.jobs().get(&jk(key)).await.expect("get").expect("job") };
    assert_eq!(job("w:2026-10-25").await.state, JobState::Done);
    assert_eq!(job("q:2026-10-25").await.state, JobState::Quarantined);
    assert_eq!(job("r:2026-10-25").await.state, JobState::Delivering);
    assert!(
        l.deliveries()
            .finish_many(&[])
            .await
            .expect("empty")
            .is_empty()
    );
}

/// A batch's transaction settles the jobs an earlier batch finished (the completer carries
/// them): a job whose last delivery committed before is settled; one whose last delivery is in
/// this same batch is not (its settle comes after this commit); nothing settles without
/// finishes of its own to record either.
async fn a_batch_settles_the_jobs_an_earlier_batch_finished(t: &TestLedger) {
    let l = &t.ledger;
    let a = rendered_job(t, "a:2026-10-25", &["x@example.com"]).await;
    let b = rendered_job(t, "b:2026-10-25", &["x@example.com"]).await;
    let _c = rendered_job(t, "c:2026-10-25", &["x@example.com"]).await;
    let sent = |lease: &DeliveryLease| Finish {
        lease: lease.clone(),
        attempt: attempt(ResponseClass::Accepted, t0()),
        next: DeliveryNext::Sent,
    };
    l.deliveries()
        .finish_many(&[sent(&a[0])])
        .await
        .expect("first batch");
    let job =
        |key: &'static str| async move { l.jobs().get(&jk(key)).await.expect("get").expect("job") };
    assert_eq!(
        job("a:2026-10-25").await.state,
        JobState::Delivering,
        "not settled yet"
    );
    let settled_at = t0() + Duration::seconds(1);
    let carried = [&jk("a:2026-10-25")];
    let second = [sent(&b[0])];
    let results = l
        .commit_group(GroupCommit {
            renders: &[],
            finishes: &second,
            settle: &carried,
            lease_to: None,
            claim: None,
            now: settled_at,
        })
        .await
        .expect("second batch")
        .finishes;
    assert!(results.iter().all(Result::is_ok));
    let a_job = job("a:2026-10-25").await;
    assert_eq!(
        (a_job.state, a_job.terminal_at),
        (JobState::Done, Some(settled_at))
    );
    assert_eq!(
        job("b:2026-10-25").await.state,
        JobState::Delivering,
        "settled after its commit"
    );
    // No finishes: the carried settle runs alone.
    let carried = [&jk("b:2026-10-25")];
    let alone = GroupCommit {
        renders: &[],
        finishes: &[],
        settle: &carried,
        lease_to: None,
        claim: None,
        now: settled_at,
    };
    assert!(
        l.commit_group(alone)
            .await
            .expect("alone")
            .finishes
            .is_empty()
    );
    assert_eq!(job("b:2026-10-25").await.state, JobState::Done);
    assert_eq!(
        job("c:2026-10-25").await.state,
        JobState::Delivering,
        "c was never carried"
    );
}

/// A worker that recorded a job's last delivery and stopped before settling the job leaves it
/// delivering; the rescuer settles it.
async fn rescue_settles_jobs_with_nothing_left_to_send(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com"]).await;
    l.deliveries()
        .finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    let job = l
        .jobs()
        .get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Delivering, "not settled yet");
    let other = rendered_job(t, "x:2026-10-25", &["a@example.com"]).await;
    assert_eq!(other.len(), 1);
    let later = t0() + Duration::minutes(1);
    let rescued = l
        .leases()
        .rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    assert_eq!(rescued.settled, 1, "{rescued:?}");
    let job = l
        .jobs()
        .get(&jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!((job.state, job.terminal_at), (JobState::Done, Some(later)));
    let busy = l
        .jobs()
        .get(&jk("x:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        busy.state,
        JobState::Delivering,
        "a job still sending stays"
    );
}

on_both_backends!(
    many_jobs_and_their_deliveries_in_few_reads,
    each_claim_takes_its_own_limit,
    finish_many_records_each_and_refuses_lost_leases,
    rescue_settles_jobs_with_nothing_left_to_send,
    a_batch_settles_the_jobs_an_earlier_batch_finished,
);
