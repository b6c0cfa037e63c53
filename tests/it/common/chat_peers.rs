//! Chat services on 127.0.0.1, answering as their documentation says they do: a Slack incoming
//! webhook (200 `ok` in text; a 4xx with its error string: `invalid_payload` for a body that is
//! not JSON, `no_text` for a message with neither text nor blocks, `invalid_blocks` past 50
//! blocks) and a Teams Workflows webhook (202 with an empty body; 400 with a JSON error for a
//! body that is not a message carrying an Adaptive Card; 413 past 28,672 bytes). A script may
//! answer a path otherwise first — an archived channel, a removed webhook, a 429 with
//! `Retry-After`, a hang — as the services do. Every request is recorded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path as AxPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Which service a peer stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Slack,
    Teams,
}

/// An answer a script gives instead of the service's own: status, body, Retry-After, and a
/// delay before answering.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub retry_after: Option<String>,
    pub delay: Duration,
}

impl Answer {
    pub fn new(status: u16, body: &str) -> Answer {
        Answer {
            status,
            body: body.into(),
            retry_after: None,
            delay: Duration::ZERO,
        }
    }

    pub fn retry_after(mut self, seconds: &str) -> Answer {
        self.retry_after = Some(seconds.into());
        self
    }

    pub fn after(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }
}

/// `script(path, nth request to that path)`: an answer, or `None` for the service's own.
pub type Script = Arc<dyn Fn(&str, usize) -> Option<Answer> + Send + Sync>;

/// One request a peer saw, and how it answered.
#[derive(Debug, Clone)]
pub struct ChatHit {
    pub path: String,
    pub at: Instant,
    pub body: Bytes,
    pub status: u16,
}

impl ChatHit {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Clone)]
struct PeerState {
    service: Service,
    script: Script,
    hits: Arc<Mutex<Vec<ChatHit>>>,
    count: watch::Sender<usize>,
}

pub struct ChatPeer {
    addr: std::net::SocketAddr,
    hits: Arc<Mutex<Vec<ChatHit>>>,
    count: watch::Receiver<usize>,
}

impl ChatPeer {
    pub async fn start(service: Service, script: Script) -> ChatPeer {
        let hits: Arc<Mutex<Vec<ChatHit>>> = Arc::default();
        let (tx, count) = watch::channel(0);
        let state = PeerState {
            service,
            script,
            hits: hits.clone(),
            count: tx,
        };
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(answer))
            .layer(axum::extract::DefaultBodyLimit::max(1 << 20))
            .with_state(state);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ChatPeer { addr, hits, count }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn hits_for(&self, path: &str) -> Vec<ChatHit> {
        let hits = self.hits.lock().expect("lock");
        hits.iter().filter(|h| h.path == path).cloned().collect()
    }

    /// Waits (without sleeping) until at least `n` requests arrived.
    pub async fn wait_for(&self, n: usize, limit: Duration) {
        let mut rx = self.count.clone();
        let reached = tokio::time::timeout(limit, rx.wait_for(|c| *c >= n)).await;
        assert!(
            matches!(reached, Ok(Ok(_))),
            "{n} requests did not arrive in {limit:?}"
        );
    }
}

async fn answer(
    State(st): State<PeerState>,
    AxPath(path): AxPath<String>,
    body: Bytes,
) -> Response {
    let nth = st
        .hits
        .lock()
        .expect("lock")
        .iter()
        .filter(|h| h.path == path)
        .count()
        + 1;
    let answer = (st.script)(&path, nth).unwrap_or_else(|| match st.service {
        Service::Slack => slack(&body),
        Service::Teams => teams(&body),
    });
    let n = {
        let mut hits = st.hits.lock().expect("lock");
        hits.push(ChatHit {
            path,
            at: Instant::now(),
            body,
            status: answer.status,
        });
        hits.len()
    };
    st.count.send_replace(n);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, answer.body).into_response();
    if let Some(ra) = answer.retry_after {
        resp.headers_mut()
            .insert("retry-after", ra.parse().expect("header value"));
    }
    resp
}

/// What Slack answers a message.
fn slack(body: &[u8]) -> Answer {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Answer::new(400, "invalid_payload");
    };
    let text = v["text"].as_str().is_some_and(|t| !t.trim().is_empty());
    let blocks = v["blocks"].as_array().map_or(0, Vec::len);
    match (text, blocks) {
        (false, 0) => Answer::new(400, "no_text"),
        (_, n) if n > 50 => Answer::new(400, "invalid_blocks"),
        _ => Answer::new(200, "ok"),
    }
}

/// What a Workflows webhook answers a message.
fn teams(body: &[u8]) -> Answer {
    if body.len() > 28_672 {
        return Answer::new(
            413,
            r#"{"error":{"code":"MessageTooLarge","message":"The request content length exceeds the limit."}}"#,
        );
    }
    let card = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .filter(|v| {
            v["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
        });
    match card {
        Some(_) => Answer::new(202, ""),
        None => Answer::new(
            400,
            r#"{"error":{"code":"InvalidRequestContent","message":"The input body for trigger 'manual' of type 'Request' did not match its schema definition."}}"#,
        ),
    }
}
