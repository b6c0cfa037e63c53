//! Readiness: whether a report's data is there yet (`ready_when`), and the deadline of the
//! wait for it (`wait_until`). A probe is bounded by its timeout; one that errs or hangs
//! answers "failed", which counts as not ready.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;

use crate::config::{Deadline, Readiness};
use crate::domain::window::{Window, resolve_local};
pub use crate::report::source::{Answer, ProbeOutcome};

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

/// The question `probe` asks of its kind.
async fn ask(
    probe: &crate::config::SourceSpec,
    date: NaiveDate,
    window: &Window,
    limit: crate::domain::duration::Span,
    http: &reqwest::Client,
) -> Answer {
    let kinds = crate::report::source::kinds();
    let Some(kind) = kinds
        .iter()
        .find(|k| k.kind() == probe.kind() && k.probes())
    else {
        let why = format!(
            "this version asks no readiness probe of kind {:?}",
            probe.kind()
        );
        return Answer::new(ProbeOutcome::Failed, why);
    };
    let at = crate::report::source::Ask {
        date,
        window,
        limit,
        http,
    };
    kind.ask(probe, at).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OnLate;
    use crate::domain::duration::Span;

    fn readiness(wait_until: Deadline) -> Readiness {
        Readiness {
            probe: crate::config::SourceSpec::new(crate::report::source::FileProbe {
                path: "data/ready-{{date}}.flag".into(),
            }),
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
}
