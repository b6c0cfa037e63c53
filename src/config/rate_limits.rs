//! `[[rate_limit]]` in `dawnpost.toml`: the send rate a destination host accepts.
//!
//! ```toml
//! [[rate_limit]]
//! host = "smtp.example.com"   # the SMTP relay, a webhook host, host:port, or a glob
//! per_second = 14             # sends a second, across all reports (a fraction is allowed)
//! burst = 14                  # sends allowed at once after a quiet spell; default per_second
//! ```
//!
//! `rate = "14/s"` (or `"300/m"`, `"1000/h"`, or a bare number of sends a second) may stand
//! instead of `per_second`.
//!
//! An email's host is the relay's (`smtp_url`), a webhook's its URL's. A pattern is matched,
//! without regard to case, against both `host` and `host:port`; the first entry that matches
//! applies, and a glob limits each host it matches on its own.

use super::ConfigError;
use super::fields::{Fields, Place};

/// One `[[rate_limit]]` entry.
#[derive(Debug, Clone)]
pub struct RateLimitSpec {
    /// The pattern as written.
    pub host: String,
    pub matcher: globset::GlobMatcher,
    pub per_second: f64,
    pub burst: u32,
}

impl RateLimitSpec {
    /// Whether a destination (`host:port`) falls under this entry.
    pub fn matches(&self, host_port: &str) -> bool {
        let host_port = host_port.to_ascii_lowercase();
        let host = host_port
            .rsplit_once(':')
            .map_or(host_port.as_str(), |(h, _)| h);
        self.matcher.is_match(&host_port) || self.matcher.is_match(host)
    }
}

/// The most a limit may allow; beyond it a limit is no limit.
const MAX_PER_SECOND: f64 = 100_000.0;

