//! Real protocol peers on 127.0.0.1 for the pipeline tests: an SMTP server that answers per
//! recipient, and an HTTP receiver (axum) with scripted behaviours. Both record what they saw
//! and let a test wait on a count instead of sleeping.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path as AxPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One message the SMTP peer received after DATA.
#[derive(Debug, Clone)]
pub struct Mail {
    pub rcpt: String,
    pub data: String,
}

impl Mail {
    pub fn header(&self, name: &str) -> Option<String> {
        let prefix = format!("{}:", name.to_ascii_lowercase());
        self.data
            .lines()
            .take_while(|l| !l.is_empty())
            .find(|l| l.to_ascii_lowercase().starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim().to_string())
    }
}

/// What the SMTP peer answers for a recipient: at RCPT, and after the message data (0: never).
pub type SmtpRule = Arc<dyn Fn(&str, usize) -> (u16, u16) + Send + Sync>;

/// An SMTP server speaking just enough of RFC 5321 for lettre.
pub struct SmtpPeer {
    pub addr: SocketAddr,
    pub accepted: Arc<Mutex<Vec<Mail>>>,
    /// Every DATA received, accepted or not (a 451 after DATA still saw the message).
    pub seen: Arc<Mutex<Vec<Mail>>>,
    rule: Arc<Mutex<SmtpRule>>,
}

impl SmtpPeer {
    /// `rule(recipient, attempt_for_that_recipient)` returns (RCPT reply, reply after DATA).
    pub async fn start(rule: SmtpRule) -> SmtpPeer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind smtp");
        let addr = listener.local_addr().expect("addr");
        let accepted: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let tries: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let rule = Arc::new(Mutex::new(rule));
        let peer = SmtpPeer {
            addr,
            accepted: accepted.clone(),
            seen: seen.clone(),
            rule: rule.clone(),
        };
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (accepted, seen, tries, rule) =
                    (accepted.clone(), seen.clone(), tries.clone(), rule.clone());
                tokio::spawn(async move {
                    let (r, mut w) = sock.into_split();
                    let mut r = BufReader::new(r);
                    let _ = w.write_all(b"220 peer.test ESMTP ready\r\n").await;
                    let mut rcpt = String::new();
                    let mut after_data = 250;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let cmd = line.trim_end().to_string();
                        let upper = cmd.to_ascii_uppercase();
                        let reply: String =
                            if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                                "250-peer.test\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n".into()
                            } else if upper.starts_with("MAIL FROM") {
                                "250 2.1.0 ok\r\n".into()
                            } else if upper.starts_with("RCPT TO") {
                                rcpt = cmd
                                    .split_once('<')
                                    .and_then(|(_, r)| r.split_once('>'))
                                    .map(|(a, _)| a.to_string())
                                    .unwrap_or_default();
                                let n = {
                                    let mut t = tries.lock().expect("lock");
                                    let n = t.entry(rcpt.clone()).or_insert(0);
                                    *n += 1;
                                    *n
                                };
                                let f = rule.lock().expect("lock").clone();
                                let (at_rcpt, at_data) = f(&rcpt, n);
                                after_data = at_data;
                                format!("{at_rcpt} {}\r\n", text_of(at_rcpt))
                            } else if upper == "DATA" {
                                let _ = w.write_all(b"354 go ahead\r\n").await;
                                let mut data = String::new();
                                loop {
                                    line.clear();
                                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                                        return;
                                    }
                                    if line == ".\r\n" || line == ".\n" {
                                        break;
                                    }
                                    data.push_str(
                                        line.strip_prefix('.')
                                            .filter(|_| line.starts_with(".."))
                                            .unwrap_or(&line),
                                    );
                                }
                                let mail = Mail {
                                    rcpt: rcpt.clone(),
                                    data,
                                };
                                seen.lock().expect("lock").push(mail.clone());
                                if after_data == 0 {
                                    // Never answer: the client cannot know whether we took it.
                                    std::future::pending::<()>().await;
                                }
                                if after_data == 250 {
                                    accepted.lock().expect("lock").push(mail);
                                }
                                format!("{after_data} {}\r\n", text_of(after_data))
                            } else if upper == "QUIT" {
                                let _ = w.write_all(b"221 bye\r\n").await;
                                return;
                            } else {
                                "250 ok\r\n".into()
                            };
                        if w.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        peer
    }

    pub fn set_rule(&self, rule: SmtpRule) {
        *self.rule.lock().expect("lock") = rule;
    }

    pub fn accepted(&self) -> Vec<Mail> {
        self.accepted.lock().expect("lock").clone()
    }

    pub fn seen(&self) -> Vec<Mail> {
        self.seen.lock().expect("lock").clone()
    }
}

