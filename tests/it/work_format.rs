//! Work formats: a node leases only jobs and deliveries whose recorded format it knows, so work
//! a newer version wrote in a newer format waits for a node that reads it. On both backends;
//! the newer format is written into the rows directly, as a newer binary would.

use crate::common;

use common::TestLedger;
use common::fixtures::{params, ready_jobs, t0};
use dawnpost::ledger::WORK_FORMAT;

/// Sets the `format` of `table`'s rows whose key starts with `prefix`, behind the ledger's back.
pub(crate) async fn set_format(t: &TestLedger, table: &str, prefix: &str, format: i64) {
    t.behind_the_back(|p| {
        format!("UPDATE {p}{table} SET format = {format} WHERE key LIKE '{prefix}%'")
    })
    .await;
}

async fn work_of_a_newer_format_is_not_leased(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["old:2026-10-25", "new:2026-10-25"]).await;
    set_format(t, "jobs", "new:", WORK_FORMAT + 1).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let keys: Vec<String> = leased.iter().map(|j| j.job.key.to_string()).collect();
    assert_eq!(keys, ["old:2026-10-25"], "the newer job waits");

    // Its deliveries, once rendered, likewise.
    let lease = &leased[0].lease;
    let deliveries =
        common::fixtures::destinations("old:2026-10-25", &["a@x.example", "b@x.example"]);
    l.jobs()
        .rendered(lease, &common::fixtures::artifact(), &deliveries, t0())
        .await
        .expect("rendered");
    set_format(t, "deliveries", "old:2026-10-25/email:b@", WORK_FORMAT + 1).await;
    let sends = l
        .leases()
        .deliveries(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let keys: Vec<String> = sends.iter().map(|d| d.delivery.key.to_string()).collect();
    assert_eq!(keys, ["old:2026-10-25/email:a@x.example"]);
}

on_both_backends!(work_of_a_newer_format_is_not_leased);
