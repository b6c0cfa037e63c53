//! `/ui/dlq`: dead letters grouped by report, destination host and error class, each group
//! with a bulk-redrive form; `/ui/runbooks/{id}`: a bulk redrive as a runbook — its dry run,
//! then (started by an operator) the canary and the batches the daemon's `runbooks` service
//! takes, every step audited, stoppable by hand.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::pages::{scroll_region, shell, state_badge, when};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::domain::outcome::ResponseClass;
use crate::ledger::{JobFilter, JobState, Runbook, RunbookSpec, RunbookState, RunbookStep, Via};
use crate::services::runbook::{self, Group, RunbookError};

impl From<RunbookError> for ConsoleError {
    fn from(e: RunbookError) -> ConsoleError {
        match e {
            RunbookError::Ledger(l) => ConsoleError::Ledger(l),
            RunbookError::NotFound(id) => {
                ConsoleError::Ledger(crate::ledger::LedgerError::NotFound {
                    what: "runbook",
                    key: id.to_string(),
                })
            }
            RunbookError::Invalid(why) => ConsoleError::Invalid(why),
        }
    }
}

pub(super) async fn groups(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
) -> Result<Response, ConsoleError> {
    let (groups, truncated) = runbook::groups(&st.ledger).await?;
    let jobs = st
        .ledger
        .job_list(&JobFilter {
            state: Some(JobState::Quarantined),
            limit: Some(100),
            ..JobFilter::default()
        })
        .await?;
    // Jobs quarantined at render have no delivery to redrive in bulk: listed on their own.
    let at_render: Vec<_> = jobs.into_iter().filter(|j| j.artifact.is_none()).collect();
    let runbooks = st.ledger.runbook_list(false, 20).await?;
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
pub struct PlanForm {
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

async fn runbook_of(st: &ServerState, id: &str) -> Result<Runbook, ConsoleError> {
    let not_found = || {
        ConsoleError::Ledger(crate::ledger::LedgerError::NotFound {
            what: "runbook",
            key: id.to_string(),
        })
    };
    let id: i64 = id.parse().map_err(|_| not_found())?;
    st.ledger.runbook_get(id).await?.ok_or_else(not_found)
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let rb = runbook_of(&st, &id).await?;
    let steps = st.ledger.runbook_steps(rb.id).await?;
    Ok(page(runbook_page(&session, &rb, &steps)).into_response())
}

fn runbook_page(session: &Session, rb: &Runbook, steps: &[RunbookStep]) -> Markup {
    let s = &rb.spec;
    let operator = session.role == Role::Operator;
    let title = format!("Bulk redrive #{}", rb.id);
    let body = html! {
        p { a href="/ui/dlq" { "← Dead letters" } }
        h1 { (title) " " (state_badge(rb.state.as_str())) }
        dl.facts {
            dt { "Group" } dd { (s.report) " · " (if s.host.is_empty() { "every host" } else { &s.host }) " · " (s.class.as_str()) }
            @if let Some(t) = s.since { dt { "Quarantined since" } dd { (when(t)) } }
            dt { "Dry run" } dd { (rb.planned) " deliver" (if rb.planned == 1 { "y" } else { "ies" }) }
            dt { "Canary, batch" } dd { (s.canary) ", " (s.batch) }
            dt { "By" } dd { (s.by) " (" (s.via) "): " (s.reason) }
            @if let Some(o) = &rb.outcome { dt { "Outcome" } dd { (o) } }
        }
        @if rb.state == RunbookState::Running {
            p.hint { "The daemon takes each step once the last one's deliveries are sent or back in quarantine; reload to follow." }
        }
        @if operator && rb.state == RunbookState::Planned && rb.planned > 0 {
            form.action method="post" action={ "/ui/runbooks/" (rb.id) "/start" } aria-label="Start" {
                input type="hidden" name="csrf" value=(session.csrf);
                label { "Your name " input name="by" required autocomplete="name"; }
                button type="submit" { "Start: redrive the canary" }
            }
        }
        @if operator && !rb.is_finished() {
            form.action method="post" action={ "/ui/runbooks/" (rb.id) "/stop" } aria-label="Stop" {
                input type="hidden" name="csrf" value=(session.csrf);
                label { "Your name " input name="by" required autocomplete="name"; }
                button.secondary type="submit" { "Stop" }
            }
        }
        h2 { "Steps" }
        (scroll_region("Steps", html! { table.steps {
            thead { tr {
                th scope="col" { "When" } th scope="col" { "Step" } th scope="col" { "Action" }
                th scope="col" { "Count" } th scope="col" { "By" } th scope="col" { "Detail" }
            } }
            tbody { @for st in steps { tr {
                td { (when(st.at())) } td.num { (st.step) } td { (st.action) }
                td.num { (st.count) } td { (st.by) } td { (st.detail) }
            } } }
        } }))
    };
    shell(&title, Some(session), body)
}

/// A start or stop: the CSRF token and who (audited).
#[derive(Debug, Default, Deserialize)]
pub struct StepForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    by: String,
}

impl CsrfForm for StepForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// The name a start or stop form gave (checked: it is audited).
fn step_by(f: &StepForm) -> Result<String, ConsoleError> {
    let by = f.by.trim();
    if by.is_empty() {
        return Err(ConsoleError::Invalid(
            "by is required: runbook steps are audited".into(),
        ));
    }
    Ok(format!("{by} ({})", Via::Console))
}

/// What an operator does to a runbook from its page.
#[derive(Debug, Clone, Copy)]
enum Step {
    Start,
    Stop,
}

/// Starts or stops runbook `id` as `form`'s operator, then shows it.
async fn step(
    st: &ServerState,
    id: &str,
    form: &StepForm,
    what: Step,
) -> Result<Response, ConsoleError> {
    let by = step_by(form)?;
    let rb = runbook_of(st, id).await?;
    let now = st.clock.now();
    match what {
        Step::Start => {
            runbook::start(&st.ledger, rb.id, &by, now).await?;
            // The driver looks seldom while none runs: it carries this one on from now.
            st.node.runbooks.wake();
        }
        Step::Stop => runbook::stop(&st.ledger, rb.id, &by, now)
            .await
            .map(|_| ())?,
    }
    Ok(Redirect::to(&format!("/ui/runbooks/{}", rb.id)).into_response())
}

pub(super) async fn start(
    State(st): State<ServerState>,
    Path(id): Path<String>,
    OperatorForm(form): OperatorForm<StepForm>,
) -> Result<Response, ConsoleError> {
    step(&st, &id, &form, Step::Start).await
}

pub(super) async fn stop(
    State(st): State<ServerState>,
    Path(id): Path<String>,
    OperatorForm(form): OperatorForm<StepForm>,
) -> Result<Response, ConsoleError> {
    step(&st, &id, &form, Step::Stop).await
}
