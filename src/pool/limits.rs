//! Per-destination send rates (`[[rate_limit]]`): a governor keyed limiter per entry, keyed by
//! the destination host, taken before a send starts and shared by every report. A delivery
//! whose host has no send left is not held in a worker slot: it goes back to the queue, ready
//! when the host's budget allows it, so deliveries to other hosts are not held back.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use crate::domain::clock::SharedClock;

use crate::config::RateLimitSpec;
use crate::delivery::SendTarget;
use crate::domain::keys::{DeliveryKey, DestinationKind};
use crate::runtime::metrics::Metrics;

/// The pool's injected clock as governor reads it: the time since the Unix epoch (never
/// before it). The limits then keep the same time as everything else the pool decides.
#[derive(Clone)]
struct PoolTime(SharedClock);

impl std::fmt::Debug for PoolTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PoolTime")
    }
}

impl governor::clock::Clock for PoolTime {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let ms = crate::domain::clock::to_millis(self.0.now());
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

/// One `[[rate_limit]]` entry and its limiter.
#[derive(Debug)]
struct Limit {
    spec: RateLimitSpec,
    /// The time one send takes from the budget: `1 / per_second`.
    period: Duration,
    limiter:
        RateLimiter<String, DefaultKeyedStateStore<String>, PoolTime, NoOpMiddleware<Duration>>,
}

/// Every configured rate limit, in file order (the first entry matching a host applies).
#[derive(Debug)]
pub struct RateLimits {
    limits: Vec<Limit>,
    /// The SMTP relay: where every email is sent.
    relay: SendTarget,
    clock: PoolTime,
    /// By host: when the last send turned back is due (on [`PoolTime`]). The next one turned
    /// back is due one period later, so a backlog comes back one by one at the host's rate
    /// instead of all at once (and being turned back again).
    queue_end: Mutex<HashMap<String, Duration>>,
    /// Destinations' targets as found, with their kind: a URL parse costs thousands of
    /// instructions and every delivery asks for its target; a configuration names few
    /// destinations (cleared past [`TARGETS_KEPT`], so a ledger of many keeps it bounded).
    targets: Mutex<HashMap<String, (DestinationKind, SendTarget)>>,
}

/// How many webhook URLs' targets [`RateLimits`] keeps.
const TARGETS_KEPT: usize = 4096;

impl RateLimits {
    /// The limits of `specs`, emails going through `smtp_url`'s relay, on the pool's `clock`.
    /// The kinds' own rates (`Destination::default_rate`) come after `specs`: an entry that
    /// matches a target first overrides its kind's.
    pub fn new(specs: &[RateLimitSpec], smtp_url: &str, clock: SharedClock) -> RateLimits {
        let clock = PoolTime(clock);
        let defaults = crate::delivery::default_rates();
        let limits = (specs.iter().chain(&defaults))
            .map(|spec| {
                let period = Duration::from_secs_f64(1.0 / spec.per_second);
                let burst = NonZeroU32::new(spec.burst).unwrap_or(NonZeroU32::MIN);
                let quota = Quota::with_period(period)
                    .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                    .allow_burst(burst);
                Limit {
                    spec: spec.clone(),
                    period,
                    limiter: RateLimiter::new(
                        quota,
                        DefaultKeyedStateStore::default(),
                        clock.clone(),
                    ),
                }
            })
            .collect();
        RateLimits {
            limits,
            relay: SendTarget::relay(smtp_url),
            clock,
            queue_end: Mutex::default(),
            targets: Mutex::default(),
        }
    }

    /// Where a delivery's sends go (the relay for an email).
    pub fn target(&self, key: &DeliveryKey) -> SendTarget {
        self.target_to(*key.kind(), key.destination())
    }