/// Reads the `rate_limit` array of tables.
pub(super) fn load(
    value: Option<&toml::Value>,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<RateLimitSpec> {
    let tables = match value {
        None => return Vec::new(),
        Some(toml::Value::Array(items)) => items,
        Some(other) => {
            errors.push(place.error(
                "rate_limit",
                format!("expected [[rate_limit]] tables, found {}", other.type_str()),
            ));
            return Vec::new();
        }
    };
    let mut specs: Vec<RateLimitSpec> = Vec::new();
    for (i, item) in tables.iter().enumerate() {
        let here = place.nested(&format!("rate_limit[{i}]"));
        let Some(table) = item.as_table() else {
            errors.push(here.error("(table)", "expected a table"));
            continue;
        };
        if let Some(spec) = entry(Fields::new(table, here.clone()), errors) {
            if specs.iter().any(|s| s.host == spec.host) {
                errors
                    .push(here.error("host", format!("{:?} has a rate limit already", spec.host)));
                continue;
            }
            specs.push(spec);
        }
    }
    specs
}

fn entry(mut f: Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<RateLimitSpec> {
    let host: Option<String> = f.req("host", errors);
    let place = f.place.clone();
    // A per_second of the wrong shape is refused by `opt` (and reads as absent).
    let per_second_given = f.raw("per_second").is_some();
    let per_second: Option<f64> = f.opt("per_second", errors);
    let rate = f.raw("rate").cloned();
    let per_second = match (per_second, rate) {
        (Some(_), Some(_)) => {
            errors.push(place.error("rate", "set per_second or rate, not both"));
            None
        }
        (Some(n), None) => Some(n),
        (None, Some(rate)) => match parse_rate(&rate) {
            Ok(n) => Some(n),
            Err(e) => {
                errors.push(place.error("rate", e));
                None
            }
        },
        (None, None) => {
            if !per_second_given {
                errors
                    .push(place.error("per_second", "missing required field (or rate = \"N/s\")"));
            }
            None
        }
    };
    let burst: Option<u32> = f.opt("burst", errors);
    f.finish(errors);
    let host = host?.trim().to_ascii_lowercase();
    if host.is_empty() || host.contains(['/', '@']) {
        errors.push(place.error(
            "host",
            format!("{host:?} is not a host: write smtp.example.com, carrier.example:8443 or *.carrier.example"),
        ));
        return None;
    }
    let matcher = match globset::Glob::new(&host) {
        Ok(g) => g.compile_matcher(),
        Err(e) => {
            errors.push(place.error("host", format!("{host:?} is not a valid glob: {e}")));
            return None;
        }
    };
    let per_second = per_second?;
    if !(per_second > 0.0 && per_second <= MAX_PER_SECOND) {
        errors.push(place.error(
            "per_second",
            format!("{per_second} must be above 0 and at most {MAX_PER_SECOND}"),
        ));
        return None;
    }
    let burst = match burst {
        Some(0) => {
            errors.push(place.error("burst", "must be at least 1"));
            return None;
        }
        Some(b) => b,
        // As many as a second allows, at least one.
        None => per_second.ceil().max(1.0) as u32,
    };
    Some(RateLimitSpec {
        host,
        matcher,
        per_second,
        burst,
    })
}

/// `rate`: a number of sends a second, or `"N/s"`, `"N/m"`, `"N/h"`.
fn parse_rate(value: &toml::Value) -> Result<f64, String> {
    let bad = || format!("{value} is not a rate: write 20, \"20/s\", \"300/m\" or \"1000/h\"");
    match value {
        toml::Value::Integer(n) => Ok(*n as f64),
        toml::Value::Float(n) => Ok(*n),
        toml::Value::String(s) => {
            let (n, unit) = s.split_once('/').ok_or_else(bad)?;
            let n: f64 = n.trim().parse().map_err(|_| bad())?;
            let per = match unit.trim() {
                "s" | "sec" | "second" => 1.0,
                "m" | "min" | "minute" => 60.0,
                "h" | "hour" => 3600.0,
                _ => return Err(bad()),
            };
            Ok(n / per)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> (Vec<RateLimitSpec>, Vec<String>) {
        let table: toml::Table = toml::from_str(toml_text).expect("toml");
        let path = std::path::Path::new("config/dawnpost.toml");
        let mut errors = Vec::new();
        let specs = load(table.get("rate_limit"), &Place::new(path), &mut errors);
        (specs, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn entries_match_hosts_ports_and_globs() {
        let (specs, errors) = parse(
            "[[rate_limit]]\nhost = \"SMTP.example.com\"\nper_second = 14\n\
             [[rate_limit]]\nhost = \"*.carrier.example\"\nper_second = 0.5\nburst = 2\n\
             [[rate_limit]]\nhost = \"127.0.0.1:9001\"\nper_second = 20\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(specs[0].burst, 14);
        assert!(specs[0].matches("smtp.example.com:587"));
        assert!(!specs[0].matches("smtp.example.org:587"));
        assert!(specs[1].matches("hooks.carrier.example:443"));
        assert!(!specs[1].matches("carrier.example.evil:443"));
        assert_eq!((specs[1].per_second, specs[1].burst), (0.5, 2));
        assert!(specs[2].matches("127.0.0.1:9001"));
        assert!(!specs[2].matches("127.0.0.1:9002"));
    }

    #[test]
    fn a_rate_may_be_written_per_second_minute_or_hour() {
        let (specs, errors) = parse(
            "[[rate_limit]]\nhost = \"a.example\"\nrate = \"14/s\"\n\
             [[rate_limit]]\nhost = \"b.example\"\nrate = \"300/m\"\n\
             [[rate_limit]]\nhost = \"c.example\"\nrate = 5\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        let rates: Vec<f64> = specs.iter().map(|s| s.per_second).collect();
        assert_eq!(rates, [14.0, 5.0, 5.0]);
        let (_, errors) = parse(
            "[[rate_limit]]\nhost = \"a.example\"\nrate = \"14 per second\"\n\
             [[rate_limit]]\nhost = \"b.example\"\nrate = \"1/s\"\nper_second = 1\n",
        );
        let all = errors.join("\n");
        assert!(
            all.contains("rate_limit[0].rate: \"14 per second\" is not a rate"),
            "{all}"
        );
        assert!(
            all.contains("rate_limit[1].rate: set per_second or rate"),
            "{all}"
        );
    }

    #[test]
    fn bad_entries_name_their_field() {
        let (_, errors) = parse(
            "[[rate_limit]]\nhost = \"a.example\"\nper_second = 0\n\
             [[rate_limit]]\nper_second = 5\n\
             [[rate_limit]]\nhost = \"https://b.example/hook\"\nper_second = 5\n\
             [[rate_limit]]\nhost = \"c.example\"\nper_second = 5\nburst = 0\nspeed = 3\n\
             [[rate_limit]]\nhost = \"d.example\"\nper_second = 5\n\
             [[rate_limit]]\nhost = \"D.example\"\nper_second = 6\n",
        );
        let all = errors.join("\n");
        for want in [
            "rate_limit[0].per_second: 0 must be above 0",
            "rate_limit[1].host: missing required field",
            "rate_limit[2].host: \"https://b.example/hook\" is not a host",
            "rate_limit[3].burst: must be at least 1",
            "rate_limit[3].speed: unknown key",
            "rate_limit[5].host: \"d.example\" has a rate limit already",
        ] {
            assert!(all.contains(want), "{want} in\n{all}");
        }
        // A value of the wrong shape is one error, not also "missing".
        let (_, errors) = parse("[[rate_limit]]\nhost = \"a.example\"\nper_second = \"fast\"\n");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("rate_limit[0].per_second:"),
            "{errors:?}"
        );
    }
}
