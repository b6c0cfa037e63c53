//! Owners' notices: what a report's owners (`owners`, `owner_webhook`) are told when its work
//! is late or quarantined, and when. Pure: the notifier (`services::notifier`) reads the ledger and
//! sends; this module says which fires are expected by now, whether each is late, how
//! quarantines are batched, and what a message says.
//!
//! - **Late** is judged from the schedule, not from the ledger's rows: every fire whose
//!   `deliver_by` deadline has passed (within [`LOOKBACK`]) is expected, and it is late unless
//!   its job was done (or skipped, or cancelled by an operator) by the deadline — a fire that
//!   never became a job (the daemon down past `catch_up`, a stalled scheduler) is late too.
//! - **Quarantines** are batched per report: the first at once, the rest that arrive within
//!   [`BATCH_WINDOW`] of it in at most one more message when that window ends.

use std::sync::{Arc, RwLock};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::config::Report;
use crate::domain::keys::{IsoDate, JobKey};
use crate::domain::window::{resolve_local, rfc3339};
use crate::report::schedule::Fire;

/// How far back deadlines are judged: a deadline that passed longer ago than this is no longer
/// looked at (so a daemon down for longer tells of the last two days only).
pub(crate) const LOOKBACK: Duration = Duration::days(2);
/// A report's quarantines within this span of its first notice go out as one more message.
pub(crate) const BATCH_WINDOW: Duration = Duration::hours(1);
/// The jobs a message lists by key; the rest are counted, with the command that lists them.
pub(crate) const LISTED: usize = 20;

/// Why owners are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// Not done by its deadline.
    Late,
    /// Waits in `quarantined` for an operator.
    Quarantined,
    /// A recipient of the report is suppressed (a bounce, a complaint, an unsubscribe): told
    /// once per suppression, at the first delivery it stops.
    Suppressed,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Late => "late",
            Cause::Quarantined => "quarantined",
            Cause::Suppressed => "suppressed",
        }
    }

    pub fn parse(s: &str) -> Option<Cause> {
        [Cause::Late, Cause::Quarantined, Cause::Suppressed]
            .into_iter()
            .find(|c| c.as_str() == s)
    }

    /// The idempotent key of job `job`'s notice for this cause: one per job and cause.
    pub fn key(self, job: &JobKey) -> String {
        format!("{job}/{}", self.as_str())
    }
}

/// The instant fire `fire` of `report` is due by: `deliver_by` on the local date it fires,
/// or on the next date when the fire is at or after that time (a time a DST gap swallows is
/// the gap's end). `None` without `deliver_by`.
pub fn deadline(report: &Report, fire: &Fire) -> Option<DateTime<Utc>> {
    let at = report.owners.deliver_by?;
    let tz = report.timezone();
    let day = fire.fire_at.with_timezone(&tz).date_naive();
    let same_day = resolve_local(day.and_time(at), tz)?;
    if same_day > fire.fire_at {
        return Some(same_day);
    }
    resolve_local(day.succ_opt()?.and_time(at), tz)
}

/// How the detail of a late fire that never became a job begins: `judge` writes it, and a
/// message about such a fire says how to make the job (`how_to_see`).
const NO_JOB: &str = "no job";

/// A fire whose deadline has passed: its job should be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub key: JobKey,
    pub fire_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
}

/// The fires of `reports` (those with `deliver_by`) whose deadline passed in
/// `(now - LOOKBACK, now]`, calendars applied (a skipped fire is not expected; a moved one is
/// due on the day it fires).
pub fn expected<'a>(
    reports: impl IntoIterator<Item = &'a Arc<Report>>,
    now: DateTime<Utc>,
) -> Vec<Expected> {
    let since = crate::domain::clock::sub(now, LOOKBACK);
    // A deadline is at most a day and an hour after its fire.
    let first_fire = crate::domain::clock::sub(since, Duration::hours(26));
    let with_deadline = reports
        .into_iter()
        .filter(|r| r.owners.deliver_by.is_some());
    let mut out = Vec::new();
    for report in with_deadline {
        for fire in crate::report::schedule::plan([report], first_fire, now) {
            match deadline(report, &fire) {
                Some(d) if d > since && d <= now => out.push(Expected {
                    key: fire.key,
                    fire_at: fire.fire_at,
                    deadline: d,
                }),
                _ => {}
            }
        }
    }
    out
}

