//! `/ui/suppressions`: the recipients no report is sent to (who, for which reports, since when
//! and why; `?all=true` the lifted ones too, with who lifted each), addresses masked; an
//! operator suppresses an address or lifts a suppression here, each audited in its row.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::access::{CsrfForm, OperatorForm};
use super::pages::{scroll_region, shell, when};
use super::session::{Role, Session};
use super::{ConsoleError, ServerState, page};
use crate::domain::redact::redact_address;
use crate::ledger::{Audit, Cause, NewSuppression, Suppression, Via, scope};

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    #[serde(default)]
    all: bool,
}

pub(super) async fn list(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ConsoleError> {
    let list = st.ledger.recipients().suppressions(q.all, 1000).await?;
    let operator = session.role == Role::Operator;
    let body = html! {
        h1 { "Suppressions" }
        p.hint {
            "Recipients no report is sent to: a hard bounce, a complaint, too many soft bounces, an unsubscribe or an operator put each here. "
            @if q.all { a href="/ui/suppressions" { "Only those in force" } }
            @else { a href="/ui/suppressions?all=true" { "With the lifted ones" } }
        }
        @if list.is_empty() {
            p { "No suppression." }
        } @else {
            (scroll_region("Suppressions", table(&session, &list, operator)))
        }
        @if operator { (suppress_form(&session)) }
    };
    Ok(page(shell("Suppressions", Some(&session), body)).into_response())
}

fn table(session: &Session, list: &[Suppression], operator: bool) -> Markup {
    html! {
        table {
            thead { tr {
                th scope="col" { "Recipient" } th scope="col" { "Reports" } th scope="col" { "Since" }
                th scope="col" { "Cause" } th scope="col" { "Why" } th scope="col" { "Lifted" }
            } }
            tbody { @for s in list { tr {
                td { (redact_address(&s.address)) }
                td { (scope(s.report.as_deref())) }
                td { (when(s.since)) }
                td { (s.cause.as_str()) }
                td { (s.why) @if let Some(by) = &s.by { " (by " (by) ")" } }
                td {
                    @if let Some(l) = &s.lifted {
                        (when(l.at)) " by " (l.by) ": " (l.reason)
                    } @else if operator {
                        (lift_form(session, s))
                    } @else { "in force" }
                }
            } } }
        }
    }
}

fn lift_form(session: &Session, s: &Suppression) -> Markup {
    html! {
        form.action method="post" action={ "/ui/suppressions/" (s.id) "/lift" } {
            input type="hidden" name="csrf" value=(session.csrf);
            label { "By " input name="by" required; }
            label { "Reason " input name="reason" required; }
            button type="submit" { "Lift" }
        }
    }
}

fn suppress_form(session: &Session) -> Markup {
    html! {
        h2 { "Suppress an address" }
        form.action method="post" action="/ui/suppressions" {
            input type="hidden" name="csrf" value=(session.csrf);
            label { "Address " input name="address" type="email" required; }
            label { "Report (empty: every report) " input name="report"; }
            label { "By " input name="by" required; }
            label { "Reason " input name="reason" required; }
            button type="submit" { "Suppress" }
        }
    }
}

/// An operator's form: who, why, and for a new suppression the address and report.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SuppressionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    by: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    report: String,
}

impl CsrfForm for SuppressionForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

fn audit_of(f: &SuppressionForm) -> Result<Audit<'_>, ConsoleError> {
    Audit::new(&f.by, &f.reason, Via::Console).map_err(|e| ConsoleError::Invalid(e.to_string()))
}

pub(super) async fn suppress(
    State(st): State<ServerState>,
    OperatorForm(f): OperatorForm<SuppressionForm>,
) -> Result<Response, ConsoleError> {
    let audit = audit_of(&f)?;
    let Some(address) = crate::domain::bounce::address(&f.address) else {
        return Err(ConsoleError::Invalid(
            "the address is not an email address".into(),
        ));
    };
    let report = Some(f.report.trim()).filter(|r| !r.is_empty());
    let s = NewSuppression {
        address: &address,
        report,
        cause: Cause::Operator,
        why: &f.reason,
        at: st.clock.now(),
    };
    st.ledger.recipients().suppress(s, Some(&audit)).await?;
    tracing::info!(recipient = %redact_address(&address), by = audit.by(), via = %audit.via(), "console suppress");
    Ok(Redirect::to("/ui/suppressions").into_response())
}

pub(super) async fn lift(
    State(st): State<ServerState>,
    Path(id): Path<i64>,
    OperatorForm(f): OperatorForm<SuppressionForm>,
) -> Result<Response, ConsoleError> {
    let audit = audit_of(&f)?;
    if !st
        .ledger
        .recipients()
        .lift(id, &audit, st.clock.now())
        .await?
    {
        return Err(ConsoleError::Invalid(format!(
            "suppression {id} is not in force"
        )));
    }
    tracing::info!(suppression = id, by = audit.by(), via = %audit.via(), "console lift");
    Ok(Redirect::to("/ui/suppressions").into_response())
}
