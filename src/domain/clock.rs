//! Time is injected: domain code asks a [`Clock`], never the system directly, so tests can
//! move time forward without sleeping. The binary's clock is a [`LedgerClock`]: on a shared
//! ledger it keeps the ledger's time, so no node's wall clock decides a lease, a rescue or a
//! ready time.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

/// A source of the current instant.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;

    /// The clock that follows a shared ledger's time, when this is one (the binary's). An
    /// injected clock is the test's own and follows nothing.
    fn following(&self) -> Option<&LedgerClock> {
        None
    }
}

/// The binary's clock: the wall clock until [`LedgerClock::follow`] is given a reading of the
/// shared ledger's clock; from then on, that reading advanced by the monotonic clock. A wall
/// clock that runs ahead, lags or steps therefore moves nothing the node writes; how far it is
/// off is kept as [`LedgerClock::offset`].
#[derive(Debug)]
pub struct LedgerClock {
    wall: SharedClock,
    anchor: Mutex<Option<Anchor>>,
}

/// A reading of the ledger's clock, and the monotonic instant it was taken at.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    at: DateTime<Utc>,
    mono: std::time::Instant,
    /// The wall clock minus the ledger's at that reading.
    offset: Duration,
}

impl LedgerClock {
    /// Reads `wall` until it follows a ledger.
    pub fn new(wall: SharedClock) -> LedgerClock {
        LedgerClock {
            wall,
            anchor: Mutex::new(None),
        }
    }

    /// Follows the ledger's clock, read as `reference` by a query sent at the monotonic instant
    /// `sent` and answered at `answered` (taken as read halfway). Returns how far the wall clock
    /// is off it (positive: ahead).
    pub fn follow(
        &self,
        reference: DateTime<Utc>,
        sent: std::time::Instant,
        answered: std::time::Instant,
    ) -> Duration {
        let mono = sent + answered.saturating_duration_since(sent) / 2;
        let since = Duration::from_std(mono.elapsed()).unwrap_or(Duration::zero());
        let wall_then = sub(self.wall.now(), since);
        let offset = wall_then.signed_duration_since(reference);
        *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) = Some(Anchor {
            at: reference,
            mono,
            offset,
        });
        offset
    }

    /// How far the wall clock was off the ledger's at the last reading; `None` before one.
    pub fn offset(&self) -> Option<Duration> {
        self.anchor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|a| a.offset)
    }
}

impl Clock for LedgerClock {
    fn now(&self) -> DateTime<Utc> {
        let anchor = *self.anchor.lock().unwrap_or_else(|e| e.into_inner());
        match anchor {
            None => self.wall.now(),
            Some(a) => add(
                a.at,
                Duration::from_std(a.mono.elapsed()).unwrap_or(Duration::MAX),
            ),
        }
    }

    fn following(&self) -> Option<&LedgerClock> {
        Some(self)
    }
}

/// Why a node whose clock is off the ledger's by more than `bound` must not lease or rescue;
/// `None` when it may (an injected clock, SQLite, or an offset within the bound).
pub fn refusal(clock: &dyn Clock, bound: crate::domain::duration::Span) -> Option<String> {
    let offset = clock.following()?.offset()?;
    (offset.abs() > bound.as_chrono()).then(|| {
        format!(
            "this node's clock is {} off the ledger's, more than pool.max_clock_offset ({}): it leases and rescues nothing until its clock is fixed",
            signed_seconds(offset),
            bound
        )
    })
}

/// An offset as a person reads it: `+7200.0 s`, `-0.4 s`.
pub(crate) fn signed_seconds(d: Duration) -> String {
    format!("{:+.1} s", d.num_milliseconds() as f64 / 1000.0)
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
pub(crate) fn to_millis(t: DateTime<Utc>) -> i64 {
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
    fn a_ledger_clock_keeps_the_ledgers_time_whatever_the_wall_clock_does() {
        let ledger_time = from_millis(1_800_000_000_000);
        // A wall clock two hours ahead.
        let wall = ManualClock::new(add(ledger_time, Duration::hours(2)));
        let clock = LedgerClock::new(Arc::new(wall.clone()));
        assert_eq!(clock.now(), wall.now(), "the wall clock until it follows");
        let sent = std::time::Instant::now();
        let offset = clock.follow(ledger_time, sent, sent);
        assert!(
            (offset - Duration::hours(2)).abs() < Duration::seconds(1),
            "{offset}"
        );
        assert!((clock.now() - ledger_time).abs() < Duration::seconds(1));
        // The wall clock steps back three hours: the node's time does not move.
        wall.set(sub(ledger_time, Duration::hours(1)));
        assert!((clock.now() - ledger_time).abs() < Duration::seconds(1));
        let bound = crate::domain::duration::Span::from_secs(30);
        let why = refusal(&clock, bound).expect("two hours is past the bound");
        assert!(why.contains("+7200.0 s off the ledger's"), "{why}");
        assert!(why.contains("pool.max_clock_offset (30s)"), "{why}");
        assert_eq!(
            refusal(&wall, bound),
            None,
            "an injected clock follows nothing"
        );
        assert_eq!(
            refusal(&clock, crate::domain::duration::Span::from_secs(3 * 3600)),
            None
        );
    }

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
