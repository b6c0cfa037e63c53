//! The retry policy: a small `Copy` value and one pure function from (now, attempt, outcome) to
//! what happens next (ARCHITECTURE.md, "Failure classes").
//!
//! - accepted → sent; permanent → quarantined at once;
//! - rate limited with a Retry-After → retry at exactly that moment (clamped to
//!   `max_retry_after`) plus a small jitter that is only ever *added*: never earlier than the
//!   receiver asked;
//! - any other retryable outcome → capped exponential backoff `min(base · 2^(attempt-1), cap)`,
//!   jittered downwards by up to `jitter` of itself so retries never march on a fixed grid;
//! - a retry that would be attempt `max_attempts + 1`, or would fall after `max_age` from the
//!   delivery's creation, quarantines instead.

use chrono::{DateTime, Duration, Utc};

use crate::config::RetrySettings;
use crate::domain::outcome::ResponseClass;

/// How deliveries retry. Defaults as in `dawnpost.toml`'s `[retry]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// First backoff step. Default 30s.
    pub base: Duration,
    /// Largest backoff step. Default 15m.
    pub cap: Duration,
    /// Largest Retry-After honoured; longer requests are clamped. Default 15m.
    pub max_retry_after: Duration,
    /// Attempts before quarantine. Default 8.
    pub max_attempts: u32,
    /// Age (from the delivery's creation) after which it is quarantined. Default 6h.
    pub max_age: Duration,
    /// Jitter as a fraction of the delay, in `[0, 1]`. Default 0.2.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::seconds(30),
            cap: Duration::minutes(15),
            max_retry_after: Duration::minutes(15),
            max_attempts: 8,
            max_age: Duration::hours(6),
            jitter: 0.2,
        }
    }
}

impl From<&RetrySettings> for RetryPolicy {
    fn from(s: &RetrySettings) -> Self {
        RetryPolicy {
            base: s.base.as_chrono(),
            cap: s.cap.as_chrono(),
            max_retry_after: s.max_retry_after.as_chrono(),
            max_attempts: s.max_attempts,
            max_age: s.max_age.as_chrono(),
            ..RetryPolicy::default()
        }
    }
}

/// What the policy decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Sent,
    Retry {
        at: DateTime<Utc>,
        /// The receiver's Retry-After, after clamping, when it was honoured.
        honoured_retry_after: Option<Duration>,
    },
    Quarantine {
        why: String,
    },
}

impl RetryPolicy {
    /// How much of a receiver's Retry-After is honoured: never less than nothing, at most
    /// `max_retry_after`. The retry waits this long (plus jitter), and so does its host's pause.
    pub(crate) fn honoured(&self, asked: Duration) -> Duration {
        asked.max(Duration::zero()).min(self.max_retry_after)
    }

    /// Until when a rate-limited reply pauses its host: the Retry-After it asked (clamped, as
    /// [`RetryPolicy::honoured`]), else the instant the retry was put at, else (no retry
    /// follows) the base delay. Deliveries and owners' notices pause a host alike.
    pub(crate) fn pause_until(
        &self,
        now: DateTime<Utc>,
        retry_after: Option<Duration>,
        decision: &Decision,
    ) -> DateTime<Utc> {
        match (retry_after, decision) {
            (Some(asked), _) => crate::domain::clock::add(now, self.honoured(asked)),
            (None, Decision::Retry { at, .. }) => *at,
            (None, _) => crate::domain::clock::add(now, self.base),
        }
    }

