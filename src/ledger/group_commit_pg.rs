//! PostgreSQL's form of the outcome statements (`group_commit.rs`, `group_commit_sql.rs`): each kind of row a commit
//! writes goes as parallel arrays in one statement (`UNNEST`), whatever the batch's size. The
//! `VALUES` lists SQLite takes went in power-of-two chunks, each its own statement and round
//! trip (a batch of 150 finishes was four updates and four inserts), each a text of its own to
//! prepare; here a kind is one statement with one text, prepared once per connection. A batch's
//! finishes and their attempt rows are one statement too: the attempts are inserted from the
//! rows the update returns.

use std::sync::LazyLock;

use sqlx::PgConnection;

use super::group_commit_sql::{
    FINISH_UPDATE, NewRow, RENDERED_UPDATE, finish_columns, last_error, rendered_state,
};
use super::types::{DeliveryRecord, JobRecord};
use super::{Finish, Render, Result};
use crate::domain::clock::to_millis;

/// Renders as parallel arrays (key, token, state, html, text, sha256, bytes, csv, parts) at
/// `$10`, then `group_commit_sql::RENDERED_UPDATE`.
static RENDERED: LazyLock<String> = LazyLock::new(|| {
    let head = "WITH v (key, token, state, html, text, sha256, bytes, csv, parts, now) AS (
        SELECT *, $10::int8 FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::text[],
            $5::text[], $6::text[], $7::int8[], $8::text[], $9::text[])) ";
    [head, RENDERED_UPDATE, "jobs.*"].concat()
});

/// New deliveries as parallel arrays (key, job key, kind, destination, job number, ordinal),
/// each `$5` (state) at `$6` under the lease `$7` (owner), `$8` (until), `$9` (token and
/// attempts); the rows are `v`, its key `column1` and its job's number `column13`, as in
/// SQLite's `VALUES` form, for the statement's tail.
const DELIVERIES_HEAD: &str = "INSERT INTO deliveries (key, job_key, kind, destination, state, ready_at, created_at, updated_at,
        lease_owner, lease_expires_at, lease_token, attempts, job_number, ordinal)
    SELECT * FROM (SELECT u.column1, u.job_key, u.kind, u.destination, $5::text, $6::int8, $6::int8,
        $6::int8, $7::text, $8::int8, $9::int8, $9::int8, u.job_number AS column13, u.ordinal
        FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $10::int8[], $11::int4[])
            AS u(column1, job_key, kind, destination, job_number, ordinal)";

/// Finishes as parallel arrays: the update's columns (key, token, state, ready_at, class,
/// error, finished, terminal), then the attempt's (requested, code, retry_after, reason,
/// diagnostics), then the delivery's place (job number, ordinal). The update is `group_commit_sql::FINISH_UPDATE`; each delivery it changed gets its
/// attempt row, numbered by the attempts its row counts. Returns the update's rows.
static FINISHED: LazyLock<String> = LazyLock::new(|| {
    let head = "WITH v (key, token, state, ready_at, class, error, finished, terminal,
            requested, code, retry_after, reason, diagnostics, job_number, ordinal) AS (
        SELECT * FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::int8[], $5::text[],
            $6::text[], $7::int8[], $8::int8[], $9::int8[], $10::int8[], $11::int8[],
            $12::text[], $13::text[], $14::int8[], $15::int4[])),
    done AS (";
    let attempts = "),
    logged AS (INSERT INTO delivery_attempts (delivery_key, attempt, requested_at, finished_at,
            class, code, retry_after_ms, next_ready_at, reason, diagnostics, job_number, ordinal)
        SELECT v.key, done.attempts, v.requested, v.finished, v.class, v.code, v.retry_after,
            v.ready_at, v.reason, v.diagnostics, done.job_number, done.ordinal
        FROM done JOIN v ON v.key = done.key AND v.token = done.lease_token)
    SELECT key, lease_token, attempts FROM done";
    [head, FINISH_UPDATE, attempts].concat()
});

/// Records `renders`' artifacts under their leases at `now_ms`: the job rows updated.
pub(super) async fn rendered(
    conn: &mut PgConnection,
    renders: &[Render],
    now_ms: i64,
) -> Result<Vec<JobRecord>> {
    let n = renders.len();
    let (mut key, mut token, mut state) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut html, mut text, mut sha) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut bytes, mut csv) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut parts = Vec::with_capacity(n);
    for r in renders {
        let a = &r.artifact;
        key.push(r.lease.key().to_string());
        token.push(r.lease.token());
        state.push(rendered_state(r));
        html.push(a.html_key.as_str());
        text.push(a.text_key.as_str());
        sha.push(a.sha256.as_str());
        bytes.push(a.bytes);
        csv.push(a.csv_key.as_deref());
        parts.push(super::types::parts_column(a));
    }
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(RENDERED.as_str()))
        .bind(key)
        .bind(token)
        .bind(state)
        .bind(html)
        .bind(text)
        .bind(sha)
        .bind(bytes)
        .bind(csv)
        .bind(parts)
        .bind(now_ms)
        .fetch_all(conn)
        .await?;
    Ok(rows)
}

