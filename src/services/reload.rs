//! The daemon's reload of its reports: on SIGHUP, and every `sweep_every` while a `[[family]]`
//! reads its rows from a query. The configuration directory is loaded and validated whole, the
//! templates with it; only a set that loads is put in force ([`crate::report::catalog::Catalog`]), and
//! a set that does not is logged, counted, and leaves the reports in force as they were (as the
//! retention policy does). Only the reports and their families' rows change at a reload;
//! `dawnpost.toml` is read at start.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, RowsSpec};
use crate::report::catalog::{Catalog, Reports};
use crate::runtime::metrics::Metrics;

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// The new set is in force: the reports it added and removed (by id).
    InForce {
        reports: usize,
        added: Vec<String>,
        removed: Vec<String>,
    },
    /// The configuration did not load; the previous set stays in force.
    Refused(String),
}

/// The reload service.
#[derive(Debug)]
pub struct Reloader {
    pub dir: PathBuf,
    pub catalog: Catalog,
    pub metrics: Arc<Metrics>,
    pub clock: crate::domain::clock::SharedClock,
    /// Set while a family reads its rows from a query: how often they are read again.
    pub rows_every: Option<Duration>,
    /// SIGHUP, listened for from the reloader's making (so a SIGHUP right after the daemon
    /// says it runs is a reload, not the signal's default: the end of the process).
    hangups: tokio::sync::Mutex<Hangups>,
}

impl Reloader {
    /// A reloader of `config`'s directory into `catalog`, rereading sql rows every
    /// `sweep_every`. Listens for SIGHUP from now on (inside a runtime).
    pub fn new(
        config: &Config,
        catalog: Catalog,
        metrics: Arc<Metrics>,
        clock: crate::domain::clock::SharedClock,
    ) -> Reloader {
        let sql = config
            .families
            .iter()
            .any(|f| matches!(f.rows, RowsSpec::Sql { .. }));
        Reloader {
            dir: config.dir.clone(),
            catalog,
            metrics,
            clock,
            rows_every: sql.then(|| config.retention.sweep_every.as_std()),
            hangups: tokio::sync::Mutex::new(hangups()),
        }
    }

    /// Loads the directory again and puts it in force if it loads.
    pub async fn reload(&self) -> Reloaded {
        let dir = self.dir.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            let config = Config::load(&dir, &crate::delivery::readers())
                .map_err(|e| e.to_string().trim_end().to_string())?;
            Reports::load(&config).map_err(|e| crate::domain::words::error_chain(&e))
        })
        .await;
        let mut reports = match loaded {
            Ok(Ok(reports)) => reports,
            Ok(Err(problems)) => return self.refused(problems),
            Err(e) => return self.refused(format!("the reload failed: {e}")),
        };
        let before = self.catalog.current();
        let ids = |r: &Reports| r.by_id.keys().cloned().collect::<BTreeSet<String>>();
        let (old, new) = (ids(&before), ids(&reports));
        let outcome = Reloaded::InForce {
            reports: reports.list.len(),
            added: new.difference(&old).cloned().collect(),
            removed: old.difference(&new).cloned().collect(),
        };
        let now = self.clock.now();
        reports.added_at = new
            .iter()
            .filter_map(|id| match before.added_at.get(id) {
                Some(at) => Some((id.clone(), *at)),
                None => (!old.contains(id)).then(|| (id.clone(), now)),
            })
            .collect();
        self.catalog.replace(reports);
        self.metrics.config_reloaded("ok");
        if let Reloaded::InForce {
            reports,
            added,
            removed,
        } = &outcome
        {
            tracing::info!(
                reports,
                added = added.len(),
                removed = removed.len(),
                "reports reloaded; a removed report makes no new jobs and keeps its ledger rows"
            );
        }
        outcome
    }

    fn refused(&self, problems: String) -> Reloaded {
        self.metrics.config_reloaded("failed");
        tracing::error!(
            problems = %problems,
            "the configuration did not load; the reports in force are unchanged"
        );
        Reloaded::Refused(problems)
    }

    /// Reloads at every SIGHUP (and every `rows_every`, if set) until `cancel`.
    pub async fn run(&self, cancel: CancellationToken) {
        let mut hangups = self.hangups.lock().await;
        let every = self.rows_every.unwrap_or(Duration::MAX);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = next_hangup(&mut hangups) => {
                    tracing::info!("SIGHUP: reloading the reports");
                }
                _ = tokio::time::sleep(every), if self.rows_every.is_some() => {}
            }
            self.reload().await;
        }
    }
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup())
        .inspect_err(|e| tracing::warn!(error = %e, "cannot listen for SIGHUP; no reload on it"))
        .ok()
}

#[cfg(not(unix))]
fn hangups() -> Hangups {
    None
}

/// The next SIGHUP; never, without a listener.
async fn next_hangup(h: &mut Hangups) {
    #[cfg(unix)]
    if let Some(s) = h
        && s.recv().await.is_some()
    {
        return;
    }
    let _ = h;
    std::future::pending::<()>().await
}