fn text_of(code: u16) -> &'static str {
    match code {
        250 => "2.0.0 ok",
        421 => "4.3.2 service not available, closing",
        450 | 451 => "4.7.1 try again later",
        452 => "4.5.3 too many recipients",
        550 => "5.1.1 mailbox unavailable",
        _ => "whatever",
    }
}

/// One request the HTTP receiver saw.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub at: Instant,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub status: u16,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// How the receiver answers a path: (status, Retry-After, delay before answering).
pub type HttpRule =
    Arc<dyn Fn(&str, usize, Duration) -> (u16, Option<String>, Duration) + Send + Sync>;

#[derive(Clone)]
struct RecvState {
    hits: Arc<Mutex<Vec<Hit>>>,
    rule: HttpRule,
    started: Instant,
    count_tx: watch::Sender<usize>,
}

/// Serves `app` on a free port of 127.0.0.1 until the test's runtime ends: its address.
pub async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind http");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// An axum server on 127.0.0.1:0. `rule(path, nth request to that path, time since start)`.
pub struct Receiver {
    pub addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    count_rx: watch::Receiver<usize>,
}

impl Receiver {
    pub async fn start(rule: HttpRule) -> Receiver {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let (count_tx, count_rx) = watch::channel(0usize);
        let state = RecvState {
            hits: hits.clone(),
            rule,
            started: Instant::now(),
            count_tx,
        };
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(handle).get(handle))
            .with_state(state);
        let addr = serve(app).await;
        Receiver {
            addr,
            hits,
            count_rx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("lock").clone()
    }

    pub fn hits_for(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
    }

    /// Waits (without sleeping) until at least `n` requests were answered.
    pub async fn wait_for(&self, n: usize, limit: Duration) {
        assert!(
            self.reached(n, limit).await,
            "receiver did not see {n} requests within {limit:?}"
        );
    }

    /// How many times each delivery key (`webhook-id`) arrived.
    pub fn arrivals(&self) -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        for key in self.hits().iter().filter_map(|h| h.header("webhook-id")) {
            *n.entry(key).or_insert(0) += 1;
        }
        n
    }

    /// The distinct delivery keys that arrived.
    pub fn delivered(&self) -> BTreeSet<String> {
        self.arrivals().into_keys().collect()
    }

    /// Waits (without sleeping) until `n` delivery keys each arrived at least `times` times;
    /// false if not within `limit`.
    pub async fn keys_reached(&self, n: usize, times: usize, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        let done = |rx: &Receiver| rx.arrivals().values().filter(|c| **c >= times).count() >= n;
        loop {
            // Counted before the check: a hit arriving between the two is not waited for again.
            let seen = self.hits().len();
            if done(self) {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.reached(seen + 1, left).await {
                return done(self);
            }
        }
    }

    /// Whether at least `n` requests arrived within `limit` (waiting without sleeping).
    pub async fn reached(&self, n: usize, limit: Duration) -> bool {
        let mut rx = self.count_rx.clone();
        matches!(
            tokio::time::timeout(limit, rx.wait_for(|c| *c >= n)).await,
            Ok(Ok(_))
        )
    }
}

async fn handle(
    State(st): State<RecvState>,
    AxPath(path): AxPath<String>,
    headers: HeaderMap,
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
    let (status, retry_after, delay) = (st.rule)(&path, nth, st.started.elapsed());
    let at = Instant::now();
    // Recorded on arrival: a client that times out drops the connection before any answer.
    let n = {
        let mut hits = st.hits.lock().expect("lock");
        hits.push(Hit {
            path,
            at,
            headers,
            body,
            status,
        });
        hits.len()
    };
    st.count_tx.send_replace(n);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut resp = StatusCode::from_u16(status)
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        .into_response();
    if let Some(ra) = retry_after {
        resp.headers_mut()
            .insert("retry-after", ra.parse().expect("header value"));
    }
    resp
}
