//! Batched reads (what `run --once`'s progress and summary use): any number of keys in a few
//! statements, across the statement-size boundary, on both backends.

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

on_both_backends!(many_jobs_and_their_deliveries_in_few_reads);
