//! How the ledger finds due, quarantined and in-flight deliveries: by the generated columns
//! `due_at` and `quarantined_at` and through live jobs, not by indexes on `state`, so that a
//! delivery's finish changes no indexed column and PostgreSQL writes it as a HOT update (its row
//! only, no index entry). The columns follow `state` whoever writes it: a row an older version
//! sets back to pending or quarantines, behind this one's back, is found like any other.

use chrono::Duration;

use crate::common;

use common::TestLedger;
use common::fixtures::{attempt, params, rendered_job, t0};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, DeliveryState};

/// An older version writes `state` and `ready_at` only; the claim and the dead-letter list
/// still find what it set back to pending or quarantined.
async fn rows_an_older_version_wrote_are_claimed_and_listed(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "old:2026-10-25", &["a@x.example", "b@x.example"]).await;
    assert_eq!(leases.len(), 2);
    let (back, dead) = (leases[0].key(), leases[1].key());
    let due = t0() + Duration::minutes(1);
    t.behind_the_back(|p| {
        format!(
            "UPDATE {p}deliveries SET state = 'pending', ready_at = {}, lease_owner = NULL,
                lease_expires_at = NULL WHERE key = '{back}'",
            due.timestamp_millis()
        )
    })
    .await;
    t.behind_the_back(|p| {
        format!(
            "UPDATE {p}deliveries SET state = 'quarantined', lease_owner = NULL,
                lease_expires_at = NULL WHERE key = '{dead}'"
        )
    })
    .await;
    let early = l
        .leases()
        .deliveries(&params("w2", t0(), 10))
        .await
        .expect("lease");
    assert!(early.is_empty(), "not due before its ready_at");
    let claimed = l
        .leases()
        .deliveries(&params("w2", due, 10))
        .await
        .expect("lease");
    let keys: Vec<String> = claimed.iter().map(|d| d.lease.key().to_string()).collect();
    assert_eq!(keys, [back.to_string()], "due at its ready_at");
    let listed = l.deliveries().quarantined(10).await.expect("dlq");
    let keys: Vec<String> = listed.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(keys, [dead.to_string()]);
    assert_eq!(listed[0].state, DeliveryState::Quarantined);
}

on_both_backends!(rows_an_older_version_wrote_are_claimed_and_listed);

/// On PostgreSQL a delivery's finish is a HOT update: the primary key (the job's number and the
/// delivery's place, which also serves a job's deliveries) holds as many entries after every
/// delivery is sent as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_writes_no_index_entry() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let schema = t.schema().expect("schema").to_string();
    let leases = rendered_job(
        &t,
        "hot:2026-10-25",
        &["a@x.example", "b@x.example", "c@x.example"],
    )
    .await;
    let url = std::env::var(common::POSTGRES_ENV).expect("url");
    let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
    // pageinspect reads an index's pages; creating it races other tests' creation harmlessly.
    let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        .execute(&pool)
        .await;
    let entries = async |index: &str| -> i64 {
        // A few entries fit the first leaf page, which is the root (page 0 is the metapage).
        let sql = format!("SELECT COUNT(*) FROM public.bt_page_items('{schema}.{index}', 1)");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&pool)
            .await
            .expect("bt_page_items")
    };
    let before = entries("deliveries_pkey").await;
    assert!(before >= 3, "an entry per delivery at least: {before}");
    for lease in &leases {
        let sent = attempt(ResponseClass::Accepted, t0());
        t.ledger
            .deliveries()
            .finish(lease, &sent, DeliveryNext::Sent)
            .await
            .expect("sent");
    }
    let states = t
        .ledger
        .deliveries()
        .count_by_state()
        .await
        .expect("counts");
    assert_eq!(states, [(DeliveryState::Sent, 3)]);
    let after = entries("deliveries_pkey").await;
    assert_eq!(after, before, "the finishes added no index entry");
    pool.close().await;
    t.cleanup().await;
}