/// Inserts `new` with the statement's `tail` (see `group_commit::insert_deliveries`), `sending`
/// under `lease` (owner, until in ms) when given, else `pending`: the rows created.
pub(super) async fn deliveries(
    conn: &mut PgConnection,
    (new, tail): (&[NewRow<'_>], &str),
    lease: Option<(&str, i64)>,
    now_ms: i64,
) -> Result<Vec<DeliveryRecord>> {
    let n = new.len();
    let (mut key, mut job, mut kind, mut dest) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut job_number, mut ordinal) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for row in new {
        let dl = &row.delivery.key;
        key.push(dl.to_string());
        job.push(row.job.to_string());
        kind.push(dl.kind().as_str());
        dest.push(dl.destination());
        job_number.push(row.job_number);
        ordinal.push(row.ordinal);
    }
    let state = if lease.is_some() {
        "sending"
    } else {
        "pending"
    };
    let sql = [DELIVERIES_HEAD, tail].concat();
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(key)
        .bind(job)
        .bind(kind)
        .bind(dest)
        .bind(state)
        .bind(now_ms)
        .bind(lease.map(|(owner, _)| owner))
        .bind(lease.map(|(_, until)| until))
        .bind(i64::from(lease.is_some()))
        .bind(job_number)
        .bind(ordinal)
        .fetch_all(conn)
        .await?;
    Ok(rows)
}

/// Each finish's delivery update under its lease and, for each that held, its attempt row:
/// (key, token, attempt number) of every delivery updated.
pub(super) async fn finished(
    conn: &mut PgConnection,
    finishes: &[Finish],
) -> Result<Vec<(String, i64, i64)>> {
    let mut c = FinishColumns::with_capacity(finishes.len());
    for f in finishes {
        c.push(f);
    }
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(FINISHED.as_str()))
        .bind(c.key)
        .bind(c.token)
        .bind(c.state)
        .bind(c.ready_at)
        .bind(c.class)
        .bind(c.error)
        .bind(c.finished)
        .bind(c.terminal)
        .bind(c.requested)
        .bind(c.code)
        .bind(c.retry_after)
        .bind(c.reason)
        .bind(c.diagnostics)
        .bind(c.job_number)
        .bind(c.ordinal)
        .fetch_all(conn)
        .await?;
    Ok(rows)
}

/// A batch of finishes as the parallel arrays [`FINISHED`] binds.
struct FinishColumns<'a> {
    key: Vec<String>,
    token: Vec<i64>,
    state: Vec<&'static str>,
    ready_at: Vec<Option<i64>>,
    class: Vec<&'static str>,
    error: Vec<Option<&'a str>>,
    finished: Vec<i64>,
    terminal: Vec<Option<i64>>,
    requested: Vec<i64>,
    code: Vec<Option<i64>>,
    retry_after: Vec<Option<i64>>,
    reason: Vec<Option<&'a str>>,
    diagnostics: Vec<Option<&'a str>>,
    job_number: Vec<i64>,
    ordinal: Vec<i32>,
}

impl<'a> FinishColumns<'a> {
    fn with_capacity(n: usize) -> FinishColumns<'a> {
        FinishColumns {
            key: Vec::with_capacity(n),
            token: Vec::with_capacity(n),
            state: Vec::with_capacity(n),
            ready_at: Vec::with_capacity(n),
            class: Vec::with_capacity(n),
            error: Vec::with_capacity(n),
            finished: Vec::with_capacity(n),
            terminal: Vec::with_capacity(n),
            requested: Vec::with_capacity(n),
            code: Vec::with_capacity(n),
            retry_after: Vec::with_capacity(n),
            reason: Vec::with_capacity(n),
            diagnostics: Vec::with_capacity(n),
            job_number: Vec::with_capacity(n),
            ordinal: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, f: &'a Finish) {
        let (state, ready_at, terminal) = finish_columns(f);
        let a = &f.attempt;
        self.key.push(f.lease.key().to_string());
        self.token.push(f.lease.token());
        let place = f.lease.place();
        self.job_number.push(place.job_number);
        self.ordinal.push(place.ordinal);
        self.state.push(state);
        self.ready_at.push(ready_at);
        self.class.push(a.class.as_str());
        self.error.push(last_error(f));
        self.finished.push(to_millis(a.finished_at));
        self.terminal.push(terminal);
        self.requested.push(to_millis(a.requested_at));
        self.code.push(a.code);
        self.retry_after
            .push(a.retry_after.map(|d| d.num_milliseconds()));
        self.reason.push(a.reason.as_deref());
        self.diagnostics.push(a.diagnostics.as_deref());
    }
}
