//! `/ui/reports/{id}`: one report — its schedule, next fire and last days — today's job, and
//! the operator's actions on it: "Run now" (the job of the report's current local date, ready at
//! once; a finished one is offered for a reissue, with a reason) and "Send a test" (the report
//! for a date, emailed to one address typed here, its subject led by `[test]`). Both audited.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::job_view::action_form;
use super::pages::{scroll_region, shell, state_badge, when_in};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::domain::clock::to_millis;
use crate::domain::keys::JobKey;
use crate::domain::redact::redact_address;
use crate::ledger::{Audit, Job, JobOrigin, LedgerError, NewJob, TestSend, Via};
use crate::report::schedule::Fire;
use crate::views::test_send::TestSendRequest;

/// Test sends the page lists.
const TESTS_SHOWN: u32 = 10;

/// `?tested=MS`: the page after a test send made at that instant (Unix milliseconds), which it
/// tells of.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReportQuery {
    tested: Option<i64>,
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    Path(id): Path<String>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ConsoleError> {
    let tested = query.ok().and_then(|Query(q)| q.tested);
    Ok(page(view(&st, &session, &id, tested).await?).into_response())
}

/// The report `id`'s page, telling what the test send made at `tested` (Unix ms) came to.
async fn view(
    st: &ServerState,
    session: &Session,
    id: &str,
    tested: Option<i64>,
) -> Result<Markup, ConsoleError> {
    let report = st.reports.get(id).ok_or_else(|| not_found(id))?;
    let now = st.clock.now();
    let row = super::reports::row(st, report.clone(), now).await?;
    let today = now.with_timezone(&report.timezone()).date_naive();
    let key = JobKey::new(report.id.clone(), today);
    let job = st.ledger.jobs().get(&key).await?;
    let tests = st.ledger.recipients().test_sends(id, TESTS_SHOWN).await?;
    let operator = session.role == Role::Operator;
    let tz = Some(report.timezone());
    let sent = tested.and_then(|ms| tests.iter().find(|t| to_millis(t.at) == ms));
    Ok(shell(
        &format!("Report {id}"),
        Some(session),
        html! {
            h1 { "Report " (id) }
            (super::reports::report(&row))
            h2 { "Today's job" }
            @match &job {
                Some(j) => p { a href={ "/ui/jobs/" (j.key) } { (j.key) } " " (state_badge(j.state.as_str())) },
                None => p { (key) ": not fired yet." },
            }
            @if operator { (run_now(session, id, &key, job.as_ref())) }
            h2 { "Send a test" }
            @if let Some(t) = sent {
                p.notice role="status" {
                    @if t.outcome == "accepted" { "Sent a test for " } @else { "Could not send a test for " }
                    (t.date) " to " (redact_address(&t.address)) ": " (t.detail)
                }
            }
            @if operator { (test_form(session, id, st.test_sender.is_some())) }
            @if tests.is_empty() {
                p { "No test sent yet." }
            } @else {
                (test_sends(&tests, tz))
            }
        },
    ))
}

fn not_found(id: &str) -> ConsoleError {
    ConsoleError::Ledger(LedgerError::NotFound {
        what: "report",
        key: id.to_string(),
    })
}

/// "Run now" for today's job `key`: made if it is not there, offered for a reissue if it is
/// finished, pointed at while it runs.
fn run_now(session: &Session, id: &str, key: &JobKey, job: Option<&Job>) -> Markup {
    html! {
        @match job {
            None => {
                form.action method="post" action={ "/ui/reports/" (id) "/run" } aria-label="Run now" {
                    input type="hidden" name="csrf" value=(session.csrf);
                    label { "Your name " input name="by" required autocomplete="name"; }
                    button type="submit" { "Run now" }
                }
                p.hint { "Makes today's job (" (key) ") ready at once, as if it had fired." }
            }
            Some(j) if j.state.is_terminal() => {
                p { "Today's job is " (j.state.as_str()) ". Run it again as a correction:" }
                (action_form(session, &format!("/ui/jobs/{}/reissue", j.key), None, "Reissue as a correction"))
            }
            Some(j) => p { "Today's job is " (j.state.as_str()) ": it runs already." },
        }
    }
}

