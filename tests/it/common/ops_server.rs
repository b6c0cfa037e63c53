//! The HTTP server on port 0 with a real ledger, and requests to it: signed ingestion and the
//! ops API.

use std::sync::Arc;

use dawnpost::ManualClock;
use dawnpost::delivery::signing::Secret;
use dawnpost::runtime::metrics::Metrics;
use dawnpost::runtime::supervisor::Health;
use dawnpost::server::{ServerState, router};
use reqwest::StatusCode;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Project, TestLedger, at, report};

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub const OTHER_SECRET: &str = "whsec_c2VjcmV0LWIK";
pub const TOKEN: &str = "ops-token-0123456789";
pub const VIEWER_TOKEN: &str = "viewer-token-9876543210";
/// The key the server's links are signed with, under [`LINK_BASE`].
pub const LINK_KEY: &[u8] = b"link-key-0123456789abcdef0123456789";
pub const LINK_BASE: &str = "http://links.test";

/// The links the server serves (made under [`LINK_BASE`]; their paths are the server's).
pub fn links() -> dawnpost::delivery::links::Links {
    dawnpost::delivery::links::Links::new(
        &url::Url::parse(LINK_BASE).expect("url"),
        LINK_KEY.to_vec(),
    )
}

pub struct Server {
    pub base: String,
    pub clock: ManualClock,
    pub http: reqwest::Client,
    pub cancel: CancellationToken,
    pub handle: tokio::task::JoinHandle<std::io::Result<()>>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub project: Project,
    pub artifacts: Arc<dawnpost::report::artifact::ArtifactStore>,
    pub sweeper: Arc<dawnpost::services::sweeper::Sweeper>,
    pub pipeline: Arc<dawnpost::pool::Pipeline>,
    /// The late reports the console's overview lists (a notifier's round sets them).
    pub late: dawnpost::delivery::notice::LateBoard,
    /// What the console wakes this node's runbook driver with when it starts a runbook.
    pub runbooks: dawnpost::runtime::periodic::Nudge,
}

pub async fn start(t: &TestLedger) -> Server {
    start_with(t, "").await
}

/// [`start`] with `dawnpost_toml` as the project's `dawnpost.toml`.
pub async fn start_with(t: &TestLedger, dawnpost_toml: &str) -> Server {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    p.write("config/dawnpost.toml", dawnpost_toml);
    let config = p.load();
    let clock = ManualClock::new(at(2026, 11, 30, 9, 0));
    let metrics = Arc::new(Metrics::default());
    let late = dawnpost::delivery::notice::LateBoard::default();
    let runbooks = dawnpost::runtime::periodic::Nudge::default();
    let health = Arc::new(Health::default());
    let artifacts = dawnpost::report::artifact::ArtifactStore::from_settings(
        &config.settings.artifacts,
        &config.root,
    )
    .expect("artifact store");
    let artifacts = Arc::new(artifacts);
    let shared_clock: dawnpost::domain::clock::SharedClock = Arc::new(clock.clone());
    let pipeline = dawnpost::pool::build(
        &config,
        t.ledger.clone(),
        shared_clock.clone(),
        metrics.clone(),
        (*artifacts).clone(),
    )
    .expect("pool");
    let sweeper = Arc::new(
        dawnpost::services::sweeper::Sweeper::from_config(
            &config,
            t.ledger.clone(),
            shared_clock,
            (*artifacts).clone(),
        )
        .expect("sweeper"),
    );
    let state = ServerState {
        ledger: t.ledger.clone(),
        artifacts: artifacts.clone(),
        reports: pipeline.catalog.clone(),
        clock: Arc::new(clock.clone()),
        ingest_secret: Some(Secret::parse(SECRET).expect("secret")),
        tokens: dawnpost::server::console::session::Tokens {
            ops: Some(TOKEN.into()),
            viewer: Some(VIEWER_TOKEN.into()),
        },
        secure_cookies: false,
        node: dawnpost::server::Node {
            metrics: metrics.clone(),
            health: health.clone(),
            sweeper: sweeper.clone(),
            pool: dawnpost::pool::PoolView::of(&pipeline),
            live_for: chrono::Duration::seconds(30),
            late: late.clone(),
            runbooks: runbooks.clone(),
        },
        links: Some(links()),
        recipients: config.settings.recipients.clone(),
        test_sender: Some(
            dawnpost::views::test_send::TestSender::new(&config).expect("test sender"),
        ),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let cancel = CancellationToken::new();
    let handle = tokio::spawn(dawnpost::server::serve(
        listener,
        router(state),
        dawnpost::server::Limits::default(),
        metrics.clone(),
        cancel.clone(),
    ));
    Server {
        base,
        clock,
        http: reqwest::Client::new(),
        cancel,
        handle,
        metrics,
        health,
        project: p,
        artifacts,
        sweeper,
        pipeline,
        late,
        runbooks,
    }
}

impl Server {
    pub async fn ingest(&self, id: &str, ts: i64, body: &str, secret: &str) -> (StatusCode, Value) {
        let sig = Secret::parse(secret)
            .expect("secret")
            .sign(id, ts, body.as_bytes());
        let resp = self
            .http
            .post(format!("{}/v1/runs", self.base))
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .body(body.to_string())
            .send()
            .await
            .expect("request");
        let status = resp.status();
        (
            status,
            serde_json::from_slice(&resp.bytes().await.unwrap_or_default()).unwrap_or(Value::Null),
        )
    }

    pub fn now(&self) -> i64 {
        use dawnpost::Clock;
        self.clock.now().timestamp()
    }

    pub async fn ops(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        (
            status,
            serde_json::from_slice(&resp.bytes().await.unwrap_or_default()).unwrap_or(Value::Null),
        )
    }
}
