//! `[services]`: how often the daemon's periodic services take a round. The scheduler ticks
//! every minute (cron's resolution) and the sweeper every `sweep_every` of `retention.toml`;
//! these are the others.

use super::ConfigError;
use super::fields::Fields;
use crate::domain::duration::Span;

/// The shortest interval a service may be given: a faster round only loads the ledger.
pub(crate) const SHORTEST: Span = Span::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSettings {
    /// How often expired leases are looked for. Default: a quarter of `pool.lease`, between
    /// 250 ms and 15 s.
    pub rescue_every: Option<Span>,
    /// How often running bulk redrives are advanced. Default 2s.
    pub runbooks_every: Span,
    /// How often a shared ledger's clock is read again. Default 10s.
    pub clock_every: Span,
    /// How often the node records its heartbeat in the registry; a node silent for three
    /// intervals is not live. Default 10s.
    pub heartbeat_every: Span,
    /// How often the notifier judges deadlines and quarantines and sends owners' notices
    /// (a deadline that passed is told within about one interval). Default 30s.
    pub notify_every: Span,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings {
            rescue_every: None,
            runbooks_every: Span::from_secs(2),
            clock_every: Span::from_secs(10),
            heartbeat_every: Span::from_secs(10),
            notify_every: Span::from_secs(30),
        }
    }
}

/// Reads `[services]` into `s`, refusing an interval under [`SHORTEST`].
pub(super) fn read(mut f: Fields<'_, '_>, s: &mut ServiceSettings, errors: &mut Vec<ConfigError>) {
    let mut interval = |name: &'static str, errors: &mut Vec<ConfigError>| {
        let t = f.opt::<Span>(name, errors)?;
        if t < SHORTEST {
            errors.push(
                f.place
                    .error(name, format!("{t} is too short: at least {SHORTEST}")),
            );
            return None;
        }
        Some(t)
    };
    if let Some(t) = interval("rescue_every", errors) {
        s.rescue_every = Some(t);
    }
    if let Some(t) = interval("runbooks_every", errors) {
        s.runbooks_every = t;
    }
    if let Some(t) = interval("clock_every", errors) {
        s.clock_every = t;
    }
    if let Some(t) = interval("heartbeat_every", errors) {
        s.heartbeat_every = t;
    }
    if let Some(t) = interval("notify_every", errors) {
        s.notify_every = t;
    }
    f.finish(errors);
}
