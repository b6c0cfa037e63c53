//! A worker gives a send it never started back (its lease ran out before the send began) just
//! as the rescuer, on another node, rescues that very lease. The rescue must write no attempt
//! row for the send it did not rescue: the delivery's next lease takes that attempt's number
//! again, and its outcome could then never be recorded (the group commit failing on it for
//! ever, and every outcome queued behind it with it). PostgreSQL, where the two run at once.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::common::fixtures::{attempt, params, rendered_job, t0};
use crate::common::{POSTGRES_ENV, TestLedger, skip};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, DeliveryState, RescueBudget};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_send_given_back_while_it_is_rescued_is_sent_and_recorded_on_its_next_lease() {
    let Some(t) = TestLedger::postgres().await else {
        skip("PostgreSQL: set DAWNPOST_TEST_POSTGRES_URL");
        return;
    };
    let l = &t.ledger;
    let schema = t.schema().expect("schema").to_string();
    let admin = PgPool::connect(&std::env::var(POSTGRES_ENV).expect("url"))
        .await
        .expect("admin");
    let leases = rendered_job(&t, "a:2026-10-25", &["x@example.com"]).await;
    let lease = &leases[0];

    // The worker's give-back, as it writes it (fenced by its lease), not yet committed.
    let mut give_back = admin.begin().await.expect("begin");
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *give_back)
        .await
        .expect("pid");
    let released = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {schema}.deliveries SET state = 'pending', attempts = attempts - 1,
                lease_owner = NULL, lease_expires_at = NULL
          WHERE key = $1 AND lease_token = $2 AND state = 'sending'"
    )))
    .bind(lease.key().to_string())
    .bind(lease.token())
    .execute(&mut *give_back)
    .await
    .expect("give back");
    assert_eq!(released.rows_affected(), 1);

    // The rescue of the expired lease, on another node, meets the give-back's row lock.
    let rescue = {
        let l = l.clone();
        tokio::spawn(async move {
            l.leases()
                .rescue(
                    t0() + chrono::Duration::minutes(10),
                    &RescueBudget::default(),
                )
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(pid)
        .fetch_one(&admin)
        .await
        .expect("blocked");
        if blocked > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rescue never met the row lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    give_back.commit().await.expect("commit the give-back");
    let rescued = rescue.await.expect("task").expect("rescue");
    assert_eq!(rescued.deliveries, 0, "the give-back came first");

    // The delivery's next lease sends it, and the send is recorded.
    let again = l
        .leases()
        .deliveries(&params("w2", t0() + chrono::Duration::minutes(11), 10))
        .await
        .expect("lease again");
    assert_eq!(again.len(), 1);
    l.deliveries()
        .finish(
            &again[0].lease,
            &attempt(
                ResponseClass::Accepted,
                t0() + chrono::Duration::minutes(11),
            ),
            DeliveryNext::Sent,
        )
        .await
        .expect("the send recorded");
    let d = l
        .deliveries()
        .get(lease.key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Sent);
}