fn test_form(session: &Session, id: &str, available: bool) -> Markup {
    html! {
        @if available {
            form.action method="post" action={ "/ui/reports/" (id) "/test" } aria-label="Send a test" {
                input type="hidden" name="csrf" value=(session.csrf);
                label { "Your name " input name="by" required autocomplete="name"; }
                label { "Send to " input type="email" name="to" required autocomplete="email"; }
                label { "For the date " input type="date" name="date"; }
                button type="submit" { "Send a test" }
            }
            p.hint { "Renders the report for the date (today when left empty) and emails it to this one address, its subject led by [test]. No recipient list, suppression or send condition counts it." }
        } @else {
            p.error { "This node cannot send email (see its log): no test can be sent from here." }
        }
    }
}

fn test_sends(tests: &[TestSend], tz: Option<chrono_tz::Tz>) -> Markup {
    scroll_region(
        "Test sends",
        html! {
            table.audit {
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Date" } th scope="col" { "To" }
                    th scope="col" { "By" } th scope="col" { "Via" } th scope="col" { "Outcome" }
                } }
                tbody { @for t in tests { tr {
                    td { (when_in(tz, t.at)) }
                    td { (t.date) }
                    td { (redact_address(&t.address)) }
                    td { (t.by) }
                    td { (t.via) }
                    td { (t.outcome) }
                } } }
            }
        },
    )
}

/// A "Run now" or "Send a test" form.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReportForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    by: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    date: String,
}

impl CsrfForm for ReportForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

fn audit_of<'f>(f: &'f ReportForm, what: &'f str) -> Result<Audit<'f>, ConsoleError> {
    Audit::new(&f.by, what, Via::Console)
        .map_err(|_| ConsoleError::Invalid("Your name: required, the action is audited".into()))
}

/// `POST /ui/reports/{id}/run`: today's job, ready at once; its page follows.
pub(super) async fn run(
    State(st): State<ServerState>,
    Path(id): Path<String>,
    OperatorForm(f): OperatorForm<ReportForm>,
) -> Result<Response, ConsoleError> {
    let report = st.reports.get(&id).ok_or_else(|| not_found(&id))?;
    let audit = audit_of(&f, "run now")?;
    let now = st.clock.now();
    let today = now.with_timezone(&report.timezone()).date_naive();
    let fire = Fire::for_date(&report, today).ok_or_else(|| {
        ConsoleError::Invalid(format!("{today} has no window in the report's timezone"))
    })?;
    let job = NewJob::of(&fire, now, JobOrigin::Enqueue);
    let (inserted, _) = st.ledger.jobs().run_now(job, &audit, now).await?;
    tracing::info!(job = %fire.key, by = audit.by(), inserted, "console run now");
    Ok(Redirect::to(&format!("/ui/jobs/{}", fire.key)).into_response())
}

/// `POST /ui/reports/{id}/test`: the report for a date, emailed to one address; the report's
/// page follows, saying what came of it.
pub(super) async fn test(
    State(st): State<ServerState>,
    Path(id): Path<String>,
    OperatorForm(f): OperatorForm<ReportForm>,
) -> Result<Response, ConsoleError> {
    let report = st.reports.get(&id).ok_or_else(|| not_found(&id))?;
    let audit = audit_of(&f, "a test send")?;
    let date = match f.date.trim() {
        "" => None,
        d => Some(crate::domain::keys::parse_date(d).ok_or_else(|| {
            ConsoleError::Invalid(format!("For the date: {d:?} is not a date (YYYY-MM-DD)"))
        })?),
    };
    let sender = (st.test_sender.as_ref())
        .ok_or_else(|| ConsoleError::Invalid("this node cannot send email".into()))?;
    let req = TestSendRequest {
        report: &id,
        to: &f.to,
        date,
    };
    let catalog = st.reports.current();
    let templates = catalog.templates.get(&report.template).map(|t| &**t);
    let now = st.clock.now();
    let sent = sender
        .send((&report, templates), &st.ledger, &req, &audit, now)
        .await
        .map_err(|e| match e {
            crate::views::test_send::TestSendError::Ledger(e) => ConsoleError::Ledger(e),
            e => ConsoleError::Invalid(e.to_string()),
        })?;
    tracing::info!(report = %id, by = audit.by(), to = %sent.to, "console test send");
    let back = format!("/ui/reports/{id}?tested={}", to_millis(now));
    Ok(Redirect::to(&back).into_response())
}
