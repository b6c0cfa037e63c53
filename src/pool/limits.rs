//! Per-destination send rates (`[[rate_limit]]`): a governor keyed limiter per entry, keyed by
//! the destination host, taken before a send starts and shared by every report. A delivery
//! whose host has no send left is not held in a worker slot: it goes back to the queue, ready
//! when the host's budget allows it, so deliveries to other hosts are not held back.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitSpec;
use crate::keys::DestinationKind;
use crate::ledger::Delivery;

/// One `[[rate_limit]]` entry and its limiter.
#[derive(Debug)]
struct Limit {
    spec: RateLimitSpec,
    /// The time one send takes from the budget: `1 / per_second`.
    period: Duration,
    limiter: DefaultKeyedRateLimiter<String>,
}

/// Every configured rate limit, in file order (the first entry matching a host applies).
#[derive(Debug, Default)]
pub struct RateLimits {
    limits: Vec<Limit>,
    /// The SMTP relay's `host:port`: the host every email is sent to.
    relay: String,
}

impl RateLimits {
    pub fn new(specs: &[RateLimitSpec], smtp_url: &str) -> RateLimits {
        let limits = specs
            .iter()
            .map(|spec| {
                let period = Duration::from_secs_f64(1.0 / spec.per_second);
                let burst = NonZeroU32::new(spec.burst).unwrap_or(NonZeroU32::MIN);
                let quota = Quota::with_period(period)
                    .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                    .allow_burst(burst);
                Limit {
                    spec: spec.clone(),
                    period,
                    limiter: RateLimiter::keyed(quota),
                }
            })
            .collect();
        RateLimits {
            limits,
            relay: relay_host(smtp_url),
        }
    }

    /// The host a delivery is sent to: the relay for an email, the URL's `host:port` for a
    /// webhook.
    pub fn host_of(&self, d: &Delivery) -> String {
        match d.kind {
            DestinationKind::Email => self.relay.clone(),
            DestinationKind::Webhook => DestinationKind::Webhook.host(&d.destination),
        }
    }

    /// The entry that limits `host`, if any.
    pub fn spec_for(&self, host: &str) -> Option<&RateLimitSpec> {
        self.limit_for(host).map(|l| &l.spec)
    }

    fn limit_for(&self, host: &str) -> Option<&Limit> {
        self.limits.iter().find(|l| l.spec.matches(host))
    }

    /// Takes one send from `host`'s budget, or says how long until the send may start. `queued`
    /// is how many sends to this host were already turned back in this round: each waits one
    /// period more, so they come back one after the other instead of all at once.
    pub fn take(&self, host: &str, queued: u32) -> Result<(), Duration> {
        let Some(limit) = self.limit_for(host) else {
            return Ok(());
        };
        let key = host.to_ascii_lowercase();
        match limit.limiter.check_key(&key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                Err(wait.saturating_add(limit.period.saturating_mul(queued)))
            }
        }
    }

    /// The configured entries, for `/metrics`.
    pub fn specs(&self) -> impl Iterator<Item = &RateLimitSpec> {
        self.limits.iter().map(|l| &l.spec)
    }
}

/// `host:port` of an `smtp://` or `smtps://` URL (ports 25 and 465 by default).
pub fn relay_host(smtp_url: &str) -> String {
    match url::Url::parse(smtp_url) {
        Ok(u) => {
            let default = if u.scheme() == "smtps" { 465 } else { 25 };
            format!(
                "{}:{}",
                u.host_str().unwrap_or("").to_ascii_lowercase(),
                u.port().unwrap_or(default)
            )
        }
        Err(_) => smtp_url.to_ascii_lowercase(),
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

    #[test]
    fn a_limited_host_gets_its_burst_then_waits_and_others_go() {
        let limits = RateLimits::new(
            &[spec("*.carrier.example", 20.0, 3)],
            "smtp://relay.example:2525",
        );
        for _ in 0..3 {
            assert_eq!(limits.take("hooks.carrier.example:443", 0), Ok(()));
        }
        let wait = limits
            .take("hooks.carrier.example:443", 0)
            .expect_err("over its burst");
        assert!(wait <= Duration::from_millis(50), "{wait:?}");
        let later = limits
            .take("hooks.carrier.example:443", 4)
            .expect_err("queued behind four");
        assert!(later >= Duration::from_millis(200), "{later:?}");
        // Each host a glob matches has its own budget; unmatched hosts are never limited.
        assert_eq!(limits.take("eu.carrier.example:443", 0), Ok(()));
        for _ in 0..100 {
            assert_eq!(limits.take("relay.example:2525", 0), Ok(()));
        }
    }

    #[test]
    fn emails_are_keyed_by_the_relay() {
        let limits = RateLimits::new(&[], "smtp://Relay.Example:2525");
        assert_eq!(limits.relay, "relay.example:2525");
        assert_eq!(relay_host("smtps://mail.example"), "mail.example:465");
        assert_eq!(relay_host("smtp://mail.example"), "mail.example:25");
    }
}
