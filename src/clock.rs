//! Time is injected: domain code asks a [`Clock`], never the system directly, so tests can
//! move time forward without sleeping.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// A source of the current instant.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The real clock, for the binary.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to, for tests and previews (`sweep --as-of`).
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// UTC milliseconds since the Unix epoch: how the ledger stores instants.
pub fn to_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The inverse of [`to_millis`]; out-of-range values clamp to the epoch rather than panic.
pub fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// `t + d`, saturating at chrono's largest (or smallest) instant instead of panicking.
pub fn add(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t.checked_add_signed(d).unwrap_or(if d < Duration::zero() {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// `t - d`, saturating like [`add`].
pub fn sub(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t.checked_sub_signed(d).unwrap_or(if d < Duration::zero() {
        DateTime::<Utc>::MAX_UTC
    } else {
        DateTime::<Utc>::MIN_UTC
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_arithmetic_saturates_instead_of_panicking() {
        let now = from_millis(1_800_000_000_000);
        assert_eq!(
            add(now, Duration::seconds(5)),
            from_millis(1_800_000_005_000)
        );
        assert_eq!(
            sub(now, Duration::seconds(5)),
            from_millis(1_799_999_995_000)
        );
        assert_eq!(add(now, Duration::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(sub(now, Duration::MAX), DateTime::<Utc>::MIN_UTC);
        assert_eq!(add(now, Duration::MIN), DateTime::<Utc>::MIN_UTC);
        assert_eq!(sub(now, Duration::MIN), DateTime::<Utc>::MAX_UTC);
    }
}
