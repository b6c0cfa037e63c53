//! The daemon's `wake` service: on a PostgreSQL ledger, other processes' work signals
//! (`Ledger::signal_work`: another node's tick, its server, the CLI) wake this node's pool at
//! once, so an idle pool need not poll every second for work it did not make due itself; while
//! it hears them it polls every `pool::HEARING_IDLE_MAX` instead. Nothing on SQLite.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ledger::Ledger;
use crate::pool::Pipeline;
use crate::runtime::periodic::sleep_or_cancel;

/// The first pause after a failed connection; it doubles up to [`RETRY_CAP`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_CAP: Duration = Duration::from_secs(30);

/// Listens until `cancel`, nudging `pipeline` at each signal. While it cannot listen the pool
/// polls at its own pace (`idle_max`).
pub async fn run(pipeline: Arc<Pipeline>, cancel: CancellationToken) {
    let ledger: &Ledger = &pipeline.ledger;
    let nudge = pipeline.nudge();
    let mut pause = RETRY_FIRST;
    loop {
        let listener = tokio::select! {
            _ = cancel.cancelled() => return,
            l = ledger.work_listener() => l,
        };
        let mut listener = match listener {
            Ok(Some(l)) => l,
            // SQLite: nothing to hear; the service idles until the daemon stops.
            Ok(None) => return cancel.cancelled().await,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?pause, "cannot listen for other nodes' work signals; polling meanwhile");
                if sleep_or_cancel(pause, &cancel).await {
                    return;
                }
                pause = pause.saturating_mul(2).min(RETRY_CAP);
                continue;
            }
        };
        pipeline.hearing(true);
        pause = RETRY_FIRST;
        loop {
            let heard = tokio::select! {
                _ = cancel.cancelled() => return,
                h = listener.next() => h,
            };
            match heard {
                // A signal, or a lost connection (signals may have been missed): look now.
                Ok(_) => nudge.now(),
                Err(e) => {
                    tracing::warn!(error = %e, "lost the connection that hears other nodes' work signals; polling meanwhile");
                    break;
                }
            }
        }
        pipeline.hearing(false);
        nudge.now();
        if sleep_or_cancel(pause, &cancel).await {
            return;
        }
    }
}
