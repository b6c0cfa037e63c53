//! `/ui/`: the reports late now (first), jobs and deliveries by state, the oldest ready job's wait, attempts by class over
//! the last hour and day (an SVG chart drawn here), this node's paused hosts, its last sweep
//! and the policy file's reload error, and the next fires of reports in local time and UTC.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};

use super::pages::{age, counts, scroll_region, shell, when};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::domain::outcome::ResponseClass;
use crate::ledger::{DeliveryState, JobState};
use crate::services::sweeper::SweepCounts;

/// Reports whose next fire the overview lists (the Reports page lists every one).
const NEXT_FIRES: usize = 20;
/// The chart's classes, bottom to top.
const CLASSES: [ResponseClass; 6] = ResponseClass::ALL;

/// What the overview shows.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    pub jobs: Vec<(JobState, i64)>,
    pub deliveries: Vec<(DeliveryState, i64)>,
    pub oldest_ready: Option<DateTime<Utc>>,
    /// Attempts per hour (its start) and class over the last 24 hours.
    pub attempts: Vec<(DateTime<Utc>, ResponseClass, i64)>,
    pub paused: Vec<(String, DateTime<Utc>)>,
    /// The live nodes on this ledger.
    pub nodes: Vec<crate::ledger::Node>,
    pub last_sweep: Option<(DateTime<Utc>, SweepCounts)>,
    pub reload_error: Option<(DateTime<Utc>, String)>,
    /// (report, timezone, next fire), soonest first.
    /// Each report's next fire, and what its calendar does to it (skipped or moved, and why).
    pub next_fires: Vec<(String, chrono_tz::Tz, DateTime<Utc>, Option<String>)>,
    pub reports: usize,
    /// The reports late now (their job not delivered by `deliver_by`), oldest deadline first,
    /// with each report's timezone.
    pub late: Vec<(crate::delivery::notice::LateReport, chrono_tz::Tz)>,
    pub now: DateTime<Utc>,
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
) -> Result<Response, ConsoleError> {
    let now = st.clock.now();
    let since = crate::domain::clock::sub(now, Duration::hours(24));
    let reports = st.reports.current();
    let mut ids: Vec<&String> = reports.by_id.keys().collect();
    ids.sort();
    let mut next_fires: Vec<(String, chrono_tz::Tz, DateTime<Utc>, Option<String>)> = ids
        .into_iter()
        .take(NEXT_FIRES)
        .filter_map(|id| reports.by_id.get(id))
        .filter_map(|r| {
            let next = crate::report::schedule::next_fires(r, now, 1)
                .into_iter()
                .next()?;
            let note = next.calendar.map(|c| match c.skipped {
                true => format!("skipped: not a business day ({})", c.reason),
                false => format!("moved to the next business day ({})", c.reason),
            });
            Some((r.id.to_string(), r.timezone(), next.fire_at, note))
        })
        .collect();
    next_fires.sort_by_key(|(id, _, at, _)| (*at, id.clone()));
    let o = Overview {
        jobs: st.ledger.jobs().count_by_state().await?,
        deliveries: st.ledger.deliveries().count_by_state().await?,
        oldest_ready: st.ledger.jobs().oldest_ready(now).await?,
        attempts: st.ledger.deliveries().attempts_by_hour(since).await?,
        paused: st.node.pool.paused(now),
        nodes: st
            .ledger
            .nodes()
            .list(crate::domain::clock::sub(now, st.node.live_for))
            .await?,
        last_sweep: st.node.sweeper.history().into_iter().next(),
        reload_error: st.node.sweeper.reload_error(),
        next_fires,
        reports: reports.list.len(),
        late: (st.node.late.get().into_iter())
            .map(|l| {
                let tz = (reports.by_id.get(l.key.report().as_str()))
                    .map_or(chrono_tz::Tz::UTC, |r| r.timezone());
                (l, tz)
            })
            .collect(),
        now,
    };
    Ok(page(view(&session, &o)).into_response())
}

