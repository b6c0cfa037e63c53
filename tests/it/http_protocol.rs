//! The daemon's HTTP server against raw sockets: malformed requests hyper would refuse with a
//! bare status get a JSON body that says why; slow clients (a head trickled a byte at a time,
//! a body that never comes, an idle kept-alive connection) are cut at their deadline and
//! counted while others are served; the connection limit refuses one more with 503.

use crate::common;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

trait FilterOk: Sized {
    fn filter_ok(self) -> Option<reqwest::Response>;
}

impl FilterOk for reqwest::Result<reqwest::Response> {
    fn filter_ok(self) -> Option<reqwest::Response> {
        self.ok().filter(|r| r.status() == 200)
    }
}

/// A daemon with short limits: heads and bodies within 1 s, at most 40 connections.
fn daemon() -> (common::Project, common::daemon::Daemon) {
    let p = common::Project::new(&common::report(
        "warehouse-17",
        "0 30 6 * * *",
        "Europe/Berlin",
    ));
    p.write(
        "config/dawnpost.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nheader_timeout = \"1s\"\nbody_timeout = \"1s\"\nmax_connections = 40\n",
    );
    let d = common::daemon::Daemon::start(common::daemon::run_command(&p));
    (p, d)
}

/// What came back on a raw connection: the status, the body, and how long until the server
/// closed it (or the 10 s this waits at most).
struct Reply {
    status: Option<u16>,
    body: String,
    closed_after: Duration,
}

async fn read_reply(stream: &mut TcpStream) -> Reply {
    let start = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok());
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Reply {
        status,
        body,
        closed_after: start.elapsed(),
    }
}

async fn raw(addr: &str, request: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // The server may answer (and close) before it reads everything, as it should for a head
    // it refuses: a write error then is no failure.
    let _ = stream.write_all(request).await;
    read_reply(&mut stream).await
}

