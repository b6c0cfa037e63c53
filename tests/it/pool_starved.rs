//! A shared ledger whose server refuses new connections (every slot taken: SQLSTATE 53300) while
//! its pool has none left. A statement fails after the pool's wait with the server's own reason,
//! as `dawnpost` says it when it cannot open the ledger at all — not only "pool timed out" — and
//! once a slot frees, a waiting statement goes through within moments, not at the wait's end.
//! The slots are a role's `CONNECTION LIMIT`, which the server refuses with the same SQLSTATE as
//! a full `max_connections`, without taking every other test's connections away.

use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection, PgPool};

use crate::common::{POSTGRES_ENV, TestLedger, skip};
use dawnpost::Ledger;
use dawnpost::ledger::{Node, Opening};

/// How many connections the role may have.
const SLOTS: usize = 2;

fn node(id: &str) -> Node {
    let now = chrono::Utc::now();
    Node {
        id: id.into(),
        version: "test".into(),
        schema_version: 27,
        formats: "5".into(),
        started_at: now,
        heartbeat_at: now,
    }
}

async fn exec(admin: &PgPool, sql: String) {
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(admin)
        .await
        .expect("admin statement");
}

/// The role's backends.
async fn backends(admin: &PgPool, role: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = $1")
        .bind(role)
        .fetch_one(admin)
        .await
        .expect("count")
}

/// The role's free slots taken by connections of the test's own; with `end_others`, the role's
/// other connections (the ledger's) ended first and their slots taken too.
async fn take_slots(admin: &PgPool, role: &str, url: &str, end_others: bool) -> Vec<PgConnection> {
    let mut held = Vec::new();
    let mut pids: Vec<i32> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while backends(admin, role).await < SLOTS as i64 || (end_others && held.len() < SLOTS) {
        if end_others {
            sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE usename = $1 AND NOT pid = ANY($2)",
            )
            .bind(role)
            .bind(&pids)
            .execute(admin)
            .await
            .expect("terminate");
        }
        if let Ok(mut c) = PgConnection::connect(url).await {
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut c)
                .await
                .expect("pid");
            pids.push(pid);
            held.push(c);
        }
        assert!(Instant::now() < deadline, "could not take the role's slots");
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_starved_pool_uses_its_own_connections_says_the_servers_reason_and_goes_on_when_a_slot_frees()
 {
    let Some(t) = TestLedger::postgres().await else {
        skip("PostgreSQL: set DAWNPOST_TEST_POSTGRES_URL");
        return;
    };
    let schema = t.schema().expect("schema").to_string();
    let url = std::env::var(POSTGRES_ENV).expect("url");
    let admin = PgPool::connect(&url).await.expect("admin");
    let stale: Vec<String> =
        sqlx::query_scalar("SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'dp_starved_%'")
            .fetch_all(&admin)
            .await
            .expect("roles");
    for role in stale {
        exec(&admin, format!("DROP OWNED BY {role}")).await;
        exec(&admin, format!("DROP ROLE {role}")).await;
    }
    let role = format!("dp_starved_{schema}");
    exec(
        &admin,
        format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT {SLOTS}"),
    )
    .await;
    for grant in [
        format!("GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}"),
        format!("GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}"),
        format!("GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"),
        format!(
            "DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO {role}', current_database()); END $$"
        ),
    ] {
        exec(&admin, grant).await;
    }
    let mut role_url = url::Url::parse(&url).expect("url");
    role_url.set_username(&role).expect("user");
    role_url
        .query_pairs_mut()
        .append_pair("options", &format!("-c search_path={schema}"));
    let role_url = role_url.to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    // Migrated already: opened as it is, it needs no second connection for the migrations.
    let ledger = Ledger::open(&role_url, dir.path(), 16, Opening::AsIs)
        .await
        .expect("open as the role");
    ledger
        .nodes()
        .heartbeat(&node("a"))
        .await
        .expect("a heartbeat");

    // One connection of its own, and the server refuses more: eight statements at once all go
    // through it, none waiting out the pool's 10 s for a connection that will not open.
    let mut held = take_slots(&admin, &role, &role_url, false).await;
    assert_eq!(backends(&admin, &role).await, SLOTS as i64);
    let asked = Instant::now();
    let together: Vec<_> = (0..8)
        .map(|i| {
            let ledger = ledger.clone();
            tokio::spawn(async move { ledger.nodes().heartbeat(&node(&format!("n{i}"))).await })
        })
        .collect();
    for statement in together {
        statement
            .await
            .expect("task")
            .expect("a heartbeat on the connection it has");
    }
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "eight heartbeats took {took:?}"
    );

    // No connection at all: a statement fails after the pool's wait, saying the server's reason.
    for c in held.drain(..) {
        c.close().await.expect("close");
    }
    let held = take_slots(&admin, &role, &role_url, true).await;
    // The pool's connection the server ended fails the first statement that uses it.
    let mut tries = 0;
    let (refused, waited) = loop {
        let asked = Instant::now();
        let refused = ledger
            .nodes()
            .heartbeat(&node("a"))
            .await
            .expect_err("no connection to be had");
        tries += 1;
        if tries > 3 || !refused.to_string().contains("administrator command") {
            break (refused, asked.elapsed());
        }
    };
    let said = refused.to_string();
    assert!(said.contains("SQLSTATE 53300"), "{said}");
    assert!(said.contains("too many connections for role"), "{said}");
    assert!(said.contains("every connection slot is taken"), "{said}");
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(30),
        "refused after {waited:?}"
    );

    // A statement waiting for a connection goes through soon after a slot frees.
    let waiting = {
        let ledger = ledger.clone();
        tokio::spawn(async move { ledger.nodes().heartbeat(&node("a")).await })
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!waiting.is_finished(), "went through with every slot held");
    let freed = Instant::now();
    for c in held {
        c.close().await.expect("close");
    }
    waiting
        .await
        .expect("task")
        .expect("the heartbeat once a slot freed");
    let after = freed.elapsed();
    assert!(
        after < Duration::from_millis(1500),
        "went through {after:?} after a slot freed"
    );

    ledger.close().await;
    drop(t);
    exec(&admin, format!("DROP OWNED BY {role}")).await;
    exec(&admin, format!("DROP ROLE {role}")).await;
}
