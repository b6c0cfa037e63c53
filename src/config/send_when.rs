//! `send_when`, `skip_if_empty` and `[report.alert]`: whether a rendered job is sent.
//! `"always"` (the default) sends what it renders; `"results"` sends only when the source data
//! has results: the value at `skip_if_empty`'s path (its older spelling), or the whole data
//! without one, is not missing, null, or an empty array, object or string. `"changed"` sends
//! when the data differs from the last delivered job's; `"alert"` when `[report.alert]`'s
//! condition starts to hold, while it holds as `repeat` says, and when it recovers.

use super::ConfigError;
use super::fields::Fields;
use crate::domain::condition::{Alert, Repeat, Rule};
use crate::domain::data_path::{DataPath, DataPathError};
use crate::domain::duration::Span;

const VALUES: &str = "use \"always\", \"results\", \"changed\" or \"alert\"";

/// Where in the source data an empty value ends the job `skipped`, if anywhere, and the rule a
/// rendered job is sent by, beyond "always".
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    errors: &mut Vec<ConfigError>,
) -> (Option<DataPath>, Option<Rule>) {
    let place = f.place.clone();
    let path = f.opt::<String>("skip_if_empty", errors).and_then(|p| {
        p.parse()
            .map_err(|e: DataPathError| errors.push(place.error("skip_if_empty", e.to_string())))
            .ok()
    });
    let given = f.opt::<String>("send_when", errors);
    let alert = f.table("alert", errors);
    if alert.is_some() && given.as_deref() != Some("alert") {
        errors.push(place.error("alert", "needs send_when = \"alert\""));
    }
    match given.as_deref() {
        None => (path, None),
        Some("results") => (path.or_else(|| "data".parse().ok()), None),
        Some("always") => {
            if let Some(p) = &path {
                let message = format!(
                    "\"always\" sends an empty report, which skip_if_empty = \"{p}\" skips: write send_when = \"results\", or leave one out"
                );
                errors.push(place.error("send_when", message));
            }
            (None, None)
        }
        Some("changed") => (path, Some(Rule::Changed)),
        Some("alert") => {
            let Some(t) = alert else {
                let message =
                    "send_when = \"alert\" needs [report.alert] with value and above or below";
                errors.push(place.error("alert", message));
                return (path, None);
            };
            let mut a = Fields::new(t, place.nested("alert"));
            let rule = load_alert(&mut a, errors).map(Rule::Alert);
            a.finish(errors);
            (path, rule)
        }
        Some(other) => {
            errors.push(place.error("send_when", format!("{other:?}: {VALUES}")));
            (path, None)
        }
    }
}

/// `[report.alert]`'s keys: `value`, `above` and/or `below`, `repeat`, `recovery`.
fn load_alert(a: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<Alert> {
    let place = a.place.clone();
    let value = a.req::<String>("value", errors).and_then(|p| {
        p.parse()
            .map_err(|e: DataPathError| errors.push(place.error("value", e.to_string())))
            .ok()
    });
    let given = a.raw("above").is_some() || a.raw("below").is_some();
    let above = bound(a, "above", errors);
    let below = bound(a, "below", errors);
    if let (Some(over), Some(under)) = (above, below)
        && under >= over
    {
        let message = format!("{under} is not below above = {over}: no value could be fine");
        errors.push(place.error("below", message));
    }
    if !given {
        errors.push(place.error("above", "missing: an alert needs above, below or both"));
    }
    let repeat = match a.opt::<String>("repeat", errors).as_deref() {
        None | Some("never") => Some(Repeat::Never),
        Some("every_run") => Some(Repeat::EveryRun),
        Some(text) => match text.parse::<Span>() {
            Ok(span) if !span.is_zero() => Some(Repeat::Every(span)),
            _ => {
                let message =
                    format!("{text:?}: use \"never\", \"every_run\" or a duration such as \"3d\"");
                errors.push(place.error("repeat", message));
                None
            }
        },
    };
    let recovery = a.opt::<bool>("recovery", errors).unwrap_or(true);
    Some(Alert {
        value: value?,
        above,
        below,
        repeat: repeat?,
        recovery,
    })
}

/// A threshold: a finite number (an integer or a float).
fn bound(a: &mut Fields<'_, '_>, name: &'static str, errors: &mut Vec<ConfigError>) -> Option<f64> {
    let place = a.place.clone();
    let found = match a.raw(name)? {
        toml::Value::Integer(n) => return Some(*n as f64),
        toml::Value::Float(x) if x.is_finite() => return Some(*x),
        toml::Value::String(s) => format!("the string {s:?}: write the number without quotes"),
        other => format!("a {}", other.type_str()),
    };
    errors.push(place.error(name, format!("expected a number, found {found}")));
    None
}
