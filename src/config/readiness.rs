//! A report's readiness: `ready_when` (how to ask whether its data is there), `wait_until`
//! (how long to wait for it) and `on_late` (what to do when the wait runs out).

use std::path::{Path, PathBuf};

use chrono::NaiveTime;

use super::ConfigError;
use super::fields::{Fields, Place};
use crate::domain::cron::CronExpr;
use crate::domain::duration::Span;

/// How a report's data says it is ready, how often to ask, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub probe: Probe,
    /// Between two probes (jittered), at least a second.
    pub every: Span,
    /// The longest one probe may take (default 30s): a probe that errs or hangs is "not ready".
    pub timeout: Span,
    pub wait_until: Deadline,
    pub on_late: OnLate,
}

/// One question to the data's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A GET whose URL may hold `{{window.start}}` and `{{window.end}}`: 2xx is ready.
    Http { url: String },
    /// A read-only query (in a file) with the window as `$1` and `$2`: ready when the first
    /// column of the first row is true (or a non-zero number).
    Sql { url_env: String, query: PathBuf },
    /// A file whose path may hold `{{date}}`, `{{window.start}}` and `{{window.end}}`: ready
    /// once it exists.
    File { path: String },
}

impl Probe {
    pub fn kind(&self) -> &'static str {
        match self {
            Probe::Http { .. } => "http",
            Probe::Sql { .. } => "sql",
            Probe::File { .. } => "file",
        }
    }
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

/// The fields the readiness keys of a report read: `ready_when`, `wait_until`, `on_late`.
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    root: &Path,
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
    let probe = load_probe(t, &place.nested("ready_when"), root, errors);
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
    root: &Path,
    errors: &mut Vec<ConfigError>,
) -> Option<(Probe, Span, Span)> {
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
    let probe = match f.req::<String>("kind", errors)?.as_str() {
        "http" => http_probe(&mut f, errors),
        "sql" => sql_probe(&mut f, root, errors),
        "file" => file_probe(&mut f, root, errors),
        other => {
            let message =
                format!("{other:?} is not a readiness kind: use \"http\", \"sql\" or \"file\"");
            errors.push(place.error("kind", message));
            return None;
        }
    };
    f.finish(errors);
    Some((probe?, every?, timeout.unwrap_or(Span::from_secs(30))))
}

fn http_probe(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<Probe> {
    let url = f.req::<String>("url", errors)?;
    match super::fields::window_url(&url) {
        Ok(()) => Some(Probe::Http { url }),
        Err(message) => {
            errors.push(f.place.error("url", message));
            None
        }
    }
}

fn sql_probe(f: &mut Fields<'_, '_>, root: &Path, errors: &mut Vec<ConfigError>) -> Option<Probe> {
    let url_env = f.env_name_required("url_env", errors);
    let query = f.req::<PathBuf>("query", errors).and_then(|q| {
        let path = super::resolve(root, &q);
        let exists = path.is_file();
        if !exists {
            let message = format!("query file {} does not exist", path.display());
            errors.push(f.place.error("query", message));
        }
        exists.then_some(path)
    });
    Some(Probe::Sql {
        url_env: url_env?,
        query: query?,
    })
}

/// The placeholders a file probe's path may hold.
const FILE_PLACEHOLDERS: [&str; 3] = ["{{date}}", "{{window.start}}", "{{window.end}}"];

fn file_probe(f: &mut Fields<'_, '_>, root: &Path, errors: &mut Vec<ConfigError>) -> Option<Probe> {
    let path = f.req::<String>("path", errors)?;
    let bare = FILE_PLACEHOLDERS
        .iter()
        .fold(path.clone(), |p, ph| p.replace(ph, ""));
    if path.trim().is_empty() || bare.contains("{{") {
        let message = format!(
            "{path:?}: only {{{{date}}}}, {{{{window.start}}}} and {{{{window.end}}}} may be templated"
        );
        errors.push(f.place.error("path", message));
        return None;
    }
    let resolved = super::resolve(root, Path::new(&path));
    Some(Probe::File {
        path: resolved.to_string_lossy().into_owned(),
    })
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
