//! Batched reads (what `run --once`'s progress and summary use): any number of keys in a few
//! statements, across the statement-size boundary, on both backends; and claims whose size
//! changes from one to the next.

mod common;

use common::fixtures::{artifact, destinations, new_job, params, t0};
use common::{TestLedger, jk};
use dawnpost::keys::JobKey;

async fn many_jobs_and_their_deliveries_in_few_reads(t: &TestLedger) {
    let l = &t.ledger;
    let n = 503;
    let jobs: Vec<_> = (0..n)
        .map(|i| new_job(&format!("r{i}"), "2026-10-25", t0()))
        .collect();
    l.job_insert_many(&jobs, t0()).await.expect("insert");
    let leased = l
        .job_lease(&params("w1", t0(), n as u32 + 10))
        .await
        .expect("lease");
    assert_eq!(leased.len(), n);
    for job in &leased {
        let key = job.job.key.to_string();
        l.job_rendered(
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

    let got = l.job_get_many(&keys).await.expect("jobs");
    assert_eq!(got.len(), n, "every job once, the missing key left out");
    let deliveries = l.delivery_list_many(&keys).await.expect("deliveries");
    assert_eq!(deliveries.len(), 2 * n);
    for job in &jobs {
        let of_job: Vec<String> = deliveries
            .iter()
            .filter(|d| d.job_key == job.key)
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
        .delivery_list_many(&keys[..2])
        .await
        .expect("deliveries of two jobs");
    assert_eq!(some.len(), 4, "only the jobs asked for");
    assert!(
        l.delivery_list_many(&[]).await.expect("none").is_empty(),
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
    l.job_insert_many(&jobs, t0()).await.expect("insert");
    let mut taken = Vec::new();
    for limit in [1, 3, 2, 5] {
        let leased = l
            .job_lease(&params("w1", t0(), limit))
            .await
            .expect("lease");
        taken.push(leased.len());
        for j in &leased {
            let key = j.job.key.to_string();
            let emails: Vec<String> = (0..3).map(|e| format!("{e}@example.com")).collect();
            let emails: Vec<&str> = emails.iter().map(String::as_str).collect();
            l.job_rendered(&j.lease, &artifact(), &destinations(&key, &emails), t0())
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
            .delivery_lease(&params("w1", t0(), limit))
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

on_both_backends!(
    many_jobs_and_their_deliveries_in_few_reads,
    each_claim_takes_its_own_limit
);
