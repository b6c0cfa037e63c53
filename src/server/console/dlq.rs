//! `/ui/dlq`: dead letters grouped by report, destination host and error class, each group
//! with a form that plans its bulk redrive as a runbook (shown by `runbook.rs`).

use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::pages::{scroll_region, shell, state_badge, when};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::domain::outcome::ResponseClass;
use crate::ledger::{JobFilter, JobState, Runbook, RunbookSpec, Via};
use crate::services::runbook::{self, Group};

pub(super) async fn groups(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
) -> Result<Response, ConsoleError> {
    let (groups, truncated) = runbook::groups(&st.ledger).await?;
    let jobs = st
        .ledger
        .jobs()
        .list(&JobFilter {
            state: Some(JobState::Quarantined),
            limit: Some(100),
            ..JobFilter::default()
        })
        .await?;
    // Jobs quarantined at render have no delivery to redrive in bulk: listed on their own.
    let at_render: Vec<_> = jobs.into_iter().filter(|j| j.artifact.is_none()).collect();
    let runbooks = st.ledger.runbooks().list(false, 20).await?;
    let body = html! {
        h1 { "Dead letters" }
        @if groups.is_empty() {
            p { "No quarantined delivery." }
        } @else {
            h2 { "Quarantined deliveries by group" }
            @if truncated {
                p.hint { "Grouped from the oldest " (runbook::SCAN_LIMIT) " quarantined deliveries." }
            }
            @for g in &groups { (group(&session, g)) }
        }
        h2 { "Jobs quarantined at render" }
        @if at_render.is_empty() {
            p { "None." }
        } @else {
            ul { @for j in &at_render {
                li { a href={ "/ui/jobs/" (j.key) } { (j.key) } " — " (j.last_error.as_deref().unwrap_or("")) }
            } }
        }
        h2 { "Bulk redrives" }
        (runbook_list(&runbooks))
    };
    Ok(page(shell("Dead letters", Some(&session), body)).into_response())
}

fn group(session: &Session, g: &Group) -> Markup {
    html! {
        section.group aria-label={ "Group " (g.report) " " (g.host) " " (g.class) } {
            h3 {
                (g.report) " · " (if g.host.is_empty() { "(no host)" } else { &g.host }) " · "
                (state_badge(&g.class)) " · " (g.count) " deliver" (if g.count == 1 { "y" } else { "ies" })
            }
            p.hint {
                @if let (Some(o), Some(n)) = (g.oldest, g.newest) { "quarantined " (when(o)) " … " (when(n)) }
            }
            @if session.role == Role::Operator {
                form.action method="post" action="/ui/dlq/plan" aria-label={ "Plan a bulk redrive of " (g.report) } {
                    input type="hidden" name="csrf" value=(session.csrf);
                    input type="hidden" name="report" value=(g.report);
                    input type="hidden" name="host" value=(g.host);
                    input type="hidden" name="class" value=(g.class);
                    label { "Canary " input name="canary" type="number" min="1" value="1"; }
                    label { "Batch " input name="batch" type="number" min="1" value="50"; }
                    label { "Quarantined since " input name="since" type="date"; }
                    label { "Your name " input name="by" required autocomplete="name"; }
                    label { "Reason " input name="reason" required size="28"; }
                    button type="submit" { "Dry run" }
                }
            }
        }
    }
}

fn runbook_list(runbooks: &[Runbook]) -> Markup {
    html! {
        @if runbooks.is_empty() {
            p { "None yet." }
        } @else {
            (scroll_region("Runbooks", html! { table {
                thead { tr {
                    th scope="col" { "#" } th scope="col" { "Group" } th scope="col" { "State" }
                    th scope="col" { "Planned" } th scope="col" { "Steps" } th scope="col" { "By" }
                    th scope="col" { "Outcome" }
                } }
                tbody { @for r in runbooks { tr {
                    td { a href={ "/ui/runbooks/" (r.id) } { "#" (r.id) } }
                    td { (r.spec.report) " · " (r.spec.host) " · " (r.spec.class.as_str()) }
                    td { (state_badge(r.state.as_str())) }
                    td.num { (r.planned) }
                    td.num { (r.step) }
                    td { (r.spec.by) }
                    td { (r.outcome.as_deref().unwrap_or("")) }
                } } }
            } }))
        }
    }
}

/// The bulk-redrive form of a group.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PlanForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    report: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    class: String,
    #[serde(default)]
    canary: String,
    #[serde(default)]
    batch: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    by: String,
    #[serde(default)]
    reason: String,
}

impl PlanForm {
    fn spec(&self) -> Result<RunbookSpec, ConsoleError> {
        let invalid = |s: String| ConsoleError::Invalid(s);
        let count = |field: &str, v: &str| -> Result<u32, ConsoleError> {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    invalid(format!(
                        "{field}: {v:?} is not a whole number of at least 1"
                    ))
                })
        };
        let class = ResponseClass::of_dead_letter(&self.class).ok_or_else(|| {
            invalid(format!(
                "class: {:?} is not a dead-letter class",
                self.class
            ))
        })?;
        let since = match self.since.trim() {
            "" => None,
            d => Some(
                crate::domain::keys::parse_date(d)
                    .and_then(|d| d.and_hms_opt(0, 0, 0))
                    .map(|t| t.and_utc())
                    .ok_or_else(|| invalid(format!("since: {d:?} is not a date (YYYY-MM-DD)")))?,
            ),
        };
        Ok(RunbookSpec {
            report: self.report.trim().to_string(),
            host: self.host.trim().to_string(),
            class,
            since,
            canary: count("canary", &self.canary)?,
            batch: count("batch", &self.batch)?,
            by: self.by.trim().to_string(),
            reason: self.reason.trim().to_string(),
            via: Via::Console,
        })
    }
}

impl CsrfForm for PlanForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub(super) async fn plan(
    State(st): State<ServerState>,
    OperatorForm(f): OperatorForm<PlanForm>,
) -> Result<Response, ConsoleError> {
    let spec = f.spec()?;
    let (rb, _) = runbook::plan(&st.ledger, &spec, st.clock.now()).await?;
    Ok(Redirect::to(&format!("/ui/runbooks/{}", rb.id)).into_response())
}
