//! A PostgreSQL ledger that cannot be opened says why: the server's own reason and SQLSTATE (a
//! role whose every connection slot is taken, a database that does not exist), or that nothing
//! listens on the port, with the URL (redacted) and what to check — not sqlx's bare "pool timed
//! out". A ledger it can read but not write is not ready, and says why. Against the real server
//! of `DAWNPOST_TEST_POSTGRES_URL`.

use crate::common;

use std::process::Command;

/// `jobs` with the ledger at `url`: its exit code and stderr.
fn jobs_at(url: &str) -> (Option<i32>, String) {
    let dir = common::shipped_copy();
    let out = Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .current_dir(dir.path())
        .arg("jobs")
        .env("DAWNPOST_DATABASE_URL", url)
        .env_remove("DAWNPOST_CONFIG")
        .env_remove("RUST_LOG")
        .output()
        .expect("run dawnpost");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn server() -> Option<url::Url> {
    let Ok(url) = std::env::var(common::POSTGRES_ENV) else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return None;
    };
    Some(url::Url::parse(&url).expect("a URL"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_slot_taken_says_the_servers_reason_and_what_to_check() {
    let Some(base) = server() else {
        return;
    };
    // A role allowed no connection at all: the server answers 53300 as when every slot of
    // max_connections is taken, without starving the other tests of this server.
    let admin = sqlx::PgPool::connect(base.as_str()).await.expect("connect");
    sqlx::query(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dawnpost_no_slots') \
         THEN CREATE ROLE dawnpost_no_slots LOGIN CONNECTION LIMIT 0; END IF; END $$",
    )
    .execute(&admin)
    .await
    .expect("role");
    admin.close().await;
    let mut url = base.clone();
    url.set_username("dawnpost_no_slots").expect("user");
    url.set_password(Some("s3cret")).expect("password");
    let (code, err) = jobs_at(url.as_str());
    assert_eq!(code, Some(1), "{err}");
    for said in [
        "cannot open the ledger at postgres://",
        "too many connections for role \"dawnpost_no_slots\"",
        "SQLSTATE 53300",
        "max_connections",
    ] {
        assert!(err.contains(said), "{said:?} in {err}");
    }
    assert!(!err.contains("s3cret"), "the password is redacted: {err}");
    assert!(!err.contains("pool timed out"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_database_and_a_closed_port_each_say_so() {
    let Some(base) = server() else {
        return;
    };
    let mut missing = base.clone();
    missing.set_path("/dawnpost_no_such_database");
    let closed = format!(
        "postgres://{}@127.0.0.1:{}/test",
        base.username(),
        common::python::free_port()
    );
    let (a, b) = tokio::join!(
        tokio::task::spawn_blocking(move || jobs_at(missing.as_str())),
        tokio::task::spawn_blocking(move || jobs_at(&closed)),
    );
    let ((code, err), (code2, err2)) = (a.expect("join"), b.expect("join"));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("database \"dawnpost_no_such_database\" does not exist")
            && err.contains("SQLSTATE 3D000"),
        "{err}"
    );
    assert_eq!(code2, Some(1), "{err2}");
    assert!(
        err2.contains("nothing listens there (connection refused)"),
        "{err2}"
    );
}

/// A role that may read the ledger's tables but not write them: the ledger opens (its schema is
/// migrated already), and `ready` says it cannot write, with the server's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_it_cannot_write_is_not_ready() {
    let Some(t) = common::TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let base = server().expect("url");
    let schema = t.schema().expect("schema").to_string();
    let admin = sqlx::PgPool::connect(base.as_str()).await.expect("connect");
    for grant in [
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dawnpost_reader') \
         THEN CREATE ROLE dawnpost_reader LOGIN; END IF; END $$"
            .to_string(),
        format!("GRANT USAGE, CREATE ON SCHEMA {schema} TO dawnpost_reader"),
        format!("GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO dawnpost_reader"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(grant))
            .execute(&admin)
            .await
            .expect("grant");
    }
    let mut url = base.clone();
    url.set_username("dawnpost_reader").expect("user");
    url.query_pairs_mut()
        .append_pair("options", &format!("-c search_path={schema}"));
    let reader = dawnpost::Ledger::connect(url.as_str(), std::path::Path::new("."))
        .await
        .expect("a read-only role opens a migrated ledger");
    let why = reader.ready().await.expect_err("not ready").to_string();
    assert!(
        why.starts_with("the ledger cannot write: ") && why.contains("permission denied"),
        "{why}"
    );
    t.ledger.ready().await.expect("its owner may write");
    reader.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM dawnpost_reader"
    )))
    .execute(&admin)
    .await
    .expect("revoke");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "REVOKE ALL ON SCHEMA {schema} FROM dawnpost_reader"
    )))
    .execute(&admin)
    .await
    .expect("revoke");
    admin.close().await;
    t.cleanup().await;
}