pub fn view(session: &Session, o: &Overview) -> Markup {
    let oldest = o.oldest_ready.map(|at| age(at, o.now));
    let hour_ago = crate::domain::clock::sub(o.now, Duration::hours(1));
    shell(
        "Overview",
        Some(session),
        html! {
            h1 { "Overview" }
            (late_reports(&o.late))
            @if let Some((at, problems)) = &o.reload_error {
                p.error role="alert" {
                    "The retention policy file did not validate at " (when(*at)) " (the previous policy stays in force): "
                    (problems) " — " a href="/ui/retention" { "Retention" }
                }
            }
            section.cards aria-label="Queue" {
                div.card { h2 { "Jobs" } (counts(o.jobs.iter().map(|(s, n)| (s.as_str(), *n)))) }
                div.card { h2 { "Deliveries" } (counts(o.deliveries.iter().map(|(s, n)| (s.as_str(), *n)))) }
                div.card {
                    h2 { "Oldest ready job" }
                    p.big { @match &oldest { Some(age) => { "waiting " (age) } None => { "none waiting" } } }
                }
            }
            section.cards aria-label="Attempts" {
                div.card {
                    h2 { "Attempts, last hour" }
                    (counts(by_class(o.attempts.iter().filter(|(h, _, _)| *h >= hour_start(hour_ago)))))
                }
                div.card {
                    h2 { "Attempts, last 24 hours" }
                    (counts(by_class(o.attempts.iter())))
                }
            }
            h2 { "Attempts per hour by class" }
            (chart(&o.attempts, o.now))
            (this_node(o))
            (nodes(o))
            (next_fires(o))
            @if session.role == Role::Viewer {
                p.hint { "Signed in as viewer: actions are not shown." }
            }
        },
    )
}

/// This process's own state: the hosts its pool paused and its last retention sweep.
fn this_node(o: &Overview) -> Markup {
    html! {
        section.cards aria-label="This node" {
            div.card {
                h2 { "Paused hosts" }
                @if o.paused.is_empty() { p { "none" } }
                ul { @for (host, until) in &o.paused {
                    li { (host) " until " (when(*until)) " (" (age(o.now, *until)) " left)" }
                } }
            }
            div.card {
                h2 { "Last sweep" }
                @match &o.last_sweep {
                    None => { p { "none since this process started" } }
                    Some((at, c)) => {
                        p { (when(*at)) }
                        p.hint { (c.artifacts_deleted) " artifact(s), " (c.artifact_bytes) " bytes; "
                            (c.diagnostics_cleared) " diagnostics; " (c.jobs_deleted) " job(s) deleted" }
                    }
                }
            }
        }
    }
}

/// The live nodes, and which leads the housekeeping.
fn nodes(o: &Overview) -> Markup {
    html! {
        h2 { "Nodes" }
        @if o.nodes.is_empty() { p { "No node has reported within its heartbeat interval." } }
        @else {
            (scroll_region("Nodes", html! { table {
                thead { tr {
                    th scope="col" { "Node" } th scope="col" { "Version" }
                    th scope="col" { "Schema" } th scope="col" { "Formats" }
                    th scope="col" { "Started" } th scope="col" { "Last heartbeat" }
                    th scope="col" { "Housekeeping" }
                } }
                tbody { @for n in &o.nodes { tr {
                    td { (n.id) } td { (n.version) } td.num { (n.schema_version) }
                    td { (n.formats) } td { (when(n.started_at)) }
                    td { (age(n.heartbeat_at, o.now)) " ago" }
                    td { @if crate::ledger::leader(&o.nodes).is_some_and(|l| l.id == n.id) { "leads" } @else { "follows" } }
                } } }
            } }))
        }
    }
}

/// The next fire of the first reports by id, in their local time and in UTC.
fn next_fires(o: &Overview) -> Markup {
    html! {
        h2 { "Next fires" }
        @if o.next_fires.is_empty() { p { "No report fires within a year." } }
        (scroll_region("Next fires", html! { table {
            thead { tr { th scope="col" { "Report" } th scope="col" { "Local time" } th scope="col" { "UTC" } th scope="col" { "Calendar" } } }
            tbody { @for (id, tz, at, note) in &o.next_fires { tr {
                td { a href={ "/ui/jobs?report=" (id) } { (id) } }
                td { (at.with_timezone(tz).format("%a %Y-%m-%d %H:%M %Z (UTC%:z)")) }
                td { (when(*at)) }
                td { (note.as_deref().unwrap_or("")) }
            } } }
        } }))
        @if o.reports > NEXT_FIRES {
            p.hint { "The first " (NEXT_FIRES) " of " (o.reports) " reports by id; " a href="/ui/reports" { "every report" } "." }
        }
    }
}