/// What the ledger says of an expected fire's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing<'a> {
    /// Its state's name (`rendering`, `done`, …).
    pub state: &'a str,
    pub terminal_at: Option<DateTime<Utc>>,
    pub last_error: Option<&'a str>,
}

/// An expected fire judged late.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lateness {
    /// What is missing, for a person.
    pub detail: String,
    /// Still not delivered now (false: delivered, after its deadline).
    pub missing: bool,
}

/// Whether expected fire `e` is late, given its job's standing (`None`: no job).
pub fn judge(e: &Expected, job: Option<Standing<'_>>, tz: chrono_tz::Tz) -> Option<Lateness> {
    let local = |t: DateTime<Utc>| t.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z").to_string();
    let Some(job) = job else {
        return Some(Lateness {
            detail: format!(
                "{NO_JOB}: its fire at {} never became one (the daemon was down past schedule.catch_up, or its scheduler stalled)",
                local(e.fire_at)
            ),
            missing: true,
        });
    };
    let finished = matches!(job.state, "done" | "skipped" | "cancelled");
    match (finished, job.terminal_at) {
        (true, Some(at)) if at <= e.deadline => None,
        (true, Some(at)) => Some(Lateness {
            detail: format!("{} at {}, after its deadline", job.state, local(at)),
            missing: false,
        }),
        (true, None) => None,
        (false, _) => {
            let why = job.last_error.map(|w| format!(": {w}")).unwrap_or_default();
            Some(Lateness {
                detail: format!("its job is {}{why}", job.state),
                missing: true,
            })
        }
    }
}

/// A report that is late now: the job of an expected fire not delivered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateReport {
    pub key: JobKey,
    pub deadline: DateTime<Utc>,
    pub detail: String,
}

/// The reports late at the notifier's last round, shared with `/metrics` and the console.
#[derive(Debug, Clone, Default)]
pub struct LateBoard(Arc<RwLock<Vec<LateReport>>>);

impl LateBoard {
    pub fn set(&self, late: Vec<LateReport>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = late;
    }

    /// Oldest deadline first.
    pub fn get(&self) -> Vec<LateReport> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Which message a report's waiting quarantine notices go in, given the report's newest
/// quarantine message (its window's start, and whether it was the window's first or second)
/// and when the earliest of them was noticed: a new window's first, at once; in an open window,
/// nothing until it ends; then the window's second, for the notices of that hour (notices that
/// all came after the window ended open a new one instead). `None`: wait.
pub(crate) fn next_batch(
    newest: Option<(DateTime<Utc>, i64)>,
    earliest: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, i64)> {
    match newest {
        Some((start, _)) if now < crate::domain::clock::add(start, BATCH_WINDOW) => None,
        Some((start, 1)) if earliest < crate::domain::clock::add(start, BATCH_WINDOW) => {
            Some((start, 2))
        }
        _ => Some((now, 1)),
    }
}

/// The key of a report's quarantine message `seq` of the window starting at `start`.
pub(crate) fn quarantine_message_key(report: &str, start: DateTime<Utc>, seq: i64) -> String {
    format!("{report}/quarantined/{}/{seq}", start.timestamp_millis())
}

/// One job a message tells of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub job: JobKey,
    pub detail: String,
}

/// A message's words, fixed when it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Composed {
    pub subject: String,
    pub body: String,
    /// The owner webhook's JSON body ([`NoticeBody`]).
    pub webhook_body: String,
}

