//! `run`: the daemon. The scheduler tick, the worker pool, the lease rescuer, the retention
//! sweeper and the HTTP server, side by side until `cancel`; then the server stops accepting,
//! the pool drains (up to `drain_timeout`) and everything returns.

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::pool::rescuer::RescuerConfig;
use crate::pool::{Pipeline, PoolConfig, Rescuer};
use crate::schedule::SchedulerTick;
use crate::server::{self, ServerState};
use crate::signing::Secret;

/// Runs every service until `cancel`.
pub async fn run(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let server_settings = &config.settings.server;
    let ops_token = std::env::var(&server_settings.ops_token_env)
        .ok()
        .filter(|t| !t.is_empty());
    let ingest_secret = match std::env::var(&server_settings.ingest_secret_env) {
        Ok(s) if !s.is_empty() => Some(
            Secret::parse(&s)
                .map_err(|e| anyhow::anyhow!("{}: {e}", server_settings.ingest_secret_env))?,
        ),
        _ => None,
    };
    server::check_exposure(
        server_settings.bind,
        ops_token.is_some(),
        ingest_secret.is_some(),
    )
    .map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind(server_settings.bind)
        .await
        .with_context(|| format!("cannot listen on {}", server_settings.bind))?;

    let metrics = Arc::new(Metrics::default());
    let pool_config = PoolConfig::from_config(config);
    let rescue_every = (pool_config.lease / 4).to_std().unwrap_or_default().clamp(
        std::time::Duration::from_millis(250),
        std::time::Duration::from_secs(15),
    );
    let pipeline = Arc::new(
        Pipeline::new(config, ledger.clone(), clock.clone(), pool_config)?
            .with_metrics(metrics.clone()),
    );
    let tick = SchedulerTick::new(
        ledger.clone(),
        Arc::new(config.reports.clone()),
        clock.clone(),
        config.settings.schedule.catch_up,
    );
    let rescuer = Rescuer::new(
        ledger.clone(),
        clock.clone(),
        RescuerConfig {
            every: rescue_every,
        },
    )
    .with_metrics(metrics.clone());
    let sweeper = crate::cli::sweeper_for(config, ledger.clone(), clock.clone())?
        .with_metrics(metrics.clone());
    let state = ServerState {
        ledger: ledger.clone(),
        reports: Arc::new(
            config
                .reports
                .iter()
                .map(|r| (r.id.to_string(), r.clone()))
                .collect(),
        ),
        clock: clock.clone(),
        ingest_secret,
        ops_token,
        metrics,
    };
    tracing::info!(
        reports = config.reports.len(),
        backend = ledger.backend_name(),
        listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "dawnpost running"
    );
    let (t, p, (), (), s) = tokio::join!(
        tick.run(cancel.clone()),
        pipeline.run(cancel.clone()),
        rescuer.run(cancel.clone()),
        sweeper.run(cancel.clone()),
        server::serve(listener, server::router(state), cancel.clone()),
    );
    t?;
    p?;
    s?;
    Ok(())
}
