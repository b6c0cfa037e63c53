//! A node: the daemon (`run`) and one date's run (`run --once`), which build the pool the same
//! way.

pub mod daemon;
pub mod runner;

use std::sync::Arc;

use crate::config::Config;
use crate::domain::clock::SharedClock;
use crate::ledger::Ledger;
use crate::pool::{Pipeline, PoolError};
use crate::report::artifact::ArtifactStore;
use crate::runtime::metrics::Metrics;
use crate::services::rescuer::Rescuer;

/// The node's pool and its lease rescuer, recording into `metrics`.
fn pool_and_rescuer(
    config: &Config,
    (ledger, clock): (&Ledger, &SharedClock),
    metrics: &Arc<Metrics>,
    artifacts: ArtifactStore,
) -> Result<(Arc<Pipeline>, Rescuer), PoolError> {
    let pipeline = crate::pool::build(
        config,
        ledger.clone(),
        clock.clone(),
        metrics.clone(),
        artifacts,
    )?;
    let rescuer = crate::services::rescuer::for_pool(
        config,
        ledger.clone(),
        clock.clone(),
        metrics.clone(),
        &pipeline,
    );
    Ok((pipeline, rescuer))
}