/// The owner webhook's body, version 1 (a public contract: `docs/contracts/owner-notice-v1.json`).
#[derive(Debug, Serialize)]
pub(crate) struct NoticeBody<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub version: u32,
    /// The message's key: the same for every retry and every owner.
    pub message: &'a str,
    /// `late` or `quarantined`.
    pub cause: &'static str,
    pub report: &'a str,
    pub title: &'a str,
    /// `deliver_by` (`HH:MM`, the report's local time), when set.
    pub deliver_by: Option<String>,
    pub timezone: String,
    pub jobs: Vec<NoticeJob<'a>>,
    /// Jobs told of but not listed.
    pub more: usize,
    pub summary: &'a str,
    /// The command that shows why.
    pub show: String,
    /// The console page that shows why, when `[server] public_url` is set.
    pub console: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct NoticeJob<'a> {
    pub job: String,
    pub date: String,
    pub detail: &'a str,
}

/// The words of message `message` to `report`'s owners about `items` (at least one).
pub(crate) fn compose(
    report: &Report,
    cause: Cause,
    items: &[Item],
    message: &str,
    public_url: Option<&url::Url>,
) -> Composed {
    let first = &items[0].job;
    let listed = &items[..items.len().min(LISTED)];
    let by = (report.owners.deliver_by).map(|t| t.format("%H:%M").to_string());
    let due = by.as_deref().unwrap_or("its deadline");
    let subject = match (cause, items.len()) {
        (Cause::Late, _) => format!(
            "Late: {} — {} not delivered by {due}",
            report.title,
            IsoDate(first.date())
        ),
        (Cause::Quarantined, 1) => {
            format!("Quarantined: {} — {}", report.title, IsoDate(first.date()))
        }
        (Cause::Quarantined, n) => format!("Quarantined: {} — {n} jobs", report.title),
        (Cause::Suppressed, _) => format!(
            "Suppressed: {} — a recipient is no longer sent it",
            report.title
        ),
    };
    let (show, console) = how_to_see(report, cause, items, public_url);
    let mut body = body_text(report, cause, items, due);
    body.push_str(&format!("\nWhy: {show}\n"));
    if let Some(url) = &console {
        body.push_str(&format!("Console: {url}\n"));
    }
    let webhook = NoticeBody {
        kind: "dawnpost.owner_notice",
        version: 1,
        message,
        cause: cause.as_str(),
        report: report.id.as_str(),
        title: &report.title,
        deliver_by: by.clone(),
        timezone: report.timezone().name().to_string(),
        jobs: (listed.iter())
            .map(|i| NoticeJob {
                job: i.job.to_string(),
                date: IsoDate(i.job.date()).to_string(),
                detail: &i.detail,
            })
            .collect(),
        more: items.len() - listed.len(),
        summary: &subject,
        show,
        console,
    };
    Composed {
        webhook_body: serde_json::to_string(&webhook).unwrap_or_default(),
        subject,
        body,
    }
}

/// What a message says before how to see why: the late job and what is missing, or the
/// quarantined jobs (the first [`LISTED`], then the count and the command that lists them).
fn body_text(report: &Report, cause: Cause, items: &[Item], due: &str) -> String {
    let tz = report.timezone();
    if cause == Cause::Suppressed {
        return format!(
            "{} ({}) is no longer sent to a recipient, since {}:\n\n{}\n\n`dawnpost suppressions` lists who and why; `dawnpost unsuppress ADDRESS --by NAME --reason TEXT` lifts it.\n",
            report.title,
            report.id,
            IsoDate(items[0].job.date()),
            items[0].detail
        );
    }
    if cause == Cause::Late {
        return format!(
            "{} ({}) for {} was due by {due} {tz} and is late.\n\nWhat is missing: {}\n",
            report.title,
            report.id,
            IsoDate(items[0].job.date()),
            items[0].detail
        );
    }
    let mut body = format!(
        "{} job(s) of {} ({}) are quarantined: nothing more is sent for them until an operator redrives them.\n\n",
        items.len(),
        report.title,
        report.id
    );
    for item in items.iter().take(LISTED) {
        body.push_str(&format!("- {}: {}\n", item.job, item.detail));
    }
    if items.len() > LISTED {
        let list = format!("dawnpost jobs --report {} --state quarantined", report.id);
        body.push_str(&format!("- and {} more: {list}\n", items.len() - LISTED));
    }
    body
}

