//! Hostile HTTP requests, table-driven: each gets the status a client can act on and a JSON
//! body `{"error": …}` that says why; the token is checked before anything else is parsed;
//! nothing panics.

mod common;

use common::TestLedger;
use common::ops_server::{SECRET, Server, TOKEN, start};
use dawnpost::signing::{MAX_SIGNATURES, Secret};
use reqwest::{Method, StatusCode};

/// One request and what it must get.
struct Case {
    name: &'static str,
    method: Method,
    path: String,
    token: Option<&'static str>,
    body: Option<Vec<u8>>,
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
        big(case("3 MiB redrive body, no token", post, &format!("/v1/jobs/{key}/redrive"), None, S::UNAUTHORIZED, "token")),
    ]
}

async fn send(s: &Server, c: &Case, scheme: &str) -> (StatusCode, String, serde_json::Value) {
    if c.body.as_ref().is_some_and(|b| b.len() > 1 << 20) {
        return send_head_only(s, c, scheme).await;
    }
    let mut req = s
        .http
        .request(c.method.clone(), format!("{}{}", s.base, c.path));
    if let Some(t) = c.token {
        req = req.header("authorization", format!("{scheme} {t}"));
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
    s: &Server,
    c: &Case,
    scheme: &str,
) -> (StatusCode, String, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.base.trim_start_matches("http://");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ops_error_is_json_with_the_right_status() {
    let t = TestLedger::sqlite().await;
    let s = start(&t).await;
    for c in ops_cases() {
        let (status, content_type, json) = send(&s, &c, "Bearer").await;
        assert_eq!(status, c.status, "{}: {json}", c.name);
        assert!(
            content_type.starts_with("application/json"),
            "{}: {content_type}",
            c.name
        );
        let error = json["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no error in {json}", c.name));
        assert!(
            error.to_lowercase().contains(&c.says.to_lowercase()),
            "{}: {error:?} does not say {:?}",
            c.name,
            c.says
        );
    }
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
    let now = s.now();
    let ok = r#"{"report": "warehouse-17", "date": "2026-11-29"}"#;
    // A far-future year: refused before any job exists.
    let (status, reply) = s
        .ingest(
            "msg_far",
            now,
            r#"{"report": "warehouse-17", "date": "+99999-01-01"}"#,
            SECRET,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
    assert!(
        reply["error"].as_str().unwrap_or("").contains("YYYY-MM-DD"),
        "{reply}"
    );
    // A timestamp that overflows the skew arithmetic is a refusal, not a panic.
    let (status, reply) = s.ingest("msg_min", i64::MIN, ok, SECRET).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{reply}");
    // Thousands of signature entries: refused without thousands of HMACs.
    let sig = Secret::parse(SECRET)
        .expect("secret")
        .sign("msg_many", now, ok.as_bytes());
    let many = vec!["v1,bm90IHRoaXM="; MAX_SIGNATURES * 500].join(" ");
    let resp = s
        .http
        .post(format!("{}/v1/runs", s.base))
        .header("webhook-id", "msg_many")
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", format!("{many} {sig}"))
        .body(ok)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let reply: serde_json::Value =
        serde_json::from_slice(&resp.bytes().await.unwrap_or_default()).expect("json");
    assert!(reply["error"].as_str().is_some(), "{reply}");
    let jobs = t
        .ledger
        .job_list(&dawnpost::ledger::JobFilter::default())
        .await
        .expect("jobs");
    assert!(jobs.is_empty(), "no refused request made a job: {jobs:?}");
    s.cancel.cancel();
    t.cleanup().await;
}
