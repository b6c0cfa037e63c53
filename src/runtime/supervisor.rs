//! The daemon's services under supervision (ARCHITECTURE.md, "Cross-cutting rules"): never
//! half-alive.
//!
//! Each service runs in its own task. A service that returns an error, panics, or returns
//! before shutdown was asked is logged, counted (`dawnpost_service_failures_total{service}`),
//! marked down in [`Health`] (so `/readyz` answers 503 naming it) and, if it may be restarted,
//! started again after a backoff that doubles from [`SupervisorConfig::backoff_base`] up to
//! [`SupervisorConfig::backoff_cap`]. A service that may not be restarted, or that failed
//! [`SupervisorConfig::max_restarts`] times in a row (a run longer than
//! [`SupervisorConfig::healthy_after`] resets the count), ends the daemon: every other service
//! is cancelled (the pool drains) and [`supervise`] returns the error, so the process exits
//! non-zero instead of running on without it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::runtime::metrics::Metrics;

/// Restart limits. Defaults: 1 s doubling to 60 s, 10 failures in a row, healthy after 5 min.
#[derive(Debug, Clone, Copy)]
pub struct SupervisorConfig {
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub max_restarts: u32,
    pub healthy_after: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        SupervisorConfig {
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(60),
            max_restarts: 10,
            healthy_after: Duration::from_secs(300),
        }
    }
}

/// What a failed service gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// Started again after a backoff.
    Restart,
    /// The daemon stops (a service that cannot be rebuilt in place, like the listener).
    Exit,
}

/// Why a service's run failed: its own module's error, boxed (the supervisor only reports it).
pub(crate) type ServiceError = Box<dyn std::error::Error + Send + Sync>;

/// What ended the daemon.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("service {name} failed: {error}")]
    ServiceFailed { name: &'static str, error: String },
    #[error("a supervisor task failed: {0}")]
    Task(String),
}

type RunFn =
    Box<dyn Fn(CancellationToken) -> BoxFuture<'static, Result<(), ServiceError>> + Send + Sync>;

/// One supervised service: a name, how to run it until cancelled, and what a failure gets.
pub struct Service {
    name: &'static str,
    run: RunFn,
    on_failure: OnFailure,
}

impl Service {
    pub fn new<F>(name: &'static str, on_failure: OnFailure, run: F) -> Service
    where
        F: Fn(CancellationToken) -> BoxFuture<'static, Result<(), ServiceError>>
            + Send
            + Sync
            + 'static,
    {
        Service {
            name,
            run: Box::new(run),
            on_failure,
        }
    }
}

/// A service's state as `/readyz` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServiceState {
    Running,
    /// Failed; restarting after a backoff.
    Down {
        failures: u32,
        error: String,
    },
    /// Failed for good: the daemon is stopping.
    Failed {
        error: String,
    },
}

/// Every service's state, shared with the HTTP server.
#[derive(Debug, Default)]
pub struct Health {
    services: Mutex<BTreeMap<&'static str, ServiceState>>,
}

impl Health {
    fn set(&self, name: &'static str, state: ServiceState) {
        self.services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, state);
    }

    /// Each service's state, by name.
    pub fn snapshot(&self) -> BTreeMap<&'static str, ServiceState> {
        self.services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The services that are not running, with why.
    pub fn down(&self) -> Vec<String> {
        self.snapshot()
            .into_iter()
            .filter_map(|(name, st)| match st {
                ServiceState::Running => None,
                ServiceState::Down { failures, error } => Some(format!(
                    "{name} is down (failure {failures}, restarting): {error}"
                )),
                ServiceState::Failed { error } => Some(format!("{name} failed: {error}")),
            })
            .collect()
    }
}

/// Runs every service until `cancel` (or until one fails for good). Returns the error of the
/// service that ended the daemon, if one did.
pub async fn supervise(
    services: Vec<Service>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    config: SupervisorConfig,
    cancel: CancellationToken,
) -> Result<(), SupervisorError> {
    // Cancelled on shutdown, or by a service that ends the daemon.
    let all = cancel.child_token();
    let mut set = JoinSet::new();
    for service in services {
        health.set(service.name, ServiceState::Running);
        metrics.service_started(service.name);
        set.spawn(keep_running(
            service,
            health.clone(),
            metrics.clone(),
            config,
            all.clone(),
        ));
    }
    let mut fatal = None;
    while let Some(done) = set.join_next().await {
        let failed = match done {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(SupervisorError::Task(e.to_string())),
        };
        if let Some(e) = failed {
            all.cancel();
            fatal.get_or_insert(e);
        }
    }
    fatal.map_or(Ok(()), Err)
}