    /// Where sends of `kind` to `destination` go (the relay for an email).
    pub(crate) fn target_to(&self, kind: DestinationKind, destination: &str) -> SendTarget {
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known, target)) = targets.get(destination)
            && *known == kind
        {
            return target.clone();
        }
        if targets.len() >= TARGETS_KEPT {
            targets.clear();
        }
        let target = SendTarget::to(kind, destination, &self.relay);
        targets.insert(destination.to_string(), (kind, target.clone()));
        target
    }

    /// Takes one send from `target`'s budget (`None`: send now), or says when to send instead
    /// (see [`RateLimits::take`]), the send turned back counted under its entry's pattern.
    pub(crate) fn take_or_defer(
        &self,
        target: &SendTarget,
        now: DateTime<Utc>,
        metrics: &Metrics,
    ) -> Option<DateTime<Utc>> {
        let wait = self.take(target.as_str()).err()?;
        if let Some(limit) = self.limit_for(target.as_str()) {
            metrics.rate_limit_deferred(&limit.spec.host);
        }
        let wait = chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX);
        Some(crate::domain::clock::add(now, wait))
    }

    fn limit_for(&self, host: &str) -> Option<&Limit> {
        self.limits.iter().find(|l| l.spec.matches(host))
    }

    /// Takes one send from `host`'s budget, or says how long to wait before trying again: the
    /// first send turned back waits until the budget has room, each further one a period after
    /// the one before it.
    pub fn take(&self, host: &str) -> Result<(), Duration> {
        let Some(limit) = self.limit_for(host) else {
            return Ok(());
        };
        let key = host.to_ascii_lowercase();
        let not_until = match limit.limiter.check_key(&key) {
            Ok(()) => return Ok(()),
            Err(not_until) => not_until,
        };
        let now = governor::clock::Clock::now(&self.clock);
        let ready = now.saturating_add(not_until.wait_time_from(now));
        let mut queue = self.queue_end.lock().unwrap_or_else(|e| e.into_inner());
        let due = match queue.get(&key) {
            Some(end) if end.saturating_add(limit.period) > ready => {
                end.saturating_add(limit.period)
            }
            _ => ready,
        };
        queue.insert(key, due);
        Err(due.saturating_sub(now))
    }

    /// The entries in force (the configured ones, then the kinds' own), for `/metrics`.
    pub fn specs(&self) -> impl Iterator<Item = &RateLimitSpec> {
        self.limits.iter().map(|l| &l.spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(host: &str, per_second: f64, burst: u32) -> RateLimitSpec {
        RateLimitSpec {
            host: host.into(),
            matcher: globset::Glob::new(host).expect("glob").compile_matcher(),
            per_second,
            burst,
        }
    }

    fn clock() -> (crate::domain::clock::ManualClock, SharedClock) {
        let t0 = chrono::DateTime::from_timestamp(1_764_547_200, 0).expect("an instant");
        let manual = crate::domain::clock::ManualClock::new(t0);
        (manual.clone(), std::sync::Arc::new(manual))
    }

    #[test]
    fn a_limited_host_gets_its_burst_then_waits_and_others_go() {
        let (manual, shared) = clock();
        let limits = RateLimits::new(
            &[spec("*.carrier.example", 20.0, 3)],
            "smtp://relay.example:2525",
            shared,
        );
        let host = "hooks.carrier.example:443";
        for _ in 0..3 {
            assert_eq!(limits.take(host), Ok(()));
        }
        // On the pool's clock, which has not moved: the budget has room again in one period
        // (50 ms), and those turned back after it queue one period apart.
        let waits: Vec<Duration> = (0..5)
            .map(|_| limits.take(host).expect_err("over its burst"))
            .collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(waits, [ms(50), ms(100), ms(150), ms(200), ms(250)]);
        // Each host a glob matches has its own budget; unmatched hosts are never limited.
        assert_eq!(limits.take("eu.carrier.example:443"), Ok(()));
        for _ in 0..100 {
            assert_eq!(limits.take("relay.example:2525"), Ok(()));
        }
        // Time passes on the pool's clock, and the host's budget refills.
        manual.advance(chrono::Duration::seconds(1));
        assert_eq!(limits.take(host), Ok(()));
    }

    #[test]
    fn emails_are_keyed_by_the_relay_webhooks_by_their_host() {
        let limits = RateLimits::new(&[], "smtp://Relay.Example:2525", clock().1);
        let job: crate::domain::keys::JobKey = "r:2026-11-30".parse().expect("job");
        let key = |kind, dest: &str| DeliveryKey::new(job.clone(), kind, dest);
        use crate::delivery::{email::KIND as Email, webhook::KIND as Webhook};
        assert_eq!(
            limits.target(&key(Email, "a@x.example")).as_str(),
            "relay.example:2525"
        );
        assert_eq!(
            limits
                .target(&key(Webhook, "https://Hooks.X.example/p?q"))
                .as_str(),
            "hooks.x.example:443"
        );
        // Asked again (found, not parsed), and past the bound (forgotten, found again).
        let hook = key(Webhook, "http://hooks.x.example:8080/a");
        assert_eq!(limits.target(&hook).as_str(), "hooks.x.example:8080");
        assert_eq!(limits.target(&hook).as_str(), "hooks.x.example:8080");
        for n in 0..TARGETS_KEPT + 5 {
            let url = format!("https://h{n}.example/");
            assert_eq!(
                limits.target_to(Webhook, &url).as_str(),
                format!("h{n}.example:443")
            );
        }
        let kept = limits.targets.lock().expect("targets").len();
        assert!(kept <= TARGETS_KEPT, "{kept} kept");
        assert_eq!(limits.target(&hook).as_str(), "hooks.x.example:8080");
    }

    #[test]
    fn a_slack_webhook_keeps_one_post_a_second_unless_a_rate_limit_names_it() {
        let (manual, shared) = clock();
        let limits = RateLimits::new(&[], "smtp://relay.example:2525", shared.clone());
        let job: crate::domain::keys::JobKey = "r:2026-11-30".parse().expect("job");
        let key = DeliveryKey::new(job, crate::delivery::slack::KIND, "SLACK_OPS");
        let target = limits.target(&key);
        assert_eq!(target.as_str(), "slack:slack_ops");
        assert_eq!(limits.take(target.as_str()), Ok(()));
        assert_eq!(
            limits.take(target.as_str()),
            Err(Duration::from_secs(1)),
            "Slack's documented rate"
        );
        assert_eq!(
            limits.take("slack:slack_other"),
            Ok(()),
            "each webhook its own"
        );
        manual.advance(chrono::Duration::seconds(1));
        assert_eq!(limits.take(target.as_str()), Ok(()));
        // A [[rate_limit]] that names it comes first.
        let fast = RateLimits::new(&[spec("slack:*", 50.0, 5)], "smtp://r.example", shared);
        for _ in 0..5 {
            assert_eq!(fast.take("slack:slack_ops"), Ok(()));
        }
    }
}