/// The command (and console page) that shows why: the job itself for one job, the report's
/// quarantined jobs for several. A late fire with no job is shown by `plan` and sent now by
/// `enqueue`.
fn how_to_see(
    report: &Report,
    cause: Cause,
    items: &[Item],
    public_url: Option<&url::Url>,
) -> (String, Option<String>) {
    let first = &items[0];
    let base = public_url.map(|u| u.as_str().trim_end_matches('/').to_string());
    if cause == Cause::Suppressed {
        return (
            "dawnpost suppressions".into(),
            base.map(|b| format!("{b}/ui/suppressions")),
        );
    }
    if items.len() > 1 {
        let show = format!(
            "dawnpost jobs --report {} --state {}",
            report.id,
            cause.as_str()
        );
        let page =
            base.map(|b| format!("{b}/ui/jobs?report={}&state={}", report.id, cause.as_str()));
        return (show, page);
    }
    let show = if first.detail.starts_with(NO_JOB) {
        format!(
            "dawnpost enqueue {} --date {} (it was never made; `dawnpost nodes` shows which nodes run)",
            report.id,
            IsoDate(first.job.date())
        )
    } else {
        format!("dawnpost show {}", first.job)
    };
    (show, base.map(|b| format!("{b}/ui/jobs/{}", first.job)))
}

/// When `late`'s fire was due, for a page: its deadline in the report's local time.
pub(crate) fn shown_deadline(late: &LateReport, tz: chrono_tz::Tz) -> String {
    format!(
        "{} ({})",
        late.deadline.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z"),
        rfc3339(late.deadline)
    )
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn t(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, h, m, 0)
            .single()
            .expect("instant")
    }

    #[test]
    fn a_reports_first_quarantine_goes_at_once_and_the_rest_of_its_hour_as_one_more() {
        // No window yet: a new one, at once.
        assert_eq!(next_batch(None, t(9, 0), t(9, 0)), Some((t(9, 0), 1)));
        // Inside the window opened at 09:00: wait.
        assert_eq!(next_batch(Some((t(9, 0), 1)), t(9, 10), t(9, 59)), None);
        // The window ended: its second (and last) message, for the notices of its hour.
        assert_eq!(
            next_batch(Some((t(9, 0), 1)), t(9, 10), t(10, 0)),
            Some((t(9, 0), 2))
        );
        // A quiet hour after the first message, then a quarantine: a new window, at once.
        assert_eq!(
            next_batch(Some((t(9, 0), 1)), t(11, 0), t(11, 0)),
            Some((t(11, 0), 1))
        );
        // After a window's second message, the next notice opens a new window.
        assert_eq!(
            next_batch(Some((t(9, 0), 2)), t(10, 1), t(10, 1)),
            Some((t(10, 1), 1))
        );
        // A window whose second went out is not reopened early.
        assert_eq!(next_batch(Some((t(9, 0), 2)), t(9, 20), t(9, 30)), None);
    }

    #[test]
    fn keys_are_one_per_job_and_cause() {
        let job: JobKey = "wh:2026-11-30".parse().expect("key");
        assert_eq!(Cause::Late.key(&job), "wh:2026-11-30/late");
        assert_eq!(Cause::Quarantined.key(&job), "wh:2026-11-30/quarantined");
        assert_eq!(Cause::parse("late"), Some(Cause::Late));
        assert_eq!(Cause::parse("gone"), None);
        assert_eq!(
            quarantine_message_key("wh", t(9, 0), 2),
            format!("wh/quarantined/{}/2", t(9, 0).timestamp_millis())
        );
    }
}