    /// Decides what follows attempt number `attempt` (1-based) of a delivery created at
    /// `created_at`. `jitter_sample` is a uniform sample in `[0, 1)`; passing it in keeps the
    /// function pure.
    pub(crate) fn decide(
        &self,
        now: DateTime<Utc>,
        created_at: DateTime<Utc>,
        attempt: u32,
        class: ResponseClass,
        retry_after: Option<Duration>,
        jitter_sample: f64,
    ) -> Decision {
        match class {
            ResponseClass::Accepted => return Decision::Sent,
            ResponseClass::Permanent => {
                return Decision::Quarantine {
                    why: "permanent failure".into(),
                };
            }
            ResponseClass::RateLimited
            | ResponseClass::Transient
            | ResponseClass::Ambiguous
            | ResponseClass::Unknown => {}
        }
        if attempt >= self.max_attempts {
            return Decision::Quarantine {
                why: format!(
                    "attempt budget exhausted ({attempt} of {})",
                    self.max_attempts
                ),
            };
        }
        let u = jitter_sample.clamp(0.0, 1.0);
        let (delay, honoured) = match (class, retry_after) {
            (ResponseClass::RateLimited, Some(asked)) => {
                let asked = self.honoured(asked);
                // Added on top only: at least 1s of spread so a herd does not return together.
                let spread = scale(asked, self.jitter).max(Duration::seconds(1));
                (asked + scale(spread, u), Some(asked))
            }
            _ => {
                let backoff = self.backoff(attempt);
                (backoff - scale(backoff, self.jitter * u), None)
            }
        };
        // Saturating: no configured span can make an instant overflow.
        let at = crate::domain::clock::add(now, delay);
        if at > crate::domain::clock::add(created_at, self.max_age) {
            return Decision::Quarantine {
                why: format!(
                    "age budget exhausted: the next try would be {} after creation (max_age {})",
                    human(at - created_at),
                    human(self.max_age)
                ),
            };
        }
        Decision::Retry {
            at,
            honoured_retry_after: honoured,
        }
    }

    /// `min(base · 2^(attempt-1), cap)`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(30);
        let ms = self.base.num_milliseconds().saturating_mul(1i64 << shift);
        Duration::milliseconds(ms).min(self.cap)
    }
}

fn scale(d: Duration, f: f64) -> Duration {
    Duration::milliseconds((d.num_milliseconds() as f64 * f).round() as i64)
}

