//! Readiness: whether a report's data is there yet (`ready_when`), and the deadline of the
//! wait for it (`wait_until`). A probe is bounded by its timeout; one that errs or hangs
//! answers "failed", which counts as not ready.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use crate::config::{Deadline, Probe, Readiness};
use crate::domain::duration::Span;
use crate::domain::window::{Window, resolve_local, rfc3339};

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeOutcome {
    Ready,
    NotReady,
    /// An error or a timeout: counts as not ready.
    Failed,
}

impl ProbeOutcome {
    pub const ALL: [ProbeOutcome; 3] = [
        ProbeOutcome::Ready,
        ProbeOutcome::NotReady,
        ProbeOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeOutcome::Ready => "ready",
            ProbeOutcome::NotReady => "not_ready",
            ProbeOutcome::Failed => "failed",
        }
    }

    /// How a person reads it.
    pub fn shown(self) -> &'static str {
        match self {
            ProbeOutcome::Ready => "ready",
            ProbeOutcome::NotReady => "not ready",
            ProbeOutcome::Failed => "failed",
        }
    }
}

/// A probe's finding and what it answered, for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: ProbeOutcome,
    pub text: String,
}

impl Answer {
    fn new(outcome: ProbeOutcome, text: impl Into<String>) -> Answer {
        Answer {
            outcome,
            text: text.into(),
        }
    }
}

/// The instant a job of local `date`, fired at `fire_at`, stops waiting for its data. A local
/// time a DST gap swallows is the gap's end.
pub fn deadline(r: &Readiness, date: NaiveDate, fire_at: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    match r.wait_until {
        Deadline::At(t) => resolve_local(date.and_time(t), tz).unwrap_or(fire_at),
        Deadline::AfterFire(span) => crate::domain::clock::add(fire_at, span.as_chrono()),
    }
}

/// When to probe again after a probe at `now` that was not ready: `every` later, jittered by up
/// to a tenth either way (`jitter` in `[0, 1)`), never past the deadline.
pub(crate) fn next_probe(
    r: &Readiness,
    now: DateTime<Utc>,
    deadline: DateTime<Utc>,
    jitter: f64,
) -> DateTime<Utc> {
    let every = r.every.as_millis_i64();
    let spread = every / 10;
    #[allow(clippy::cast_possible_truncation)]
    let offset = ((jitter.clamp(0.0, 1.0) * 2.0 - 1.0) * spread as f64) as i64;
    let wait = chrono::Duration::milliseconds(every.saturating_add(offset).max(1000));
    crate::domain::clock::add(now, wait).min(deadline)
}

/// Asks once whether the data of job `date` (window `window`) is ready, within the probe's
/// timeout.
pub async fn probe(
    r: &Readiness,
    date: NaiveDate,
    window: &Window,
    http: &reqwest::Client,
) -> Answer {
    let limit = r.timeout;
    // The probe's own means cut it at `limit`; this is the backstop.
    let backstop = limit.as_std().saturating_add(Duration::from_secs(1));
    match tokio::time::timeout(backstop, ask(&r.probe, date, window, limit, http)).await {
        Ok(answer) => answer,
        Err(_) => Answer::new(
            ProbeOutcome::Failed,
            format!("no answer within {limit}: cut at its timeout"),
        ),
    }
}

async fn ask(
    probe: &Probe,
    date: NaiveDate,
    window: &Window,
    limit: Span,
    http: &reqwest::Client,
) -> Answer {
    match probe {
        Probe::Http { url } => {
            ask_http(&crate::report::source::http_url(url, window), limit, http).await
        }
        Probe::Sql { url_env, query } => {
            match crate::report::source::first_cell(url_env, query, window, limit).await {
                Ok(Some(v)) if truthy(&v) => {
                    Answer::new(ProbeOutcome::Ready, format!("the query answered {v}"))
                }
                Ok(Some(v)) => {
                    Answer::new(ProbeOutcome::NotReady, format!("the query answered {v}"))
                }
                Ok(None) => Answer::new(ProbeOutcome::NotReady, "the query returned no rows"),
                Err(e) => Answer::new(ProbeOutcome::Failed, e.message()),
            }
        }
        Probe::File { path } => {
            let path = file_path(path, date, window);
            match tokio::fs::try_exists(&path).await {
                Ok(true) => Answer::new(ProbeOutcome::Ready, format!("{path} exists")),
                Ok(false) => Answer::new(ProbeOutcome::NotReady, format!("no file {path}")),
                Err(e) => Answer::new(ProbeOutcome::Failed, format!("cannot look for {path}: {e}")),
            }
        }
    }
}

