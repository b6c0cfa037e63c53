//! `/ui/jobs`: jobs by filter, a page at a time (keyset: "next" starts after the last key
//! shown, so no page counts or skips the rows before it).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use maud::{Markup, html};
use serde::Deserialize;

use super::pages::{scroll_region, shell, state_badge, when_in};
use super::session::Session;
use super::{ConsoleError, ServerState, page};
use crate::domain::keys::JobKey;
use crate::domain::outcome::ResponseClass;
use crate::ledger::{Job, JobFilter, JobState};

/// Jobs a page shows.
pub(crate) const PAGE_SIZE: u32 = 50;

/// The filter as the form sends it: every field optional, an empty field unset.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct JobsQuery {
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub report: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub class: String,
    #[serde(default)]
    pub after: String,
}

impl JobsQuery {
    /// The ledger filter, or what is wrong with the form (field: problem).
    fn filter(&self) -> Result<JobFilter, String> {
        let set = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_string);
        let date = |field: &str, s: &str| -> Result<Option<NaiveDate>, String> {
            set(s)
                .map(|d| {
                    crate::domain::keys::parse_date(&d)
                        .ok_or_else(|| format!("{field}: {d:?} is not a date (YYYY-MM-DD)"))
                })
                .transpose()
        };
        let state = set(&self.state)
            .map(|s| JobState::parse(&s).map_err(|_| format!("state: {s:?} is not a job state")))
            .transpose()?;
        let class = set(&self.class)
            .map(|c| {
                ResponseClass::ALL
                    .into_iter()
                    .find(|k| k.as_str() == c)
                    .ok_or_else(|| format!("class: {c:?} is not a response class"))
            })
            .transpose()?;
        let after = set(&self.after)
            .map(|k| {
                k.parse::<JobKey>()
                    .map_err(|_| format!("after: {k:?} is not a job key"))
            })
            .transpose()?;
        Ok(JobFilter {
            state,
            report: set(&self.report),
            from: date("from", &self.from)?,
            to: date("to", &self.to)?,
            class,
            after,
            limit: Some(PAGE_SIZE + 1),
        })
    }

    /// This query's link with `after` set to `key`.
    fn next_link(&self, key: &JobKey) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("state", &self.state),
            ("report", &self.report),
            ("from", &self.from),
            ("to", &self.to),
            ("class", &self.class),
        ] {
            if !value.trim().is_empty() {
                q.append_pair(name, value.trim());
            }
        }
        q.append_pair("after", &key.to_string());
        format!("/ui/jobs?{}", q.finish())
    }
}

pub(super) async fn list(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ConsoleError> {
    let q = query.map(|Query(q)| q).unwrap_or_default();
    let (jobs, problem) = match q.filter() {
        Ok(filter) => (st.ledger.jobs().list(&filter).await?, None),
        Err(problem) => (Vec::new(), Some(problem)),
    };
    let status = if problem.is_some() {
        axum::http::StatusCode::BAD_REQUEST
    } else {
        axum::http::StatusCode::OK
    };
    let zones = |j: &Job| {
        st.reports
            .get(j.key.report().as_str())
            .map(|r| r.timezone())
    };
    let view = view(&session, &q, &jobs, problem.as_deref(), &zones);
    Ok((status, page(view)).into_response())
}

/// The list; each job's time in its report's zone (`zone`), UTC beside it.
fn view(
    session: &Session,
    q: &JobsQuery,
    jobs: &[Job],
    problem: Option<&str>,
    zone: &dyn Fn(&Job) -> Option<chrono_tz::Tz>,
) -> Markup {
    let more = jobs.len() > PAGE_SIZE as usize;
    let shown = &jobs[..jobs.len().min(PAGE_SIZE as usize)];
    shell(
        "Jobs",
        Some(session),
        html! {
            h1 { "Jobs" }
            (filters(q))
            @if let Some(p) = problem {
                p.error role="alert" { (p) }
            }
            @if shown.is_empty() {
                p { "No job matches." }
            } @else {
                (scroll_region("Jobs", html! {
                    table.jobs {
                        thead { tr {
                            th scope="col" { "Job" } th scope="col" { "State" }
                            th scope="col" { "Renders" } th scope="col" { "Redrives" }
                            th scope="col" { "Updated" } th scope="col" { "Last error" }
                        } }
                        tbody {
                            @for j in shown {
                                tr {
                                    td { a href={ "/ui/jobs/" (j.key) } { (j.key) } }
                                    td { (state_badge(j.state.as_str())) }
                                    td.num { (j.attempts) }
                                    td.num { (j.redrive_count) }
                                    td { (when_in(zone(j), j.updated_at)) }
                                    td { (j.last_error.as_deref().unwrap_or("")) }
                                }
                            }
                        }
                    }
                }))
            }
            nav.pages aria-label="Pages" {
                @if !q.after.trim().is_empty() {
                    a href="/ui/jobs" { "First page" }
                }
                @if let (true, Some(last)) = (more, shown.last()) {
                    a rel="next" href=(q.next_link(&last.key)) { "Next page" }
                }
            }
        },
    )
}

fn filters(q: &JobsQuery) -> Markup {
    html! {
        form.filters method="get" action="/ui/jobs" aria-label="Filter jobs" {
            label { "State "
                select name="state" {
                    option value="" { "any" }
                    @for s in JobState::ALL {
                        option value=(s.as_str()) selected[q.state == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            label { "Report " input name="report" value=(q.report) size="16"; }
            label { "From " input type="date" name="from" value=(q.from); }
            label { "To " input type="date" name="to" value=(q.to); }
            label { "Error class "
                select name="class" {
                    option value="" { "any" }
                    @for c in ResponseClass::ALL {
                        option value=(c.as_str()) selected[q.class == c.as_str()] { (c.as_str()) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}
