//! Back-pressure from receivers.
//!
//! - [`HostThrottle`]: a rate-limited reply pauses every delivery to that host until its
//!   Retry-After (or the backoff the policy chose). When the pause ends exactly one delivery
//!   probes the host; the others wait for the probe's answer. So a throttled receiver sees at
//!   most one probe per pause, not one per queued delivery.
//! - [`Admission`]: new leases per second (governor). The rule: every rate-limited reply halves
//!   the rate (down to 1/s); once no rate-limited reply has been seen for [`RECOVERY_QUIET`],
//!   every accepted reply doubles it, up to the configured rate.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// Quiet time after the last rate-limited reply before admission recovers.
pub(crate) const RECOVERY_QUIET: Duration = Duration::seconds(10);

/// How long a delivery waits while another one probes its host.
pub const PROBE_WAIT: Duration = Duration::seconds(1);

/// How long a probe may stay unanswered by default before another delivery may probe.
pub(crate) const DEFAULT_PROBE_TTL: Duration = Duration::seconds(90);

#[derive(Debug, Clone, Copy)]
struct HostState {
    paused_until: DateTime<Utc>,
    /// When the current probe started. A probe that never reports (cancelled, its lease lost,
    /// its worker gone) expires after the throttle's probe TTL, so no host waits forever.
    probe_since: Option<DateTime<Utc>>,
}

/// Whether a delivery to a host may go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Go,
    WaitUntil(DateTime<Utc>),
}

#[derive(Debug)]
pub struct HostThrottle {
    hosts: Mutex<HashMap<String, HostState>>,
    probe_ttl: Duration,
}

impl Default for HostThrottle {
    fn default() -> Self {
        HostThrottle::new(DEFAULT_PROBE_TTL)
    }
}

impl HostThrottle {
    /// A throttle whose probes expire after `probe_ttl` without an answer (the longest a send
    /// may take).
    pub fn new(probe_ttl: Duration) -> HostThrottle {
        HostThrottle {
            hosts: Mutex::default(),
            probe_ttl: probe_ttl.max(Duration::zero()),
        }
    }

    /// Asks to send to `host` now.
    pub fn gate(&self, host: &str, now: DateTime<Utc>) -> Gate {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let ttl = self.probe_ttl;
        match hosts.get_mut(host) {
            None => Gate::Go,
            Some(st) if now < st.paused_until => Gate::WaitUntil(st.paused_until),
            Some(st)
                if st
                    .probe_since
                    .is_some_and(|since| crate::domain::clock::add(since, ttl) > now) =>
            {
                Gate::WaitUntil(crate::domain::clock::add(now, PROBE_WAIT))
            }
            Some(st) => {
                st.probe_since = Some(now);
                Gate::Go
            }
        }
    }

    /// A rate-limited reply: pause the host until `until`.
    pub fn pause(&self, host: &str, until: DateTime<Utc>) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let st = hosts.entry(host.to_string()).or_insert(HostState {
            paused_until: until,
            probe_since: None,
        });
        st.paused_until = st.paused_until.max(until);
        st.probe_since = None;
    }

    /// Any other reply: the host answers normally again.
    pub fn clear(&self, host: &str) {
        self.hosts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(host);
    }

    /// Every host paused at `now`, with the end of its pause, soonest first.
    pub fn paused(&self, now: DateTime<Utc>) -> Vec<(String, DateTime<Utc>)> {
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let mut paused: Vec<(String, DateTime<Utc>)> = hosts
            .iter()
            .filter(|(_, s)| s.paused_until > now)
            .map(|(h, s)| (h.clone(), s.paused_until))
            .collect();
        paused.sort_by_key(|(h, until)| (*until, h.clone()));
        paused
    }

    /// The end of a host's pause, if it is paused at `now`.
    pub fn paused_until(&self, host: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        hosts.get(host).map(|s| s.paused_until).filter(|u| *u > now)
    }
}

struct AdmissionState {
    rate: u32,
    limiter: Arc<DefaultDirectRateLimiter>,
    last_rate_limited: Option<DateTime<Utc>>,
}

/// The adaptive admission limit.
pub struct Admission {
    configured: u32,
    state: Mutex<AdmissionState>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Admission({}/s of {}/s)", self.rate(), self.configured)
    }
}

fn limiter(rate: u32) -> Arc<DefaultDirectRateLimiter> {
    let rate = NonZeroU32::new(rate.max(1)).unwrap_or(NonZeroU32::MIN);
    Arc::new(RateLimiter::direct(Quota::per_second(rate)))
}

