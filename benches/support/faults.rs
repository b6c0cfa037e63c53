//! The faults of the chaos suite, each done to the PostgreSQL server the nodes share, the way
//! the public PostgreSQL job-queue benchmark (hardbyte/postgresql-job-queue-benchmarking) does
//! them: backends terminated, a transaction holding the cluster's xmin, REPEATABLE READ readers,
//! connection slots held. Each runs as a task until its token is cancelled and then reports
//! what it did. (Node kills and the raised offered load are the suite's own: they act on the
//! processes and the producer.)

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio_util::sync::CancellationToken;

/// What a fault did, in words, for the scenario's notes.
pub type Report = String;

/// Every `period`, terminates each of the nodes' ledger backends that is running a statement or
/// sits inside a transaction (`application_name` marks the nodes' connections).
pub async fn terminate_backends(
    admin_url: String,
    application_name: String,
    period: Duration,
    stop: CancellationToken,
) -> Report {
    let mut killed = 0i64;
    let mut rounds = 0u64;
    let Ok(mut conn) = PgConnection::connect(&admin_url).await else {
        return "could not connect to terminate backends".into();
    };
    let mut every = tokio::time::interval(period);
    while !stop.is_cancelled() {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = every.tick() => {}
        }
        let n: Result<i64, _> = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = $1 AND pid <> pg_backend_pid()
                AND state IN ('active', 'idle in transaction')) t",
        )
        .bind(&application_name)
        .fetch_one(&mut conn)
        .await;
        killed += n.unwrap_or(0);
        rounds += 1;
    }
    let _ = conn.close().await;
    format!("{killed} backends terminated in {rounds} rounds")
}

/// One transaction that has written (it holds a transaction id) and then sits idle, holding
/// back the cluster's xmin, so no vacuum can remove a row deleted or updated after it began.
/// Dead tuples of `jobs` are read at the start and the end.
pub async fn hold_xmin(url: String, schema: String, stop: CancellationToken) -> Report {
    let Ok(mut conn) = PgConnection::connect(&url).await else {
        return "could not connect to hold a transaction open".into();
    };
    let before = dead_tuples(&mut conn, &schema).await;
    let mut held = match conn.begin().await {
        Ok(tx) => tx,
        Err(e) => return format!("could not begin: {e}"),
    };
    let _ = sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut *held)
        .await;
    stop.cancelled().await;
    let _ = held.rollback().await;
    let mut fresh = match PgConnection::connect(&url).await {
        Ok(c) => c,
        Err(_) => return format!("dead tuples in jobs {before} at its start"),
    };
    let at_end = dead_tuples(&mut fresh, &schema).await;
    let _ = fresh.close().await;
    format!("dead tuples in jobs {before} → {at_end}")
}

/// Dead tuples of `schema.jobs` as the statistics collector last counted them.
pub async fn dead_tuples(conn: &mut PgConnection, schema: &str) -> i64 {
    let _ = sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *conn)
        .await;
    sqlx::query_scalar(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'",
    )
    .bind(schema)
    .fetch_optional(&mut *conn)
    .await
    .ok()
    .flatten()
    .unwrap_or(0)
}

/// `n` connections, each in one REPEATABLE READ transaction for the whole phase, scanning the
/// queue's hot tables every 100 ms: analytics readers on the ledger, pinning the MVCC horizon.
pub async fn readers(url: String, schema: String, n: usize, stop: CancellationToken) -> Report {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (url, schema, stop) = (url.clone(), schema.clone(), stop.clone());
        tasks.spawn(async move {
            let mut scans = 0u64;
            let Ok(mut conn) = PgConnection::connect(&url).await else {
                return 0;
            };
            let Ok(mut tx) = conn.begin().await else {
                return 0;
            };
            let _ = sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut *tx)
                .await;
            let scan = format!(
                "SELECT (SELECT count(*) FROM {schema}.jobs) + (SELECT count(*) FROM {schema}.deliveries)"
            );
            while !stop.is_cancelled() {
                if sqlx::query(sqlx::AssertSqlSafe(scan.clone()))
                    .execute(&mut *tx)
                    .await
                    .is_ok()
                {
                    scans += 1;
                }
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            let _ = tx.rollback().await;
            let _ = conn.close().await;
            scans
        });
    }
    let mut scans = 0u64;
    while let Some(done) = tasks.join_next().await {
        scans += done.unwrap_or(0);
    }
    format!("{n} readers, {scans} scans")
}

/// Takes the nodes' connections away and holds every connection slot of the server but
/// `free`, which the nodes share: the nodes' backends are terminated and idle connections
/// opened until all the others hold every slot but `free` (or the server refuses one), in
/// rounds until the nodes hold no more than `free` (they reconnect as fast as slots free).
/// Released when `stop` is cancelled.
pub async fn hold_slots(
    admin_url: String,
    application_name: String,
    free: i64,
    stop: CancellationToken,
) -> Report {
    let Ok(mut admin) = PgConnection::connect(&admin_url).await else {
        return "could not connect to hold slots".into();
    };
    let max: i64 = sqlx::query_scalar(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'max_connections'",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap_or(100);
    let mut held = Vec::new();
    let mut refused = None;
    let mut nodes = -1;
    for _ in 0..50 {
        let _ = sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(&application_name)
        .execute(&mut admin)
        .await;
        loop {
            let others: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE backend_type = 'client backend' AND application_name <> $1",
            )
            .bind(&application_name)
            .fetch_one(&mut admin)
            .await
            .unwrap_or(max);
            if others >= max - free {
                break;
            }
            match PgConnection::connect(&admin_url).await {
                Ok(c) => held.push(c),
                Err(e) => {
                    refused = Some(e.to_string());
                    break;
                }
            }
        }
        nodes =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
                .bind(&application_name)
                .fetch_one(&mut admin)
                .await
                .unwrap_or(-1);
        if nodes <= free {
            break;
        }
    }
    let taken = held.len();
    stop.cancelled().await;
    for c in held {
        let _ = c.close().await;
    }
    let _ = admin.close().await;
    let refused = refused.map_or(String::new(), |r| format!("; the server refused one: {r}"));
    format!("{taken} of {max} slots held, the nodes kept {nodes}{refused}")
}
