//! Human durations in config and on the command line: `500ms`, `30s`, `15m`, `6h`, `7d`, `2w`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A non-negative span of time written as an integer and a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(Duration);

impl Span {
    /// The longest span written anywhere: 100 years (36,525 days).
    pub const MAX: Span = Span::from_secs(36_525 * 86_400);

    pub const fn from_secs(secs: u64) -> Self {
        Span(Duration::from_secs(secs))
    }

    pub const fn from_millis(ms: u64) -> Self {
        Span(Duration::from_millis(ms))
    }

    pub(crate) const fn from_std(d: Duration) -> Self {
        Span(d)
    }

    pub(crate) const fn as_std(self) -> Duration {
        self.0
    }

    pub fn as_chrono(self) -> chrono::Duration {
        chrono::Duration::from_std(self.0).unwrap_or(chrono::Duration::MAX)
    }

    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    pub(crate) fn as_millis_i64(self) -> i64 {
        i64::try_from(self.0.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (write an integer and a unit: ms, s, m, h, d or w, e.g. \"30s\", \"15m\", \"7d\")"
)]
pub struct SpanError {
    input: String,
    reason: &'static str,
}

impl FromStr for Span {
    type Err = SpanError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason| SpanError {
            input: input.to_string(),
            reason,
        };
        let s = input.trim();
        if s.starts_with('-') {
            return Err(err("negative durations are not allowed"));
        }
        let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(digits_end);
        if digits.is_empty() {
            return Err(err("missing number"));
        }
        let n: u64 = digits.parse().map_err(|_| err("number too large"))?;
        let unit_ms: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        let ms = n
            .checked_mul(unit_ms)
            .ok_or_else(|| err("number too large"))?;
        // No setting needs more, and every instant plus or minus a span stays far inside
        // what chrono represents.
        if ms > Span::MAX.0.as_millis() as u64 {
            return Err(err("longer than 100 years"));
        }
        Ok(Span(Duration::from_millis(ms)))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
        ] {
            if ms >= size && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(
            "30s".parse::<Span>().unwrap().as_std(),
            Duration::from_secs(30)
        );
        assert_eq!(
            "15m".parse::<Span>().unwrap().as_std(),
            Duration::from_secs(900)
        );
        assert_eq!(
            "6h".parse::<Span>().unwrap().as_std(),
            Duration::from_secs(21_600)
        );
        assert_eq!(
            "7d".parse::<Span>().unwrap().as_std(),
            Duration::from_secs(604_800)
        );
        assert_eq!(
            "250ms".parse::<Span>().unwrap().as_std(),
            Duration::from_millis(250)
        );
        assert_eq!("0s".parse::<Span>().unwrap(), Span::default());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "s",
            "10",
            "10x",
            "-5m",
            "1.5h",
            "99999999999999999999d",
            "5 m",
        ] {
            assert!(bad.parse::<Span>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn displays_in_largest_unit() {
        assert_eq!("90m".parse::<Span>().unwrap().to_string(), "90m");
        assert_eq!("120m".parse::<Span>().unwrap().to_string(), "2h");
        assert_eq!("1500ms".parse::<Span>().unwrap().to_string(), "1500ms");
    }
}