impl Admission {
    pub fn new(per_second: u32) -> Admission {
        let rate = per_second.max(1);
        Admission {
            configured: rate,
            state: Mutex::new(AdmissionState {
                rate,
                limiter: limiter(rate),
                last_rate_limited: None,
            }),
        }
    }

    /// The current rate, leases per second.
    pub fn rate(&self) -> u32 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).rate
    }

    /// Waits until `n` new leases may be taken; returns how many may (at most the burst).
    pub async fn admit(&self, n: u32) -> u32 {
        let (lim, rate) = {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            (st.limiter.clone(), st.rate)
        };
        let n = n.clamp(1, rate);
        let want = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        match lim.until_n_ready(want).await {
            Ok(()) => n,
            Err(_) => {
                lim.until_ready().await;
                1
            }
        }
    }

    pub(crate) fn on_rate_limited(&self, now: DateTime<Utc>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.last_rate_limited = Some(now);
        let next = (st.rate / 2).max(1);
        if next != st.rate {
            st.rate = next;
            st.limiter = limiter(next);
            tracing::info!(
                rate = next,
                "receivers are rate limiting: admission lowered"
            );
        }
    }

    pub(crate) fn on_accepted(&self, now: DateTime<Utc>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.rate >= self.configured {
            return;
        }
        if st
            .last_rate_limited
            .is_some_and(|t| now - t < RECOVERY_QUIET)
        {
            return;
        }
        let next = st.rate.saturating_mul(2).min(self.configured);
        st.rate = next;
        st.limiter = limiter(next);
        tracing::info!(rate = next, "receivers recovered: admission raised");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0)
            .single()
            .expect("instant")
    }

    #[test]
    fn a_paused_host_gets_one_probe_per_pause() {
        let h = HostThrottle::default();
        assert_eq!(h.gate("a:443", t(0)), Gate::Go);
        h.pause("a:443", t(30));
        assert_eq!(h.gate("a:443", t(1)), Gate::WaitUntil(t(30)));
        assert_eq!(
            h.gate("b:443", t(1)),
            Gate::Go,
            "other hosts are not paused"
        );
        assert_eq!(h.gate("a:443", t(30)), Gate::Go, "the probe");
        assert_eq!(
            h.gate("a:443", t(30)),
            Gate::WaitUntil(t(30) + PROBE_WAIT),
            "one probe at a time"
        );
        h.pause("a:443", t(60));
        assert_eq!(h.gate("a:443", t(31)), Gate::WaitUntil(t(60)));
        assert_eq!(h.gate("a:443", t(60)), Gate::Go);
        h.clear("a:443");
        assert_eq!(h.gate("a:443", t(60)), Gate::Go);
        assert_eq!(h.gate("a:443", t(60)), Gate::Go, "recovered: no probing");
    }

    #[test]
    fn a_probe_that_never_answers_expires() {
        let h = HostThrottle::new(Duration::seconds(20));
        h.pause("a:443", t(30));
        assert_eq!(h.gate("a:443", t(30)), Gate::Go, "the probe");
        // The probe's worker is gone: no pause, no clear ever comes.
        assert_eq!(h.gate("a:443", t(49)), Gate::WaitUntil(t(49) + PROBE_WAIT));
        assert_eq!(
            h.gate("a:443", t(50)),
            Gate::Go,
            "a new probe once the old one expired"
        );
        assert_eq!(h.gate("a:443", t(51)), Gate::WaitUntil(t(51) + PROBE_WAIT));
        h.clear("a:443");
        assert_eq!(h.gate("a:443", t(52)), Gate::Go);
    }

    #[test]
    fn admission_halves_on_429_and_recovers_after_quiet() {
        let a = Admission::new(40);
        a.on_rate_limited(t(0));
        a.on_rate_limited(t(1));
        assert_eq!(a.rate(), 10);
        a.on_accepted(t(5));
        assert_eq!(a.rate(), 10, "no recovery while 429s are recent");
        a.on_accepted(t(12));
        assert_eq!(a.rate(), 20);
        a.on_accepted(t(13));
        a.on_accepted(t(14));
        assert_eq!(a.rate(), 40, "never above the configured rate");
        for i in 0..10 {
            a.on_rate_limited(t(20 + i));
        }
        assert_eq!(a.rate(), 1, "never below 1/s");
    }
}