/// The reports late now, first on the page: what an operator answers for before anything else.
fn late_reports(late: &[(crate::delivery::notice::LateReport, chrono_tz::Tz)]) -> Markup {
    if late.is_empty() {
        return html! {};
    }
    html! {
        section aria-labelledby="late-reports" {
            h2 id="late-reports" { "Late reports (" (late.len()) ")" }
            (scroll_region("Late reports", html! { table {
                thead { tr {
                    th scope="col" { "Report" } th scope="col" { "Job" }
                    th scope="col" { "Due by" } th scope="col" { "What is missing" }
                } }
                tbody { @for (l, tz) in late { tr {
                    td { a href={ "/ui/jobs?report=" (l.key.report()) } { (l.key.report()) } }
                    td { a href={ "/ui/jobs/" (l.key) } { (l.key) } }
                    td { (crate::delivery::notice::shown_deadline(l, *tz)) }
                    td { (l.detail) }
                } } }
            } }))
        }
    }
}

fn hour_start(t: DateTime<Utc>) -> DateTime<Utc> {
    let ms = crate::domain::clock::to_millis(t);
    crate::domain::clock::from_millis(ms - ms.rem_euclid(3_600_000))
}

/// Totals per class, in the chart's order, of the classes that have any.
fn by_class<'a>(
    rows: impl Iterator<Item = &'a (DateTime<Utc>, ResponseClass, i64)>,
) -> impl Iterator<Item = (&'static str, i64)> {
    let mut totals: BTreeMap<usize, i64> = BTreeMap::new();
    for (_, class, n) in rows {
        let i = CLASSES
            .iter()
            .position(|c| c == class)
            .unwrap_or(CLASSES.len() - 1);
        *totals.entry(i).or_default() += n;
    }
    totals.into_iter().map(|(i, n)| (CLASSES[i].as_str(), n))
}

/// 24 hourly bars, each stacked by class, scaled to the busiest hour; every bar has a title.
fn chart(rows: &[(DateTime<Utc>, ResponseClass, i64)], now: DateTime<Utc>) -> Markup {
    const W: i64 = 24 * 25;
    const H: i64 = 120;
    let first = hour_start(crate::domain::clock::sub(now, Duration::hours(23)));
    let mut hours = vec![[0_i64; CLASSES.len()]; 24];
    for (at, class, n) in rows {
        let slot = at.signed_duration_since(first).num_hours();
        let c = CLASSES
            .iter()
            .position(|k| k == class)
            .unwrap_or(CLASSES.len() - 1);
        if let Some(h) = usize::try_from(slot).ok().and_then(|s| hours.get_mut(s)) {
            h[c] += n;
        }
    }
    let peak = hours
        .iter()
        .map(|h| h.iter().sum::<i64>())
        .max()
        .unwrap_or(0)
        .max(1);
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (W) " " (H + 16) } role="img"
                aria-label="Attempts per hour over the last 24 hours, stacked by class" {
                @for (i, h) in hours.iter().enumerate() {
                    @let hour = first + Duration::hours(i as i64);
                    @let total: i64 = h.iter().sum();
                    g {
                        title { (hour.format("%H:00 UTC")) ": " (total) " attempt(s)"
                            @for (c, n) in CLASSES.iter().zip(h.iter()) { @if *n > 0 { ", " (c.as_str()) " " (n) } } }
                        @for (y, height, class) in stack(h, peak, H) {
                            rect class={ "c-" (class) } x=(i as i64 * 25 + 2) y=(y) width="21" height=(height) {}
                        }
                        @if i % 6 == 0 {
                            text x=(i as i64 * 25 + 2) y=(H + 13) { (hour.format("%H:00")) }
                        }
                    }
                }
            }
            figcaption.hint { "Peak " (peak) " attempts in an hour. Hover a bar for its counts." }
        }
    }
}

/// The rectangles (y, height, class) of one bar, bottom up, scaled so `peak` fills `h`.
fn stack(counts: &[i64; 6], peak: i64, h: i64) -> Vec<(i64, i64, &'static str)> {
    let mut y = h;
    let mut out = Vec::new();
    for (c, n) in CLASSES.iter().zip(counts.iter()) {
        if *n == 0 {
            continue;
        }
        let height = (n.saturating_mul(h) / peak).max(1);
        y -= height;
        out.push((y, height, c.as_str()));
    }
    out
}
