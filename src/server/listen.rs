//! The accept loop: every connection bounded in time and in number, so that a slow or silent
//! client is cut while others are served.
//!
//! - At most `max_connections` are open at once; one more is answered 503 and closed (at most
//!   64 such answers at once; past them, closed without one).
//! - A request head must arrive within `header_timeout`: the first one counted from the
//!   connection's accept, each later one (hyper's keep-alive) from the end of the previous
//!   response — so an idle kept-alive connection is closed after `header_timeout` too.
//! - A request body must arrive within `body_timeout` of its head ([`DeadlineBody`]).
//! - The first request head of every connection is read and checked here (httparse, as hyper
//!   parses it) before hyper sees it, so a malformed head is refused with the same JSON body
//!   `{"error": …}` as every other error. A malformed head that follows a well-formed request on
//!   a kept-alive connection is refused by hyper itself: a bare 400 or 431, no body.
//!
//! Each cut or refusal is counted in `dawnpost_http_connections_cut_total{reason}`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::{Buf, Bytes, BytesMut};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::head::{HeadCheck, MAX_HEADERS, check_head};
use crate::runtime::metrics::Metrics;

/// The bounds of every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    /// The bounds `[server]` sets.
    pub fn from_settings(s: &crate::config::ServerSettings) -> Limits {
        Limits {
            header_timeout: s.header_timeout.as_std(),
            body_timeout: s.body_timeout.as_std(),
            max_connections: s.max_connections as usize,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 512,
        }
    }
}

/// The largest request head read: request line and headers (hyper's own default is ~400 KiB).
pub(crate) const HEAD_LIMIT: usize = 256 * 1024;
/// How long a refusal written by this loop may take to reach a client, and how long what the
/// client still sends is read and dropped after it (so that closing with unread bytes does not
/// reset the connection before the client has read the refusal).
const REFUSAL_WRITE: Duration = Duration::from_secs(1);
/// The most bytes read and dropped after a refusal.
const REFUSAL_DRAIN: usize = 1 << 20;
/// The most "too many connections" refusals written at once; past them, a connection over the
/// limit is closed without an answer (a flood must not grow the tasks that answer it).
const REFUSALS_AT_ONCE: usize = 64;

/// Serves `router` on `listener` until `cancel`, then stops accepting and lets each open
/// connection finish the request it is serving.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let refusals = Arc::new(tokio::sync::Semaphore::new(REFUSALS_AT_ONCE));
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // A connection reset before it was accepted, or out of file descriptors: the
            // listener itself is fine; wait a moment (EMFILE) and go on.
            Err(e) => {
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let metrics = metrics.clone();
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.http_cut("too_many_connections");
            if let Ok(turn) = refusals.clone().try_acquire_owned() {
                tasks.spawn(async move {
                    refuse(stream, 503, "too many open connections; retry later").await;
                    drop(turn);
                });
            }
            continue;
        };
        let (router, cancel) = (router.clone(), cancel.clone());
        tasks.spawn(async move {
            metrics.http_connections_open.inc();
            connection(stream, router, limits, &metrics, cancel).await;
            metrics.http_connections_open.dec();
            drop(slot);
        });
    }
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// One connection: its first head read and checked here, then hyper.
async fn connection(
    mut stream: TcpStream,
    router: Router,
    limits: Limits,
    metrics: &Arc<Metrics>,
    cancel: CancellationToken,
) {
    let head = tokio::select! {
        _ = cancel.cancelled() => return,
        head = tokio::time::timeout(limits.header_timeout, read_head(&mut stream)) => head,
    };
    let buffered = match head {
        Err(_) => {
            metrics.http_cut("header_timeout");
            let secs = limits.header_timeout.as_secs();
            let message = format!("the request head did not arrive within {secs}s");
            return refuse(stream, 408, &message).await;
        }
        Ok(Err(_)) | Ok(Ok(Head::Closed)) => return,
        Ok(Ok(Head::TooLarge)) => {
            metrics.http_cut("malformed");
            let message = format!("the request head is larger than {HEAD_LIMIT} bytes");
            return refuse(stream, 431, &message).await;
        }
        Ok(Ok(Head::Complete(buf))) => buf,
    };
    if let HeadCheck::Refuse { status, message } = check_head(&buffered) {
        metrics.http_cut("malformed");
        return refuse(stream, status, &message).await;
    }
    let body_timeout = limits.body_timeout;
    let cut = metrics.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let cut = cut.clone();
        let req = req.map(|b| Body::new(DeadlineBody::new(b, body_timeout, cut)));
        router.clone().oneshot(req)
    });
    let io = TokioIo::new(Prefixed {
        prefix: buffered.freeze(),
        inner: stream,
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(MAX_HEADERS)
        .max_buf_size(HEAD_LIMIT);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        if e.is_timeout() {
            metrics.http_cut("header_timeout");
        }
        tracing::debug!(error = %e, "connection ended");
    }
}

enum Head {
    Complete(BytesMut),
    TooLarge,
    Closed,
}

/// Reads up to the end of the first request head (`\r\n\r\n`), at most [`HEAD_LIMIT`] bytes.
/// Bytes after the head (a body, a pipelined request) stay in the buffer for hyper.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Head> {
    let mut buf = BytesMut::with_capacity(1024);
    let mut searched = 0;
    loop {
        if buf[searched..].windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(Head::Complete(buf));
        }
        searched = buf.len().saturating_sub(3);
        if buf.len() >= HEAD_LIMIT {
            return Ok(Head::TooLarge);
        }
        let mut chunk = [0u8; 8192];
        let want = (HEAD_LIMIT + 1 - buf.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Writes a JSON refusal and closes, within [`REFUSAL_WRITE`].
async fn refuse(mut stream: TcpStream, status: u16, message: &str) {
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = serde_json::json!({ "error": message }).to_string();
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        let mut sink = [0u8; 8192];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// The connection with the bytes already read in front of it.
struct Prefixed {
    prefix: Bytes,
    inner: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that must arrive whole within its deadline; past it, reading fails with
/// [`BodyTimeout`] (the handler answers 408).
struct DeadlineBody {
    inner: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

impl DeadlineBody {
    fn new(inner: hyper::body::Incoming, timeout: Duration, metrics: Arc<Metrics>) -> Self {
        DeadlineBody {
            inner,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            metrics,
        }
    }
}

/// The body did not arrive within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {}s", .0.as_secs())]
pub(crate) struct BodyTimeout(pub Duration);

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.metrics.http_cut("body_timeout");
            return Poll::Ready(Some(Err(Box::new(BodyTimeout(self.timeout)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
