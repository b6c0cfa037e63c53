//! `run`: the daemon. The scheduler tick, the worker pool, the lease rescuer, the retention
//! sweeper, the bulk-redrive driver, the owners' notifier, the timekeeper (the node's clock on the ledger's) and the
//! HTTP server, side by side under a [`crate::runtime::supervisor`] until `cancel`; then
//! the server stops accepting, the pool drains (up to `drain_timeout`) and everything returns.
//! A failed service is restarted with backoff, or ends the daemon with an error.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::delivery::signing::Secret;
use crate::domain::clock::SharedClock;
use crate::ledger::Ledger;
use crate::runtime::metrics::Metrics;
use crate::runtime::supervisor::{
    Health, OnFailure, Service, ServiceError, SupervisorConfig, supervise,
};
use crate::server::console::session::Tokens;
use crate::server::{self, ServerState};
use crate::services::sweeper::Sweeper;
use crate::services::tick::SchedulerTick;

/// Why the daemon could not start, or what ended it.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Pool(#[from] crate::pool::PoolError),
    #[error(transparent)]
    Artifacts(#[from] crate::report::artifact::ArtifactError),
    #[error(transparent)]
    Notifier(#[from] crate::services::notifier::NotifierError),
    #[error("{env}: {reason}")]
    Secret { env: String, reason: String },
    #[error(transparent)]
    Exposure(#[from] server::ExposureError),
    #[error("[server] link_secret_env: {0}")]
    Links(#[from] crate::delivery::links::LinkError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Stopped(#[from] crate::runtime::supervisor::SupervisorError),
}

/// Runs every service until `cancel`.
pub async fn run(
    config: &Config,
    ledger: Ledger,
    clock: SharedClock,
    cancel: CancellationToken,
) -> Result<(), DaemonError> {
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    let parts = Parts::build(config, &ledger, &clock, &metrics, &health).await?;
    tracing::info!(
        reports = config.reports.len(),
        backend = ledger.backend_name(),
        listen = %parts.listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "dawnpost running"
    );
    let leadership = parts.pipeline.leadership();
    let (timekeeper, registry) = register(config, &ledger, &clock, &metrics, leadership).await;
    let mut services = parts.services(config, &metrics);
    services.push(periodic("clock", timekeeper, |t, cancel| async move {
        t.run(cancel).await
    }));
    services.push(periodic("registry", registry, |r, cancel| async move {
        r.run(cancel).await
    }));
    supervise(
        services,
        health,
        metrics,
        SupervisorConfig::default(),
        cancel,
    )
    .await?;
    Ok(())
}

/// The node's services and its HTTP side, built before anything leases.
struct Parts {
    pipeline: Arc<crate::pool::Pipeline>,
    /// The housekeeping the leading node runs at full pace, the others as a backstop: they
    /// share the pool's [`crate::runtime::leadership::Leadership`], which the registry's heartbeats set.
    rescuer: Arc<crate::services::rescuer::Rescuer>,
    runbooks: Arc<crate::services::runbook::Driver>,
    sweeper: Arc<Sweeper>,
    notifier: Arc<crate::services::notifier::Notifier>,
    tick: Arc<SchedulerTick>,
    reloader: Arc<crate::services::reload::Reloader>,
    listener: tokio::net::TcpListener,
    state: ServerState,
}

impl Parts {
    async fn build(
        config: &Config,
        ledger: &Ledger,
        clock: &SharedClock,
        metrics: &Arc<Metrics>,
        health: &Arc<Health>,
    ) -> Result<Parts, DaemonError> {
        // One artifact store for the node: one client, one cache the sweeper's purges reach.
        let artifacts = crate::report::artifact::ArtifactStore::from_settings(
            &config.settings.artifacts,
            &config.root,
        )?;
        let (pipeline, rescuer) =
            super::pool_and_rescuer(config, (ledger, clock), metrics, artifacts.clone())?;
        let sweeper =
            Sweeper::from_config(config, ledger.clone(), clock.clone(), artifacts.clone())?
                .with_metrics(metrics.clone());
        let sweeper = Arc::new(sweeper);
        let late = crate::delivery::notice::LateBoard::default();
        let runbooks_wake = crate::runtime::periodic::Nudge::default();
        let node = server::Node {
            metrics: metrics.clone(),
            health: health.clone(),
            sweeper: sweeper.clone(),
            pool: crate::pool::PoolView::of(&pipeline),
            live_for: crate::services::registry::live_for(config),
            late: late.clone(),
            runbooks: runbooks_wake.clone(),
        };
        let catalog = pipeline.catalog.clone();
        let notifier = crate::services::notifier::Notifier::new(
            config,
            (ledger.clone(), catalog.clone(), clock.clone()),
            metrics.clone(),
            late,
        )?
        .with_limits(pipeline.limits.clone())
        .with_throttle(pipeline.throttle.clone());
        let (listener, state) =
            server_for(config, ledger, clock, node, artifacts, &catalog).await?;
        let runbooks = crate::services::runbook::Driver::new(
            ledger.clone(),
            clock.clone(),
            config.settings.services.runbooks_every.as_std(),
        )
        .with_nudge(pipeline.nudge())
        .with_waker(runbooks_wake)
        .with_leadership(pipeline.leadership());
        let tick = SchedulerTick::new(
            ledger.clone(),
            catalog.clone(),
            clock.clone(),
            config.settings.schedule.catch_up,
        )
        .with_nudge(pipeline.nudge());
        let reloader =
            crate::services::reload::Reloader::new(config, catalog, metrics.clone(), clock.clone());
        Ok(Parts {
            rescuer: Arc::new(rescuer.with_leadership(pipeline.leadership())),
            pipeline,
            runbooks: Arc::new(runbooks),
            sweeper,
            notifier: Arc::new(notifier),
            tick: Arc::new(tick),
            reloader: Arc::new(reloader),
            listener,
            state,
        })
    }

    /// Every service but the clock and the registry (see [`register`]). Every one but the
    /// server restarts after a failure; the server cannot (see [`serving`]). The periodic
    /// services report their own failures and never end with one.
    fn services(self, config: &Config, metrics: &Arc<Metrics>) -> Vec<Service> {
        let pipeline = self.pipeline;
        vec![
            restarting("tick", self.tick, |t, cancel| async move {
                Ok(t.run(cancel).await?)
            }),
            periodic("wake", pipeline.clone(), |p, cancel| async move {
                crate::services::wake::run(p, cancel).await
            }),
            restarting("pool", pipeline, |p, cancel| async move {
                Ok(p.run(cancel).await?)
            }),
            periodic("rescuer", self.rescuer, |r, cancel| async move {
                r.run(cancel).await
            }),
            periodic("sweeper", self.sweeper, |s, cancel| async move {
                s.run(cancel).await
            }),
            periodic("runbooks", self.runbooks, |r, cancel| async move {
                r.run(cancel).await
            }),
            periodic("reload", self.reloader, |r, cancel| async move {
                r.run(cancel).await
            }),
            periodic("notifier", self.notifier, |n, cancel| async move {
                n.run(cancel).await
            }),
            serving(
                self.listener,
                server::router(self.state),
                config,
                metrics.clone(),
            ),
        ]
    }
}

/// The timekeeper's first reading and the node's registration, before anything leases: the
/// offset is known (and refused if past the bound), `migrate` sees this node at once, and the
/// node knows whether it leads (its heartbeats set `leadership`, which the pool shares).
async fn register(
    config: &Config,
    ledger: &Ledger,
    clock: &SharedClock,
    metrics: &Arc<Metrics>,
    leadership: crate::runtime::leadership::Leadership,
) -> (
    Arc<crate::services::timekeeper::Timekeeper>,
    Arc<crate::services::registry::Registry>,
) {
    let timekeeper = Arc::new(crate::services::timekeeper::Timekeeper::new(
        (ledger.clone(), clock.clone()),
        metrics.clone(),
        config.settings.pool.max_clock_offset,
        config.settings.services.clock_every.as_std(),
    ));
    timekeeper.start().await;
    let registry = crate::services::registry::Registry::new(
        config,
        ledger.clone(),
        clock.clone(),
        crate::pool::default_owner(),
    )
    .with_timekeeper(timekeeper.clone())
    .with_leadership(leadership);
    if let Err(e) = registry.beat().await {
        tracing::warn!(error = %e, "could not register this node");
    }
    (timekeeper, Arc::new(registry))
}

/// The HTTP server as a service. The listener cannot be rebuilt in place: if the server fails,
/// the daemon stops.
fn serving(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    config: &Config,
    metrics: Arc<Metrics>,
) -> Service {
    let limits = server::Limits::from_settings(&config.settings.server);
    let server = std::sync::Mutex::new(Some((listener, router)));
    Service::new("server", OnFailure::Exit, move |cancel| {
        let taken = server.lock().unwrap_or_else(|e| e.into_inner()).take();
        let metrics = metrics.clone();
        Box::pin(async move {
            let (listener, router) = taken.ok_or("the listener is gone")?;
            server::serve(listener, router, limits, metrics, cancel).await?;
            Ok(())
        })
    })
}

/// A service restarted after a failure: `run` over its shared state, until `cancel`.
fn restarting<T, F, Fut>(name: &'static str, state: Arc<T>, run: F) -> Service
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), ServiceError>> + Send + 'static,
{
    Service::new(name, OnFailure::Restart, move |cancel| {
        Box::pin(run(state.clone(), cancel))
    })
}

/// A periodic service (its rounds report their own failures): restarted if it panics.
fn periodic<T, F, Fut>(name: &'static str, state: Arc<T>, run: F) -> Service
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let run = Arc::new(run);
    restarting(name, state, move |s, cancel| {
        let run = run.clone();
        async move {
            run(s, cancel).await;
            Ok(())
        }
    })
}

/// The HTTP listener (refused off loopback without both credentials) and its handlers' state.
async fn server_for(
    config: &Config,
    ledger: &Ledger,
    clock: &SharedClock,
    node: server::Node,
    artifacts: crate::report::artifact::ArtifactStore,
    catalog: &crate::report::catalog::Catalog,
) -> Result<(tokio::net::TcpListener, ServerState), DaemonError> {
    let settings = &config.settings.server;
    // A token set but empty is unset: an empty token would let anyone in.
    let token = |name: &str| std::env::var(name).ok().filter(|t| !t.is_empty());
    let tokens = Tokens {
        ops: token(&settings.ops_token_env),
        viewer: token(&settings.viewer_token_env),
    };
    let ingest_secret = match std::env::var(&settings.ingest_secret_env) {
        Ok(s) if !s.is_empty() => Some(Secret::parse(&s).map_err(|e| DaemonError::Secret {
            env: settings.ingest_secret_env.clone(),
            reason: e.to_string(),
        })?),
        _ => None,
    };
    server::check_exposure(settings.bind, tokens.ops.is_some(), ingest_secret.is_some())?;
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|source| DaemonError::Listen {
            addr: settings.bind,
            source,
        })?;
    let state = ServerState {
        ledger: ledger.clone(),
        artifacts: Arc::new(artifacts),
        reports: catalog.clone(),
        clock: clock.clone(),
        ingest_secret,
        tokens,
        secure_cookies: !settings.bind.ip().is_loopback(),
        node,
        links: crate::delivery::links::Links::from_settings(settings)?,
        recipients: config.settings.recipients.clone(),
        test_sender: crate::views::test_send::TestSender::new(config)
            .inspect_err(|e| tracing::warn!(error = %e, "the console cannot send tests"))
            .ok(),
    };
    Ok((listener, state))
}
