//! `run`: the daemon. The scheduler tick, the worker pool, the lease rescuer, the retention
//! sweeper, the bulk-redrive driver, the timekeeper (the node's clock on the ledger's) and the
//! HTTP server, side by side under a [`crate::supervisor`] until `cancel`; then
//! the server stops accepting, the pool drains (up to `drain_timeout`) and everything returns.
//! A failed service is restarted with backoff, or ends the daemon with an error.

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::server::console::session::Tokens;
use crate::server::{self, ServerState};
use crate::signing::Secret;
use crate::supervisor::{Health, OnFailure, Service, SupervisorConfig, supervise};
use crate::sweeper::Sweeper;
use crate::tick::SchedulerTick;

/// Runs every service until `cancel`.
pub async fn run(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    let (pipeline, rescuer) =
        crate::pool::build(config, ledger.clone(), clock.clone(), metrics.clone())?;
    let sweeper = Arc::new(
        Sweeper::from_config(config, ledger.clone(), clock.clone())?.with_metrics(metrics.clone()),
    );
    let node = server::Node {
        metrics: metrics.clone(),
        health: health.clone(),
        sweeper: sweeper.clone(),
        pipeline: pipeline.clone(),
    };
    let (listener, state) = server_for(config, &ledger, &clock, node).await?;
    let tick = SchedulerTick::new(
        ledger.clone(),
        Arc::new(config.reports.clone()),
        clock.clone(),
        config.settings.schedule.catch_up,
    );
    tracing::info!(
        reports = config.reports.len(),
        backend = ledger.backend_name(),
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "dawnpost running"
    );
    let timekeeper = Arc::new(crate::timekeeper::Timekeeper {
        ledger: ledger.clone(),
        clock: clock.clone(),
        metrics: metrics.clone(),
        bound: config.settings.pool.max_clock_offset,
    });
    // Read before anything leases: the offset is known, and refused if past the bound.
    timekeeper.check().await;
    let (tick, rescuer) = (Arc::new(tick), Arc::new(rescuer));
    let runbooks = Arc::new(crate::runbook::Driver::new(ledger.clone(), clock.clone()));
    // The listener cannot be rebuilt in place: if the server fails, the daemon stops.
    let server = std::sync::Mutex::new(Some((listener, server::router(state))));
    let limits = server::Limits::from_settings(&config.settings.server);
    let server_metrics = metrics.clone();
    let services = vec![
        // Every service but the server restarts after a failure; the server cannot (above).
        Service::new("tick", OnFailure::Restart, move |cancel| {
            let tick = tick.clone();
            Box::pin(async move { Ok(tick.run(cancel).await?) })
        }),
        Service::new("pool", OnFailure::Restart, move |cancel| {
            let pipeline = pipeline.clone();
            Box::pin(async move { Ok(pipeline.run(cancel).await?) })
        }),
        Service::new("rescuer", OnFailure::Restart, move |cancel| {
            let rescuer = rescuer.clone();
            Box::pin(async move {
                rescuer.run(cancel).await;
                Ok(())
            })
        }),
        Service::new("sweeper", OnFailure::Restart, move |cancel| {
            let sweeper = sweeper.clone();
            Box::pin(async move {
                sweeper.run(cancel).await;
                Ok(())
            })
        }),
        Service::new("runbooks", OnFailure::Restart, move |cancel| {
            let runbooks = runbooks.clone();
            Box::pin(async move {
                runbooks.run(cancel).await;
                Ok(())
            })
        }),
        Service::new("clock", OnFailure::Restart, move |cancel| {
            let timekeeper = timekeeper.clone();
            Box::pin(async move {
                timekeeper.run(cancel).await;
                Ok(())
            })
        }),
        Service::new("server", OnFailure::Exit, move |cancel| {
            let taken = server.lock().unwrap_or_else(|e| e.into_inner()).take();
            let server_metrics = server_metrics.clone();
            Box::pin(async move {
                let (listener, router) =
                    taken.ok_or_else(|| anyhow::anyhow!("the listener is gone"))?;
                server::serve(listener, router, limits, server_metrics, cancel).await?;
                Ok(())
            })
        }),
    ];
    supervise(
        services,
        health,
        metrics,
        SupervisorConfig::default(),
        cancel,
    )
    .await
}

/// The HTTP listener (refused off loopback without both credentials) and its handlers' state.
async fn server_for(
    config: &Config,
    ledger: &Ledger,
    clock: &SharedClock,
    node: server::Node,
) -> anyhow::Result<(tokio::net::TcpListener, ServerState)> {
    let settings = &config.settings.server;
    // A token set but empty is unset: an empty token would let anyone in.
    let token = |name: &str| std::env::var(name).ok().filter(|t| !t.is_empty());
    let tokens = Tokens {
        ops: token(&settings.ops_token_env),
        viewer: token(&settings.viewer_token_env),
    };
    let ingest_secret = match std::env::var(&settings.ingest_secret_env) {
        Ok(s) if !s.is_empty() => Some(
            Secret::parse(&s)
                .map_err(|e| anyhow::anyhow!("{}: {e}", settings.ingest_secret_env))?,
        ),
        _ => None,
    };
    server::check_exposure(settings.bind, tokens.ops.is_some(), ingest_secret.is_some())?;
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .with_context(|| format!("cannot listen on {}", settings.bind))?;
    let artifacts =
        crate::artifact::ArtifactStore::from_settings(&config.settings.artifacts, &config.root)?;
    let state = ServerState {
        ledger: ledger.clone(),
        artifacts: Arc::new(artifacts),
        reports: Arc::new(config.reports_by_id()),
        clock: clock.clone(),
        ingest_secret,
        tokens,
        secure_cookies: !settings.bind.ip().is_loopback(),
        node,
    };
    Ok((listener, state))
}