async fn ask_http(url: &str, limit: Span, http: &reqwest::Client) -> Answer {
    let shown = crate::domain::redact::redact_endpoint(url);
    match http.get(url).timeout(limit.as_std()).send().await {
        Ok(resp) if resp.status().is_success() => Answer::new(
            ProbeOutcome::Ready,
            format!("GET {shown}: HTTP {}", resp.status()),
        ),
        Ok(resp) => Answer::new(
            ProbeOutcome::NotReady,
            format!("GET {shown}: HTTP {}", resp.status()),
        ),
        Err(e) => Answer::new(
            ProbeOutcome::Failed,
            format!("GET {shown}: {}", crate::domain::redact::http_error(&e)),
        ),
    }
}

/// A file probe's path for a job: `{{date}}` is its local date, the window's bounds RFC 3339.
pub(crate) fn file_path(template: &str, date: NaiveDate, window: &Window) -> String {
    template
        .replace("{{date}}", &date.to_string())
        .replace("{{window.start}}", &rfc3339(window.start))
        .replace("{{window.end}}", &rfc3339(window.end))
}

/// SQL's truth: `true`, or a number other than zero (SQLite has no boolean type).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OnLate;

    fn readiness(wait_until: Deadline) -> Readiness {
        Readiness {
            probe: Probe::File {
                path: "data/ready-{{date}}.flag".into(),
            },
            every: Span::from_secs(300),
            timeout: Span::from_secs(30),
            wait_until,
            on_late: OnLate::Send,
        }
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("an RFC 3339 instant")
    }

    #[test]
    fn a_local_deadline_is_on_the_jobs_date_in_its_timezone_and_a_gap_moves_it_to_the_gaps_end() {
        let tz: Tz = "Europe/Berlin".parse().expect("a timezone");
        let at = |h, m| Deadline::At(chrono::NaiveTime::from_hms_opt(h, m, 0).expect("a time"));
        let date = |s: &str| s.parse::<NaiveDate>().expect("a date");
        let fire = utc("2026-03-29T04:30:00Z");
        assert_eq!(
            deadline(&readiness(at(9, 0)), date("2026-03-29"), fire, tz),
            utc("2026-03-29T07:00:00Z")
        );
        assert_eq!(
            deadline(&readiness(at(9, 0)), date("2026-01-15"), fire, tz),
            utc("2026-01-15T08:00:00Z")
        );
        // 02:30 does not exist in Berlin on 2026-03-29: the gap ends at 03:00 CEST (01:00Z).
        assert_eq!(
            deadline(&readiness(at(2, 30)), date("2026-03-29"), fire, tz),
            utc("2026-03-29T01:00:00Z")
        );
        let after = Deadline::AfterFire(Span::from_secs(3 * 3600));
        assert_eq!(
            deadline(&readiness(after), date("2026-03-29"), fire, tz),
            utc("2026-03-29T07:30:00Z")
        );
    }

    #[test]
    fn the_next_probe_is_every_later_within_a_tenth_and_never_past_the_deadline() {
        let r = readiness(Deadline::AfterFire(Span::from_secs(3600)));
        let now = utc("2026-11-30T06:00:00Z");
        let far = utc("2026-12-01T00:00:00Z");
        assert_eq!(next_probe(&r, now, far, 0.5), utc("2026-11-30T06:05:00Z"));
        assert_eq!(next_probe(&r, now, far, 0.0), utc("2026-11-30T06:04:30Z"));
        assert!(next_probe(&r, now, far, 0.999_999) < utc("2026-11-30T06:05:30Z"));
        let near = utc("2026-11-30T06:01:00Z");
        assert_eq!(next_probe(&r, now, near, 0.5), near);
    }

    #[test]
    fn a_file_probes_path_takes_the_jobs_date_and_window() {
        let window = Window {
            start: utc("2026-11-29T23:00:00Z"),
            end: utc("2026-11-30T23:00:00Z"),
        };
        let date = "2026-11-30".parse().expect("a date");
        assert_eq!(
            file_path("data/ready-{{date}}.flag", date, &window),
            "data/ready-2026-11-30.flag"
        );
        assert_eq!(
            file_path("x/{{window.start}}", date, &window),
            "x/2026-11-29T23:00:00Z"
        );
    }

    #[test]
    fn sql_truth_is_true_or_a_non_zero_number() {
        for (v, ready) in [
            (serde_json::json!(true), true),
            (serde_json::json!(1), true),
            (serde_json::json!(0.5), true),
            (serde_json::json!(false), false),
            (serde_json::json!(0), false),
            (serde_json::json!(null), false),
            (serde_json::json!("true"), false),
        ] {
            assert_eq!(truthy(&v), ready, "{v}");
        }
    }
}