fn human(d: Duration) -> String {
    let s = d.num_seconds();
    if s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Parses a Retry-After value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. A date in the
/// past means "now"; anything else is absent.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = v.parse().ok()?;
        return Some(Duration::seconds(secs.min(365 * 86_400)));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    let when: DateTime<Utc> = when.into();
    Some((when - now).max(Duration::zero()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 10, 25, 6, 0, 0)
            .single()
            .expect("instant")
    }

    fn policy() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// One case of the decision table: an outcome at an attempt, and the delay range expected
    /// (`None`: quarantined) with the Retry-After honoured.
    struct Row {
        name: &'static str,
        class: ResponseClass,
        header: Option<&'static str>,
        attempt: u32,
        created: DateTime<Utc>,
        expect: Option<(Duration, Duration)>,
        honoured: Option<Duration>,
    }

    #[rustfmt::skip] // A table reads best one row a line.
    fn rows() -> Vec<Row> {
        let created = now() - Duration::minutes(1);
        let date = "Sun, 25 Oct 2026 06:02:00 GMT"; // 120 s after now
        let (s, m) = (Duration::seconds, Duration::minutes);
        let row = |name, class, header, attempt, expect, honoured| Row {
            name, class, header, attempt, created, expect, honoured,
        };
        use ResponseClass::{Ambiguous, RateLimited, Transient};
        vec![
            row("429 with Retry-After: 30", RateLimited, Some("30"), 1, Some((s(30), s(36))), Some(s(30))),
            row("429 with an HTTP-date", RateLimited, Some(date), 1, Some((s(120), s(144))), Some(s(120))),
            row("429 with a huge Retry-After is clamped", RateLimited, Some("86400"), 1, Some((m(15), m(18))), Some(m(15))),
            row("429 with garbage falls back to backoff", RateLimited, Some("soon, maybe"), 2, Some((s(48), s(60))), None),
            row("503 without Retry-After backs off exponentially", Transient, None, 3, Some((s(96), s(120))), None),
            row("backoff is capped", Transient, None, 7, Some((m(12), m(15))), None),
            row("the last allowed transient attempt quarantines", Transient, None, 8, None, None),
            Row {
                created: now() - Duration::hours(6),
                ..row("age budget exceeded quarantines", Transient, None, 2, None, None)
            },
            row("ambiguous retries like transient", Ambiguous, None, 1, Some((s(24), s(30))), None),
        ]
    }

    #[test]
    fn a_rate_limited_host_pauses_until_its_retry_after_else_the_retry() {
        let p = policy();
        let at = now() + Duration::seconds(47);
        let retry = Decision::Retry {
            at,
            honoured_retry_after: None,
        };
        assert_eq!(
            p.pause_until(now(), Some(Duration::seconds(30)), &retry),
            now() + Duration::seconds(30),
            "the Retry-After asked"
        );
        assert_eq!(
            p.pause_until(now(), Some(Duration::days(1)), &retry),
            now() + p.max_retry_after,
            "clamped like the retry"
        );
        assert_eq!(
            p.pause_until(now(), None, &retry),
            at,
            "the retry's instant"
        );
        let quarantined = Decision::Quarantine { why: "age".into() };
        assert_eq!(
            p.pause_until(now(), None, &quarantined),
            now() + p.base,
            "no retry follows: the base delay"
        );
    }

    #[test]
    fn decision_table() {
        let p = policy();
        for row in rows() {
            let ra = row.header.and_then(|h| parse_retry_after(h, now()));
            for u in [0.0, 0.5, 0.999] {
                match (
                    row.expect,
                    p.decide(now(), row.created, row.attempt, row.class, ra, u),
                ) {
                    (
                        Some((min, max)),
                        Decision::Retry {
                            at,
                            honoured_retry_after,
                        },
                    ) => {
                        let delay = at - now();
                        assert!(
                            delay >= min && delay <= max,
                            "{}: delay {delay} not in [{min}, {max}]",
                            row.name
                        );
                        assert_eq!(honoured_retry_after, row.honoured, "{}", row.name);
                    }
                    (None, Decision::Quarantine { .. }) => {}
                    (_, other) => panic!("{}: unexpected {other:?}", row.name),
                }
            }
        }
        let created = now() - Duration::minutes(1);
        assert_eq!(
            p.decide(now(), created, 1, ResponseClass::Accepted, None, 0.3),
            Decision::Sent
        );
        assert!(matches!(
            p.decide(now(), created, 1, ResponseClass::Permanent, None, 0.3),
            Decision::Quarantine { .. }
        ));
    }

    #[test]
    fn jitter_stays_in_bounds_and_is_not_a_grid() {
        use rand::RngExt;
        let p = policy();
        let mut rng = rand::rng();
        let created = now();
        let mut distinct = std::collections::BTreeSet::new();
        for _ in 0..10_000 {
            let u: f64 = rng.random();
            let Decision::Retry { at, .. } = p.decide(
                now(),
                created,
                1,
                ResponseClass::RateLimited,
                Some(Duration::seconds(30)),
                u,
            ) else {
                panic!("should retry")
            };
            let delay = at - now();
            assert!(
                delay >= Duration::seconds(30),
                "never earlier than Retry-After: {delay}"
            );
            assert!(delay <= Duration::seconds(36), "jitter is small: {delay}");
            let Decision::Retry { at, .. } =
                p.decide(now(), created, 4, ResponseClass::Transient, None, u)
            else {
                panic!("should retry")
            };
            let backoff = at - now();
            assert!(
                backoff <= Duration::seconds(240) && backoff >= Duration::seconds(192),
                "{backoff}"
            );
            distinct.insert(backoff.num_milliseconds());
        }
        assert!(
            distinct.len() > 1000,
            "backoff must spread, got {} distinct delays",
            distinct.len()
        );
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            parse_retry_after("120", now()),
            Some(Duration::seconds(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now()), Some(Duration::zero()));
        assert_eq!(
            parse_retry_after("Sun, 25 Oct 2026 06:00:30 GMT", now()),
            Some(Duration::seconds(30))
        );
        assert_eq!(
            parse_retry_after("Sunday, 25-Oct-26 06:00:30 GMT", now()),
            Some(Duration::seconds(30))
        );
        assert_eq!(
            parse_retry_after("Sun Oct 25 06:00:30 2026", now()),
            Some(Duration::seconds(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 25 Oct 2026 05:00:00 GMT", now()),
            Some(Duration::zero()),
            "past means now"
        );
        assert_eq!(parse_retry_after("-5", now()), None);
        assert_eq!(parse_retry_after("1.5", now()), None);
        assert_eq!(parse_retry_after("tomorrow", now()), None);
        assert_eq!(parse_retry_after("", now()), None);
    }
}
