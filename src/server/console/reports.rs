//! `/ui/reports`: each report's schedule, timezone, destinations (redacted), next fire in local
//! time and UTC, and its last 14 local days of jobs as a row of states. A page at a time, by
//! report id.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Days, NaiveDate, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::pages::{shell, when};
use super::session::Session;
use super::{ConsoleError, ServerState, page};
use crate::config::Report;
use crate::domain::redact::redact_destination;
use crate::ledger::{JobFilter, JobState};

/// Reports a page shows.
const PAGE: usize = 50;
/// Local days the state row covers.
const DAYS: u64 = 14;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReportsQuery {
    #[serde(default)]
    after: String,
}

/// One report's row.
pub(super) struct Row {
    pub(super) report: Arc<Report>,
    /// The next fire that makes a job, and how a reader names the window it reads.
    next: Option<(DateTime<Utc>, String)>,
    days: Vec<(NaiveDate, Option<JobState>)>,
}

pub(super) async fn list(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    query: Result<Query<ReportsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ConsoleError> {
    let after = query.map(|Query(q)| q.after).unwrap_or_default();
    let reports = st.reports.current();
    let mut ids: Vec<&String> = reports.by_id.keys().filter(|id| **id > after).collect();
    ids.sort();
    let more = ids.len() > PAGE;
    let now = st.clock.now();
    let mut rows = Vec::new();
    for id in ids.into_iter().take(PAGE) {
        let Some(report) = reports.by_id.get(id) else {
            continue;
        };
        rows.push(row(&st, report.clone(), now).await?);
    }
    let next = more
        .then(|| rows.last().map(|r| r.report.id.to_string()))
        .flatten();
    Ok(page(view(&session, &rows, next.as_deref(), reports.list.len())).into_response())
}

pub(super) async fn row(
    st: &ServerState,
    report: Arc<Report>,
    now: DateTime<Utc>,
) -> Result<Row, ConsoleError> {
    let today = now.with_timezone(&report.timezone()).date_naive();
    let first = today.checked_sub_days(Days::new(DAYS - 1)).unwrap_or(today);
    let jobs = st
        .ledger
        .jobs()
        .list(&JobFilter {
            report: Some(report.id.to_string()),
            from: Some(first),
            to: Some(today),
            limit: Some(DAYS as u32),
            ..JobFilter::default()
        })
        .await?;
    let by_date: HashMap<NaiveDate, JobState> =
        jobs.iter().map(|j| (j.key.date(), j.state)).collect();
    let days = first
        .iter_days()
        .take_while(|d| *d <= today)
        .map(|d| (d, by_date.get(&d).copied()))
        .collect();
    let next = crate::report::schedule::next_fires(&report, now, 8)
        .into_iter()
        .find(crate::report::schedule::Fire::fires)
        .map(|f| (f.fire_at, f.window.label(report.period, report.timezone())));
    Ok(Row { report, next, days })
}

fn view(session: &Session, rows: &[Row], next: Option<&str>, total: usize) -> Markup {
    shell(
        "Reports",
        Some(session),
        html! {
            h1 { "Reports" }
            p.hint { (total) " report(s). Each square is a local day, oldest first: its job's state." }
            @for r in rows { (report(r)) }
            nav.pages aria-label="Pages" {
                @if let Some(after) = next {
                    a rel="next" href={ "/ui/reports?after=" (after) } { "Next page" }
                }
            }
        },
    )
}

pub(super) fn report(r: &Row) -> Markup {
    let rep = &r.report;
    let tz = rep.timezone();
    html! {
        section.report aria-label={ "Report " (rep.id) } {
            h2 { a href={ "/ui/reports/" (rep.id) } { (rep.id) } " — " (rep.title) }
            p { a href={ "/ui/jobs?report=" (rep.id) } { "Its jobs" } }
            dl.facts {
                dt { "Schedule" } dd { code { (rep.schedule.expr()) } " in " (tz.name()) }
                dt { "Next fire" } dd {
                    @match &r.next {
                        Some((t, window)) => {
                            (t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z (UTC%:z)")) " = " (when(*t))
                            ", reading " (window)
                        }
                        None => { "none within a year" }
                    }
                }
                dt { "Destinations" } dd {
                    @for (kind, d) in crate::delivery::of_report(rep) { span.dest { (kind) " " (redact_destination(&d)) } " " }
                }
            }
            ol.days aria-label="Last 14 days" {
                @for (day, state) in &r.days {
                    @let s = state.map_or("none", |s| s.as_str());
                    li class={ "day " (s) } title={ (day) ": " (s) } {
                        @match state {
                            Some(_) => a href={ "/ui/jobs/" (rep.id) ":" (day) } { span.sr { (day) " " (s) } },
                            None => span.sr { (day) " no job" },
                        }
                    }
                }
            }
        }
    }
}
