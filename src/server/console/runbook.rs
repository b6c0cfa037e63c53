//! `/ui/runbooks/{id}`: a bulk redrive as a runbook — its dry run, then (started by an
//! operator) the canary and the batches the daemon's `runbooks` service takes, every step
//! audited, stoppable by hand.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::pages::{scroll_region, shell, state_badge, when};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::ledger::{Runbook, RunbookState, RunbookStep, Via};
use crate::services::runbook::{self, RunbookError};

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

async fn runbook_of(st: &ServerState, id: &str) -> Result<Runbook, ConsoleError> {
    let not_found = || {
        ConsoleError::Ledger(crate::ledger::LedgerError::NotFound {
            what: "runbook",
            key: id.to_string(),
        })
    };
    let id: i64 = id.parse().map_err(|_| not_found())?;
    st.ledger.runbooks().get(id).await?.ok_or_else(not_found)
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let rb = runbook_of(&st, &id).await?;
    let steps = st.ledger.runbooks().steps(rb.id).await?;
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
pub(crate) struct StepForm {
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
