//! The job and delivery states the ledger's enums and sets name are the states its tables
//! allow: each table's CHECK constraint lists exactly the enum's states, and the claim queue's
//! partial index covers exactly the claimable set, on both backends. Destination kinds are not
//! listed in the schema: a delivery of any well-formed kind is stored and read back.

use std::collections::BTreeSet;

use dawnpost::ledger::{DeliveryState, JobState, RunbookState};

use crate::common::{POSTGRES_ENV, TestLedger};

/// The quoted words of `text` (`'ready'` → `ready`).
fn quoted(text: &str) -> BTreeSet<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn names<T: Copy>(states: &[T], name: fn(T) -> &'static str) -> BTreeSet<String> {
    states.iter().map(|s| name(*s).to_string()).collect()
}

/// The CHECK constraints of `table`, as the database states them.
async fn checks(t: &TestLedger, table: &str) -> Vec<String> {
    match (t.schema(), t.sqlite_path()) {
        (Some(schema), _) => {
            let url = std::env::var(POSTGRES_ENV).expect("postgres url");
            let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
            let defs: Vec<(String,)> = sqlx::query_as(
                "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
                   JOIN pg_class t ON t.oid = c.conrelid
                   JOIN pg_namespace n ON n.oid = t.relnamespace
                  WHERE n.nspname = $1 AND t.relname = $2 AND c.contype = 'c'",
            )
            .bind(schema)
            .bind(table)
            .fetch_all(&pool)
            .await
            .expect("constraints");
            pool.close().await;
            defs.into_iter().map(|(d,)| d).collect()
        }
        (None, Some(path)) => {
            let sql = sqlite_schema(&path, "table", table).await;
            (sql.split("CHECK").skip(1))
                .map(|c| c.split(')').next().unwrap_or("").to_string())
                .collect()
        }
        _ => unreachable!("a test ledger is sqlite or postgres"),
    }
}

/// The states `table`'s CHECK constraint on `state` allows.
async fn allowed(t: &TestLedger, table: &str) -> BTreeSet<String> {
    let on_state: Vec<String> = (checks(t, table).await.into_iter())
        .filter(|c| c.contains("state"))
        .collect();
    assert_eq!(
        on_state.len(),
        1,
        "{table} has one CHECK on state: {on_state:?}"
    );
    quoted(&on_state[0])
}

async fn sqlite_schema(path: &std::path::Path, kind: &str, name: &str) -> String {
    let url = format!("sqlite://{}", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
    let (sql,): (String,) =
        sqlx::query_as("SELECT sql FROM sqlite_master WHERE type = $1 AND name = $2")
            .bind(kind)
            .bind(name)
            .fetch_one(&pool)
            .await
            .expect("schema");
    pool.close().await;
    sql
}

/// The states `index`'s predicate covers.
async fn indexed(t: &TestLedger, index: &str) -> BTreeSet<String> {
    match (t.schema(), t.sqlite_path()) {
        (Some(schema), _) => {
            let url = std::env::var(POSTGRES_ENV).expect("postgres url");
            let pool = sqlx::PgPool::connect(&url).await.expect("postgres");
            let (pred,): (String,) = sqlx::query_as(
                "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i
                   JOIN pg_class c ON c.oid = i.indexrelid
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = $1 AND c.relname = $2",
            )
            .bind(schema)
            .bind(index)
            .fetch_one(&pool)
            .await
            .expect("index predicate");
            pool.close().await;
            quoted(&pred)
        }
        (None, Some(path)) => {
            let sql = sqlite_schema(&path, "index", index).await;
            quoted(sql.split(" WHERE ").nth(1).unwrap_or(""))
        }
        _ => unreachable!("a test ledger is sqlite or postgres"),
    }
}

async fn the_check_constraints_allow_the_enums_states(t: &TestLedger) {
    assert_eq!(
        allowed(t, "jobs").await,
        names(&JobState::ALL, JobState::as_str)
    );
    let deliveries = names(&DeliveryState::ALL, DeliveryState::as_str);
    assert_eq!(allowed(t, "deliveries").await, deliveries);
    assert_eq!(allowed(t, "notice_sends").await, deliveries);
}

async fn the_claim_queue_index_covers_the_claimable_set(t: &TestLedger) {
    assert_eq!(
        indexed(t, "jobs_due").await,
        names(JobState::CLAIMABLE, JobState::as_str)
    );
    assert_eq!(
        indexed(t, "jobs_leased").await,
        names(&[JobState::Rendering], JobState::as_str)
    );
    assert_eq!(
        indexed(t, "jobs_delivering").await,
        names(&[JobState::Delivering], JobState::as_str)
    );
    let mut live = indexed(t, "jobs_due").await;
    live.extend(indexed(t, "jobs_leased").await);
    live.extend(indexed(t, "jobs_delivering").await);
    assert_eq!(
        live,
        names(JobState::LIVE, JobState::as_str),
        "the live jobs are read through these three indexes"
    );
}

async fn the_runbooks_check_constraint_allows_the_enums_states(t: &TestLedger) {
    assert_eq!(
        allowed(t, "runbooks").await,
        names(&RunbookState::ALL, RunbookState::as_str)
    );
}

async fn no_check_constraint_lists_destination_kinds(t: &TestLedger) {
    for table in ["deliveries", "notice_sends"] {
        let on_kind: Vec<String> = (checks(t, table).await.into_iter())
            .filter(|c| c.contains("kind"))
            .collect();
        assert!(on_kind.is_empty(), "{table} lists kinds: {on_kind:?}");
    }
}

async fn a_delivery_of_a_kind_this_version_does_not_send_is_stored_and_read(t: &TestLedger) {
    use crate::common::fixtures::{artifact, lease_of, params, ready_jobs, t0};
    let job = crate::common::jk("fax-report:2026-11-30");
    let key = crate::common::dk("fax-report:2026-11-30/fax:+49301234567");
    ready_jobs(t, &["fax-report:2026-11-30"]).await;
    let leased = t
        .ledger
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let lease = lease_of(&leased, "fax-report:2026-11-30");
    let new = [dawnpost::ledger::NewDelivery { key: key.clone() }];
    (t.ledger
        .jobs()
        .rendered(&lease, &artifact(), &new, t0())
        .await)
        .expect("rendered");
    let deliveries = t.ledger.deliveries().list(&job).await.expect("deliveries");
    let kinds: Vec<String> = deliveries
        .iter()
        .map(|d| d.key.kind().to_string())
        .collect();
    assert_eq!(kinds, ["fax"]);
    assert_eq!(deliveries[0].key, key);
}

crate::on_both_backends!(
    the_check_constraints_allow_the_enums_states,
    the_claim_queue_index_covers_the_claimable_set,
    the_runbooks_check_constraint_allows_the_enums_states,
    no_check_constraint_lists_destination_kinds,
    a_delivery_of_a_kind_this_version_does_not_send_is_stored_and_read,
);
