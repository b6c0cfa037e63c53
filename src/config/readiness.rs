//! A report's readiness: `ready_when` (how to ask whether its data is there), `wait_until`
//! (how long to wait for it) and `on_late` (what to do when the wait runs out).

use chrono::NaiveTime;

use super::ConfigError;
use super::fields::{Fields, Place};
use crate::domain::cron::CronExpr;
use crate::domain::duration::Span;

/// How a report's data says it is ready, how often to ask, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// One question to the data's owner, in its kind's settings (`ready_when`'s `kind`): an
    /// http GET whose 2xx is ready, an sql query whose first cell is true, a file that exists.
    pub probe: super::SourceSpec,
    /// Between two probes (jittered), at least a second.
    pub every: Span,
    /// The longest one probe may take (default 30s): a probe that errs or hangs is "not ready".
    pub timeout: Span,
    pub wait_until: Deadline,
    pub on_late: OnLate,
}

/// When a job stops waiting for its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// A local wall-clock time on the job's date (`"09:00"`).
    At(NaiveTime),
    /// A span counted from the job's fire instant (`"3h"`).
    AfterFire(Span),
}

impl std::fmt::Display for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Deadline::At(t) => write!(f, "{}", t.format("%H:%M")),
            Deadline::AfterFire(span) => write!(f, "{span} after the fire"),
        }
    }
}

/// What a job whose data is not ready by its deadline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLate {
    /// Renders with what is there; the template sees `stale = true`.
    Send,
    /// Ends `skipped`, with the reason.
    Skip,
    /// Waits in `quarantined` for an operator, who may redrive it.
    Quarantine,
}

impl OnLate {
    pub fn as_str(self) -> &'static str {
        match self {
            OnLate::Send => "send",
            OnLate::Skip => "skip",
            OnLate::Quarantine => "quarantine",
        }
    }
}

/// The kinds of source, and what they may ask while they read a probe's keys.
pub(super) type Kinds<'k, 'c> = (
    &'k [&'k dyn super::SourceConfig],
    &'k super::SourceContext<'c>,
);

/// The fields the readiness keys of a report read: `ready_when`, `wait_until`, `on_late`.
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    kinds: Kinds<'_, '_>,
    schedule: Option<&CronExpr>,
    errors: &mut Vec<ConfigError>,
) -> Option<Readiness> {
    let wait_until = f.opt::<String>("wait_until", errors);
    let on_late = f.opt::<String>("on_late", errors);
    let Some(raw) = f.raw("ready_when") else {
        for (field, given) in [("wait_until", &wait_until), ("on_late", &on_late)] {
            if given.is_some() {
                errors.push(place.error(field, "needs ready_when: there is nothing to wait for"));
            }
        }
        return None;
    };
    let toml::Value::Table(t) = raw else {
        let message = "expected a table such as { kind = \"http\", url = \"…\", every = \"5m\" }";
        errors.push(place.error("ready_when", message));
        return None;
    };
    let probe = load_probe(t, &place.nested("ready_when"), kinds, errors);
    let deadline = match wait_until {
        None => {
            let message = "missing: a report with ready_when needs a deadline (\"09:00\", local time on the job's date, or \"3h\" after its fire)";
            errors.push(place.error("wait_until", message));
            None
        }
        Some(text) => deadline(&text, schedule)
            .map_err(|m| errors.push(place.error("wait_until", m)))
            .ok(),
    };
    let on_late = match on_late.as_deref() {
        None | Some("send") => Some(OnLate::Send),
        Some("skip") => Some(OnLate::Skip),
        Some("quarantine") => Some(OnLate::Quarantine),
        Some(other) => {
            let message = format!("{other:?} is not one of \"send\", \"skip\", \"quarantine\"");
            errors.push(place.error("on_late", message));
            None
        }
    };
    let (probe, every, timeout) = probe?;
    Some(Readiness {
        probe,
        every,
        timeout,
        wait_until: deadline?,
        on_late: on_late?,
    })
}

/// `{ kind, …, every, timeout }`.
fn load_probe(
    t: &toml::Table,
    place: &Place<'_>,
    (kinds, ctx): Kinds<'_, '_>,
    errors: &mut Vec<ConfigError>,
) -> Option<(super::SourceSpec, Span, Span)> {
    let mut f = Fields::new(t, place.clone());
    let every = match f.opt::<Span>("every", errors) {
        None if !t.contains_key("every") => {
            errors.push(place.error(
                "every",
                "missing required field (how often to ask, e.g. \"5m\")",
            ));
            None
        }
        Some(span) if span < Span::from_secs(1) => {
            errors.push(place.error("every", format!("{span} is too often: at least 1s")));
            None
        }
        other => other,
    };
    let timeout = f.positive("timeout", errors);
    let kind = f.req::<String>("kind", errors)?;
    let probing = || kinds.iter().filter(|k| k.probes());
    let Some(reader) = probing().find(|k| k.kind() == kind) else {
        let choice = super::sources::choice(probing());
        let message = format!("{kind:?} is not a readiness kind: use {choice}");
        errors.push(place.error("kind", message));
        return None;
    };
    let probe = reader.read_probe(&mut f, ctx, errors);
    f.finish(errors);
    Some((probe?, every?, timeout.unwrap_or(Span::from_secs(30))))
}

/// `wait_until`: `"HH:MM"` after the schedule's fire time, or a span longer than zero.
fn deadline(text: &str, schedule: Option<&CronExpr>) -> Result<Deadline, String> {
    if let Ok(t) = NaiveTime::parse_from_str(text.trim(), "%H:%M") {
        let fires = schedule.map(CronExpr::time_of_day);
        return match fires {
            Some(fire) if t <= fire => Err(format!(
                "{text:?} is not after the schedule's fire at {}: the deadline would pass before the job is made",
                fire.format("%H:%M:%S")
            )),
            _ => Ok(Deadline::At(t)),
        };
    }
    match text.parse::<Span>() {
        Ok(span) if span.is_zero() => {
            Err("must be longer than zero: the deadline would be the fire itself".into())
        }
        Ok(span) => Ok(Deadline::AfterFire(span)),
        Err(_) => Err(format!(
            "{text:?} is neither a local time (\"09:00\") nor a duration after the fire (\"3h\")"
        )),
    }
}
