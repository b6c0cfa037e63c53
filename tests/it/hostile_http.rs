//! Hostile HTTP requests, table-driven: each gets the status a client can act on and a JSON
//! body `{"error": …}` that says why; the token is checked before anything else is parsed;
//! nothing panics.

use crate::common;

use common::TestLedger;
use common::ops_server::{SECRET, Server, TOKEN, start};
use dawnpost::delivery::signing::{MAX_SIGNATURES, Secret};
use reqwest::{Method, StatusCode};

/// One request and what it must get.
struct Case {
    name: &'static str,
    method: Method,
    path: String,
    token: Option<&'static str>,
    body: Option<Vec<u8>>,
    /// Headers besides the token (the ingest signature's).
    headers: Vec<(&'static str, String)>,
    status: StatusCode,
    /// A word the error message must hold.
    says: &'static str,
}

fn case(
    name: &'static str,
    method: Method,
    path: &str,
    token: Option<&'static str>,
    status: StatusCode,
    says: &'static str,
) -> Case {
    Case {
        name,
        method,
        path: path.to_string(),
        token,
        body: None,
        headers: Vec::new(),
        status,
        says,
    }
}

#[rustfmt::skip] // A table reads best one row a line.
fn ops_cases() -> Vec<Case> {
    use StatusCode as S;
    let (get, post) = (Method::GET, Method::POST);
    let t = Some(TOKEN);
    let key = "warehouse-17:2026-11-29";
    let big = |c: Case| Case { body: Some(vec![b'x'; 3 << 20]), ..c };
    vec![
        case("bad limit", get.clone(), "/v1/jobs?limit=abc", t, S::BAD_REQUEST, "limit"),
        case("negative limit", get.clone(), "/v1/jobs?limit=-1", t, S::BAD_REQUEST, "limit"),
        case("huge limit", get.clone(), "/v1/jobs?limit=99999999999", t, S::BAD_REQUEST, "limit"),
        case("bad limit, no token", get.clone(), "/v1/jobs?limit=abc", None, S::UNAUTHORIZED, "token"),
        case("bad state", get.clone(), "/v1/jobs?state=melted", t, S::UNPROCESSABLE_ENTITY, "state"),
        case("undecodable key", get.clone(), "/v1/jobs/%FF", t, S::BAD_REQUEST, "UTF-8"),
        case("undecodable key, no token", get.clone(), "/v1/jobs/%FF", None, S::UNAUTHORIZED, "token"),
        case("malformed key", get.clone(), "/v1/jobs/nope", t, S::NOT_FOUND, "no job"),
        case("unknown job", get.clone(), &format!("/v1/jobs/{key}"), t, S::NOT_FOUND, "no job"),
        case("wrong token", get.clone(), "/v1/dlq", Some("nope"), S::UNAUTHORIZED, "token"),
        case("unknown route", get.clone(), "/v1/nothing", t, S::NOT_FOUND, "route"),
        case("unknown route, no token", get.clone(), "/nothing", None, S::NOT_FOUND, "route"),
        case("wrong method", Method::DELETE, "/v1/jobs", t, S::METHOD_NOT_ALLOWED, "method"),
        case("wrong method on ingest", get, "/v1/runs", None, S::METHOD_NOT_ALLOWED, "method"),
        case("redrive without a body", post.clone(), &format!("/v1/jobs/{key}/redrive"), t, S::UNPROCESSABLE_ENTITY, "body"),
        big(case("3 MiB redrive body", post.clone(), &format!("/v1/jobs/{key}/redrive"), t, S::PAYLOAD_TOO_LARGE, "")),
        big(case("3 MiB redrive body, no token", post.clone(), &format!("/v1/jobs/{key}/redrive"), None, S::UNAUTHORIZED, "token")),
        Case { body: Some(vec![b'x'; 10 << 20]), ..case("10 MiB bounce report", post.clone(), "/v1/bounces/dsn", t, S::PAYLOAD_TOO_LARGE, "") },
        Case { body: Some(b"Subject: hi\r\n\r\nhello\r\n".to_vec()), ..case("a mail that is no report", post.clone(), "/v1/bounces/dsn", t, S::UNPROCESSABLE_ENTITY, "neither") },
        Case { body: Some(b"{\"Type\": \"Bounce\"}".to_vec()), ..case("another provider's payload", post.clone(), "/v1/bounces/dsn", t, S::UNPROCESSABLE_ENTITY, "neither") },
        case("a bounce report without a token", post, "/v1/bounces/dsn", None, S::UNAUTHORIZED, "token"),
    ]
}

#[rustfmt::skip] // A table reads best one row a line.
/// Hostile requests to `POST /v1/runs`, signed at `now` (seconds) unless the case is about the
/// signature or its timestamp.
fn ingest_cases(now: i64) -> Vec<Case> {
    let ok = r#"{"report": "warehouse-17", "date": "2026-11-29"}"#;
    let signed = |name, id: &str, ts: i64, body: &str, sig: Option<String>, status, says| {
        let sig = sig.unwrap_or_else(|| {
            Secret::parse(SECRET)
                .expect("secret")
                .sign(id, ts, body.as_bytes())
        });
        Case {
            body: Some(body.as_bytes().to_vec()),
            headers: vec![
                ("webhook-id", id.to_string()),
                ("webhook-timestamp", ts.to_string()),
                ("webhook-signature", sig),
            ],
            ..case(name, Method::POST, "/v1/runs", None, status, says)
        }
    };
    let far = r#"{"report": "warehouse-17", "date": "+99999-01-01"}"#;
    let valid = Secret::parse(SECRET)
        .expect("secret")
        .sign("msg_many", now, ok.as_bytes());
    let many = vec!["v1,bm90IHRoaXM="; MAX_SIGNATURES * 500].join(" ");
    let (s422, s401) = (StatusCode::UNPROCESSABLE_ENTITY, StatusCode::UNAUTHORIZED);
    vec![
        signed("far-future year", "msg_far", now, far, None, s422, "YYYY-MM-DD"),
        signed("not JSON", "msg_nj", now, "{ nope", None, s422, "invalid body"),
        signed("unknown report", "msg_ur", now, r#"{"report": "x", "date": "2026-11-29"}"#, None, StatusCode::NOT_FOUND, "no report"),
        signed("minimal timestamp", "msg_min", i64::MIN, ok, None, s401, ""),
        signed("maximal timestamp", "msg_max", i64::MAX, ok, None, s401, ""),
        signed("thousands of signatures", "msg_many", now, ok, Some(format!("{many} {valid}")), s401, ""),
        signed("no signature", "msg_none", now, ok, Some(String::new()), s401, ""),
    ]
}

async fn send(s: &Server, c: &Case, scheme: &str) -> (StatusCode, String, serde_json::Value) {
    send_to(&s.base, &s.http, c, scheme).await
}

async fn send_to(
    base: &str,
    http: &reqwest::Client,
    c: &Case,
    scheme: &str,
) -> (StatusCode, String, serde_json::Value) {
    if c.body.as_ref().is_some_and(|b| b.len() > 1 << 20) {
        return send_head_only(base, c, scheme).await;
    }
    let mut req = http.request(c.method.clone(), format!("{base}{}", c.path));
    if let Some(t) = c.token {
        req = req.header("authorization", format!("{scheme} {t}"));
    }
    for (name, value) in &c.headers {
        req = req.header(*name, value);
    }
    if let Some(b) = &c.body {
        req = req
            .header("content-type", "application/json")
            .body(b.clone());
    }
    let resp = req.send().await.expect("request");
    let status = resp.status();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp.bytes().await.unwrap_or_default();
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, content_type, json)
}

/// A request whose large body is announced but never sent: the server must answer from the
/// head alone (a client that kept writing would race the server's early answer and close).
async fn send_head_only(
    base: &str,
    c: &Case,
    scheme: &str,
) -> (StatusCode, String, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = c
        .token
        .map(|t| format!("authorization: {scheme} {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{} {} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        c.method,
        c.path,
        c.body.as_ref().map_or(0, Vec::len)
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    let mut reply = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut reply),
    );
    if read.await.is_err() {
        panic!(
            "{}: not answered without the body; got {:?}",
            c.name,
            String::from_utf8_lossy(&reply)
        );
    }
    let text = String::from_utf8_lossy(&reply);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .expect("status line");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    let json = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (status, content_type, json)
}

/// Sends every case to `base`; returns each that did not get its status and a JSON error
/// saying why.
async fn failures(base: &str, http: &reqwest::Client, cases: &[Case]) -> Vec<String> {
    let mut failed = Vec::new();
    for c in cases {
        let (status, content_type, json) = send_to(base, http, c, "Bearer").await;
        let error = json["error"].as_str().unwrap_or("").to_lowercase();
        if status != c.status
            || !content_type.starts_with("application/json")
            || json["error"].as_str().is_none()
            || !error.contains(&c.says.to_lowercase())
        {
            failed.push(format!(
                "{}: expected {} saying {:?}, got {status} {content_type:?} {json}",
                c.name, c.status, c.says
            ));
        }
    }
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ops_error_is_json_with_the_right_status() {
    let t = TestLedger::sqlite().await;
    let s = start(&t).await;
    let failed = failures(&s.base, &s.http, &ops_cases()).await;
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    s.cancel.cancel();
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let t = TestLedger::sqlite().await;
    let s = start(&t).await;
    let dlq = case(
        "dlq",
        Method::GET,
        "/v1/dlq",
        Some(TOKEN),
        StatusCode::OK,
        "",
    );
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let (status, _, json) = send(&s, &dlq, scheme).await;
        assert_eq!(status, StatusCode::OK, "{scheme}: {json}");
    }
    let (status, _, _) = send(&s, &dlq, "Basic").await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "another scheme is refused"
    );
    s.cancel.cancel();
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_run_requests_are_refused_in_json() {
    let t = TestLedger::sqlite().await;
    let s = start(&t).await;
    let failed = failures(&s.base, &s.http, &ingest_cases(s.now())).await;
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let jobs = t
        .ledger
        .jobs()
        .list(&dawnpost::ledger::JobFilter::default())
        .await
        .expect("jobs");
    assert!(jobs.is_empty(), "no refused request made a job: {jobs:?}");
    s.cancel.cancel();
    t.cleanup().await;
}

/// The daemon binary, sent every request of both tables: each gets its answer, the daemon
/// stops cleanly on SIGTERM, and nothing it printed says `panicked`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_answers_every_hostile_request_without_a_panic() {
    let p = common::Project::new(&common::report(
        "warehouse-17",
        "0 30 6 * * *",
        "Europe/Berlin",
    ));
    p.write(
        "config/dawnpost.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nops_token_env = \"HOSTILE_OPS_TOKEN\"\ningest_secret_env = \"HOSTILE_INGEST_SECRET\"\n",
    );
    let mut run = common::daemon::run_command(&p);
    run.env("HOSTILE_OPS_TOKEN", TOKEN)
        .env("HOSTILE_INGEST_SECRET", SECRET);
    let daemon = common::daemon::Daemon::start(run);
    let addr = daemon.addr.clone();
    let base = format!("http://{addr}");
    let now = chrono::Utc::now().timestamp();
    let mut cases = ops_cases();
    cases.extend(ingest_cases(now));
    let failed = failures(&base, &reqwest::Client::new(), &cases).await;
    let (code, log) = daemon.stop();
    assert!(failed.is_empty(), "{}\n{log}", failed.join("\n"));
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