fn post(path: &str, headers: &str, body: &str) -> Vec<u8> {
    format!("POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}\r\n{body}")
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_are_answered_in_json_with_their_own_status() {
    let (_p, d) = daemon();
    let addr = d.addr.clone();
    let huge = format!("x-big: {}\r\n", "a".repeat(1 << 20));
    let many: String = (0..101).map(|i| format!("x-h{i}: v\r\n")).collect();
    let run = r#"{"report":"warehouse-17"}"#;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "bad Content-Length",
            post("/v1/runs", "content-length: 1x\r\n", ""),
            400,
            "Content-Length",
        ),
        (
            "two Content-Lengths",
            post(
                "/v1/runs",
                "content-length: 1\r\ncontent-length: 2\r\n",
                "ab",
            ),
            400,
            "Content-Length",
        ),
        (
            "Content-Length and chunked",
            post(
                "/v1/runs",
                "content-length: 2\r\ntransfer-encoding: chunked\r\n",
                "0\r\n\r\n",
            ),
            400,
            "Transfer-Encoding",
        ),
        (
            "a 1 MB header",
            format!("GET /healthz HTTP/1.1\r\n{huge}\r\n").into_bytes(),
            431,
            "larger than",
        ),
        (
            "101 headers",
            format!("GET /healthz HTTP/1.1\r\n{many}\r\n").into_bytes(),
            431,
            "headers",
        ),
        (
            "a space in a header name",
            b"GET /healthz HTTP/1.1\r\nbad name: x\r\n\r\n".to_vec(),
            400,
            "header name",
        ),
        (
            "a NUL byte in a header",
            b"GET /healthz HTTP/1.1\r\nx-a: a\0b\r\n\r\n".to_vec(),
            400,
            "control character",
        ),
        (
            "HTTP/9.9",
            b"GET /healthz HTTP/9.9\r\n\r\n".to_vec(),
            505,
            "HTTP/1.1",
        ),
        (
            "a space in the path",
            b"GET /a b HTTP/1.1\r\n\r\n".to_vec(),
            400,
            "request line",
        ),
        (
            "a malformed chunked body",
            post(
                "/v1/runs",
                "content-type: application/json\r\ntransfer-encoding: chunked\r\n",
                "zz\r\nabc\r\n0\r\n\r\n",
            ),
            400,
            "could not be read",
        ),
        (
            "a run as text/plain",
            post(
                "/v1/runs",
                &format!(
                    "content-type: text/plain\r\ncontent-length: {}\r\n",
                    run.len()
                ),
                run,
            ),
            415,
            "application/json",
        ),
        (
            "a body that never comes",
            post(
                "/v1/runs",
                "content-type: application/json\r\ncontent-length: 1000\r\n",
                "0123456789",
            ),
            408,
            "did not arrive",
        ),
    ];
    let mut failed = Vec::new();
    for (name, request, status, says) in cases {
        let reply = raw(&addr, &request).await;
        let json: Option<serde_json::Value> = serde_json::from_str(&reply.body).ok();
        let error = json
            .as_ref()
            .and_then(|j| j["error"].as_str())
            .unwrap_or_default()
            .to_string();
        if reply.status != Some(status) || !error.contains(says) {
            failed.push(format!(
                "{name}: got {:?} {:?}, want {status} saying {says:?}",
                reply.status, reply.body
            ));
        }
    }
    let (code, log) = d.stop();
    assert!(failed.is_empty(), "{}\n{log}", failed.join("\n"));
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// A series of `/metrics`, asked for until a connection slot is free again.
async fn metric(addr: &str, series: &str) -> f64 {
    let mut text = String::new();
    for _ in 0..50 {
        let resp = reqwest::get(format!("http://{addr}/metrics")).await;
        if let Some(r) = resp.filter_ok() {
            text = r.text().await.expect("text");
            break;
        }
        tokio::task::yield_now().await;
    }
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_at_their_deadline_while_others_are_served() {
    let (_p, d) = daemon();
    let addr = d.addr.clone();
    // 30 requests left unfinished, and one head trickled a byte every 300 ms.
    let mut unfinished = Vec::new();
    for _ in 0..30 {
        let mut s = TcpStream::connect(&addr).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
            .await
            .expect("write");
        unfinished.push(s);
    }
    let trickle_addr = addr.clone();
    let trickler = tokio::spawn(async move {
        let mut s = TcpStream::connect(&trickle_addr).await.expect("connect");
        let start = Instant::now();
        for byte in b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n" {
            if s.write_all(&[*byte]).await.is_err() {
                break;
            }
            let mut probe = [0u8; 512];
            match tokio::time::timeout(Duration::from_millis(300), s.read(&mut probe)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => break, // the 408 came
                Err(_) => {}
            }
        }
        start.elapsed()
    });
    // Meanwhile a well-behaved client is served.
    let started = Instant::now();
    let ok = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(ok.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(1), "served at once");
    // Every unfinished request is cut at about the header timeout, with a 408 in JSON.
    for mut s in unfinished {
        let reply = read_reply(&mut s).await;
        assert_eq!(reply.status, Some(408), "{}", reply.body);
        assert!(reply.body.contains("did not arrive"), "{}", reply.body);
        assert!(reply.closed_after < Duration::from_secs(3));
    }
    let trickled = trickler.await.expect("trickler");
    assert!(
        trickled < Duration::from_secs(3),
        "a trickled head is cut at the header timeout, not served byte by byte: {trickled:?}"
    );
    // An idle kept-alive connection is closed after the same timeout.
    let mut idle = TcpStream::connect(&addr).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    let mut first = [0u8; 1024];
    let n = idle.read(&mut first).await.expect("read");
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let closed = read_reply(&mut idle).await;
    assert!(
        closed.closed_after < Duration::from_secs(3),
        "idle for {:?}",
        closed.closed_after
    );
    let cut = metric(
        &addr,
        "dawnpost_http_connections_cut_total{reason=\"header_timeout\"}",
    )
    .await;
    assert!(cut >= 32.0, "{cut} cut");
    let (code, log) = d.stop();
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_over_the_limit_is_refused_503() {
    let (_p, d) = daemon();
    let addr = d.addr.clone();
    let mut held = Vec::new();
    for _ in 0..40 {
        held.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    // The server has accepted all 40 once the next one is refused; retry until it has.
    let mut reply = raw(&addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    for _ in 0..20 {
        if reply.status == Some(503) {
            break;
        }
        reply = raw(&addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    }
    assert_eq!(reply.status, Some(503), "{}", reply.body);
    assert!(
        reply.body.contains("too many open connections"),
        "{}",
        reply.body
    );
    drop(held);
    let refused = metric(
        &addr,
        "dawnpost_http_connections_cut_total{reason=\"too_many_connections\"}",
    )
    .await;
    assert!(refused >= 1.0);
    let (code, log) = d.stop();
    assert_eq!(code, Some(0), "{log}");
}
