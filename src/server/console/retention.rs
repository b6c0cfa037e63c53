//! `/ui/retention`: the policy in force, the policy file's reload error (while it is invalid:
//! the previous policy stays in force), a dry run "as of" a chosen date with counts and bytes
//! per class, and this process's last sweeps.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::pages::{scroll_region, shell, when};
use super::session::Session;
use super::{ConsoleError, ServerState, page};
use crate::config::RetentionPolicy;
use crate::services::sweeper::{SweepCounts, SweepItem, SweepPlan};

/// Items of each class the dry run lists by name.
const LISTED: usize = 20;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct RetentionQuery {
    #[serde(default)]
    as_of: String,
}

pub(super) async fn show(
    State(st): State<ServerState>,
    axum::Extension(session): axum::Extension<Session>,
    query: Result<Query<RetentionQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ConsoleError> {
    let as_of = query.map(|Query(q)| q.as_of).unwrap_or_default();
    let sweeper = &st.node.sweeper;
    let plan = match as_of.trim() {
        "" => None,
        d => {
            let at = crate::domain::keys::parse_date(d)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
                .ok_or_else(|| {
                    ConsoleError::Invalid(format!("as_of: {d:?} is not a date (YYYY-MM-DD)"))
                })?;
            let plan = sweeper.plan(at).await.map_err(|e| match e {
                crate::services::sweeper::SweepError::Ledger(l) => ConsoleError::Ledger(l),
            })?;
            Some(plan)
        }
    };
    let v = View {
        policy: sweeper.policy(),
        file: sweeper.policy_file().display().to_string(),
        reload_error: sweeper.reload_error(),
        history: sweeper.history(),
        as_of: as_of.trim().to_string(),
        plan,
    };
    Ok(page(view(&session, &v)).into_response())
}

struct View {
    policy: RetentionPolicy,
    file: String,
    reload_error: Option<(DateTime<Utc>, String)>,
    history: Vec<(DateTime<Utc>, SweepCounts)>,
    as_of: String,
    plan: Option<SweepPlan>,
}

fn view(session: &Session, v: &View) -> Markup {
    let p = &v.policy;
    shell(
        "Retention",
        Some(session),
        html! {
            h1 { "Retention" }
            @if let Some((at, problems)) = &v.reload_error {
                div.error role="alert" {
                    p { "The policy file " code { (v.file) } " did not validate at " (when(*at))
                        ": the previous policy stays in force." }
                    pre { (problems) }
                }
            }
            h2 { "Policy in force" }
            p.hint { "From " code { (v.file) } ", re-read at every sweep; a sweep every " (p.sweep_every) "." }
            (scroll_region("Policy in force", html! { table {
                thead { tr {
                    th scope="col" { "Reports" } th scope="col" { "Artifact" }
                    th scope="col" { "Diagnostics" } th scope="col" { "Ledger rows" }
                } }
                tbody {
                    @for o in &p.overrides { tr {
                        td { code { (o.pattern) } }
                        td { (o.artifact.unwrap_or(p.defaults.artifact)) }
                        td { (o.diagnostics.unwrap_or(p.defaults.diagnostics)) }
                        td { (o.ledger.unwrap_or(p.defaults.ledger)) }
                    } }
                    tr {
                        td { "every other report" }
                        td { (p.defaults.artifact) } td { (p.defaults.diagnostics) } td { (p.defaults.ledger) }
                    }
                }
            } }))
            p.hint { "Ages count from the moment a job finished (done, quarantined or cancelled); live work is never deleted." }
            h2 { "Dry run" }
            form.filters method="get" action="/ui/retention" aria-label="Dry run" {
                label { "As of " input type="date" name="as_of" value=(v.as_of) required; }
                button type="submit" { "Show what would go" }
            }
            @if let Some(plan) = &v.plan { (dry_run(plan)) }
            h2 { "Last sweeps (this node)" }
            (sweeps(&v.history))
        },
    )
}

fn dry_run(plan: &SweepPlan) -> Markup {
    let c = &plan.counts;
    html! {
        p { "As of " (plan.as_of) ", deleting nothing:" }
        (scroll_region("Dry run counts", html! { table.counts {
            thead { tr { th scope="col" { "Class" } th scope="col" { "Jobs" } th scope="col" { "Rows" } th scope="col" { "Bytes" } } }
            tbody {
                tr { th scope="row" { "artifact" } td.num { (c.artifacts_deleted) } td.num { "" } td.num { (c.artifact_bytes) } }
                tr { th scope="row" { "diagnostics" } td.num { (c.diagnostics_cleared) } td.num { (c.diagnostics_rows) } td.num { (c.diagnostics_bytes) } }
                tr { th scope="row" { "ledger" } td.num { (c.jobs_deleted) } td.num { (c.ledger_rows) } td.num { "" } }
            }
        } }))
        @for (class, items) in [("artifact", &plan.artifact), ("diagnostics", &plan.diagnostics), ("ledger", &plan.ledger)] {
            @if !items.is_empty() { (listed(class, items)) }
        }
    }
}

fn listed(class: &str, items: &[SweepItem]) -> Markup {
    html! {
        details {
            summary { (class) ": " (items.len()) " job(s)" }
            ul { @for i in items.iter().take(LISTED) {
                li { a href={ "/ui/jobs/" (i.job) } { (i.job) } " — finished " (i.terminal_at) }
            } }
            @if items.len() > LISTED { p.hint { "and " (items.len() - LISTED) " more" } }
        }
    }
}

fn sweeps(history: &[(DateTime<Utc>, SweepCounts)]) -> Markup {
    html! {
        @if history.is_empty() {
            p { "No sweep since this process started." }
        } @else {
            (scroll_region("Last sweeps", html! { table {
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Examined" } th scope="col" { "Artifacts (bytes)" }
                    th scope="col" { "Diagnostics" } th scope="col" { "Jobs deleted" } th scope="col" { "Early stop" }
                } }
                tbody { @for (at, c) in history { tr {
                    td { (when(*at)) } td.num { (c.jobs_examined) }
                    td.num { (c.artifacts_deleted) " (" (c.artifact_bytes) ")" }
                    td.num { (c.diagnostics_cleared) } td.num { (c.jobs_deleted) }
                    td { @if c.stopped_early { "yes" } }
                } } }
            } }))
        }
    }
}