/// One service's life: run, and on failure count, back off and run again, until cancelled
/// or out of restarts.
async fn keep_running(
    service: Service,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    config: SupervisorConfig,
    cancel: CancellationToken,
) -> Result<(), SupervisorError> {
    let name = service.name;
    let mut failures = 0u32;
    loop {
        health.set(name, ServiceState::Running);
        let started = Instant::now();
        let error = match tokio::spawn((service.run)(cancel.clone())).await {
            Ok(Ok(())) if cancel.is_cancelled() => return Ok(()),
            Ok(Ok(())) => "it stopped by itself".to_string(),
            Ok(Err(e)) => crate::domain::words::error_chain(e.as_ref()),
            Err(e) if e.is_panic() => format!("it panicked: {}", panic_text(e)),
            Err(e) => format!("it was aborted: {e}"),
        };
        metrics.service_failed(name);
        if started.elapsed() >= config.healthy_after {
            failures = 0;
        }
        failures = failures.saturating_add(1);
        if service.on_failure == OnFailure::Exit || failures > config.max_restarts {
            tracing::error!(service = name, failures, error = %error, "service failed; stopping the daemon");
            health.set(
                name,
                ServiceState::Failed {
                    error: error.clone(),
                },
            );
            return Err(SupervisorError::ServiceFailed { name, error });
        }
        let backoff = backoff(config, failures);
        tracing::error!(service = name, failures, error = %error, restart_in = ?backoff, "service failed; restarting");
        health.set(
            name,
            ServiceState::Down {
                failures,
                error: error.clone(),
            },
        );
        tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            _ = tokio::time::sleep(backoff) => {}
        }
    }
}

fn backoff(config: SupervisorConfig, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    config
        .backoff_base
        .saturating_mul(1u32 << doublings)
        .min(config.backoff_cap)
}

fn panic_text(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn fast() -> SupervisorConfig {
        SupervisorConfig {
            backoff_base: Duration::from_millis(1),
            backoff_cap: Duration::from_millis(4),
            max_restarts: 3,
            healthy_after: Duration::from_secs(300),
        }
    }

    /// A service that fails (by error, then by panic) `fail` times, then runs until cancelled;
    /// `runs` counts its starts and `up` fires when it is up for good.
    fn flaky(fail: u32, runs: Arc<AtomicU32>, up: CancellationToken) -> Service {
        Service::new("flaky", OnFailure::Restart, move |cancel| {
            let runs = runs.clone();
            let up = up.clone();
            Box::pin(async move {
                let n = runs.fetch_add(1, Ordering::SeqCst);
                if n < fail {
                    if n.is_multiple_of(2) {
                        return Err(format!("boom {n}").into());
                    }
                    panic!("panic {n}");
                }
                up.cancel();
                cancel.cancelled().await;
                Ok(())
            })
        })
    }

    #[tokio::test]
    async fn a_failing_service_is_restarted_counted_and_shown_down_meanwhile() {
        let (runs, up, cancel) = (
            Arc::new(AtomicU32::new(0)),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let (health, metrics) = (Arc::new(Health::default()), Arc::new(Metrics::default()));
        let task = tokio::spawn(supervise(
            vec![flaky(2, runs.clone(), up.clone())],
            health.clone(),
            metrics.clone(),
            fast(),
            cancel.clone(),
        ));
        up.cancelled().await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "two failures, two restarts");
        assert_eq!(health.snapshot().get("flaky"), Some(&ServiceState::Running));
        assert!(
            metrics
                .render()
                .contains("dawnpost_service_failures_total{service=\"flaky\"} 2"),
            "{}",
            metrics.render()
        );
        cancel.cancel();
        task.await.expect("join").expect("a clean shutdown");
    }

    #[tokio::test]
    async fn a_service_out_of_restarts_ends_the_daemon_and_cancels_the_others() {
        let other_stopped = Arc::new(AtomicU32::new(0));
        let seen = other_stopped.clone();
        let other = Service::new("other", OnFailure::Restart, move |cancel| {
            let seen = seen.clone();
            Box::pin(async move {
                cancel.cancelled().await;
                seen.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        });
        let broken = Service::new("broken", OnFailure::Restart, |_| {
            Box::pin(async { Err("the completer stopped".into()) })
        });
        let health = Arc::new(Health::default());
        let err = supervise(
            vec![other, broken],
            health.clone(),
            Arc::new(Metrics::default()),
            fast(),
            CancellationToken::new(),
        )
        .await
        .expect_err("the daemon must not run on without a service");
        assert!(err.to_string().contains("broken"), "{err}");
        assert_eq!(other_stopped.load(Ordering::SeqCst), 1, "the others stop");
        assert!(matches!(
            health.snapshot().get("broken"),
            Some(ServiceState::Failed { .. })
        ));
        assert_eq!(health.down().len(), 1);
    }

    #[tokio::test]
    async fn a_service_that_returns_early_or_may_not_restart_is_a_failure() {
        let quits = Service::new("server", OnFailure::Exit, |_| Box::pin(async { Ok(()) }));
        let err = supervise(
            vec![quits],
            Arc::new(Health::default()),
            Arc::new(Metrics::default()),
            fast(),
            CancellationToken::new(),
        )
        .await
        .expect_err("returning before shutdown is a failure");
        assert!(err.to_string().contains("stopped by itself"), "{err}");
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let c = SupervisorConfig::default();
        let secs: Vec<u64> = (1..=9).map(|n| backoff(c, n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(c, u32::MAX), Duration::from_secs(60));
    }
}
