//! A reading of a shared ledger's clock is timed from when its connection is in hand: with
//! every pooled connection held (here, waiting on a lock of the `nodes` table), the reading
//! waits for one, and that wait must not be taken for the server's round trip. Node and server
//! run on one host and share its clock, so the offset read is about zero however long the wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{POSTGRES_ENV, TestLedger, skip};
use dawnpost::domain::clock::LedgerClock;
use dawnpost::ledger::Node;

/// How many connections a ledger's pool holds by default (`database.max_connections`).
const POOLED: usize = 16;
/// How long the reading waits for a connection.
const WAIT: Duration = Duration::from_millis(1500);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_for_a_connection_is_not_part_of_the_clock_reading() {
    let Some(t) = TestLedger::postgres().await else {
        skip("PostgreSQL: set DAWNPOST_TEST_POSTGRES_URL");
        return;
    };
    let schema = t.schema().expect("schema").to_string();
    let url = std::env::var(POSTGRES_ENV).expect("url");
    let admin = sqlx::PgPool::connect(&url).await.expect("admin");
    let mut lock = admin.begin().await.expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "LOCK TABLE {schema}.nodes IN ACCESS EXCLUSIVE MODE"
    )))
    .execute(&mut *lock)
    .await
    .expect("lock");
    // Every pooled connection waits on the lock, in a heartbeat.
    let now = chrono::Utc::now();
    let blocked: Vec<_> = (0..POOLED)
        .map(|i| {
            let l = t.ledger.clone();
            let node = Node {
                id: format!("holder-{i}"),
                version: "test".into(),
                schema_version: 27,
                formats: "5".into(),
                started_at: now,
                heartbeat_at: now,
            };
            tokio::spawn(async move { l.nodes().heartbeat(&node).await })
        })
        .collect();
    let waiting = format!(
        "SELECT COUNT(*) FROM pg_locks WHERE relation = '{schema}.nodes'::regclass AND NOT granted"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(waiting.clone()))
            .fetch_one(&admin)
            .await
            .expect("count");
        if n >= POOLED as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} of {POOLED} connections waiting on the lock"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let clock = LedgerClock::new(Arc::new(dawnpost::SystemClock));
    let ledger = t.ledger.clone();
    let started = Instant::now();
    let reading =
        tokio::spawn(async move { dawnpost::services::timekeeper::follow(&clock, &ledger).await });
    tokio::time::sleep(WAIT).await;
    lock.commit().await.expect("release the lock");
    let offset = reading.await.expect("reading").expect("an offset");
    let waited = started.elapsed();
    for b in blocked {
        b.await.expect("task").expect("heartbeat");
    }
    assert!(
        waited >= WAIT,
        "the reading waited for a connection: {waited:?}"
    );
    assert!(
        offset.num_milliseconds().abs() < 250,
        "one machine, one clock: an offset of {offset} after waiting {waited:?} for a connection"
    );
    admin.close().await;
}
