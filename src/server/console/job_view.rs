//! The job page's markup: a timeline of everything that happened to the job, its artifact,
//! each delivery with every attempt, the audit, and (for an operator) the actions.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use maud::{Markup, html};

use super::pages::{age, scroll_region, shell, state_badge, when_in};
use super::session::{Role, Session};
use crate::domain::keys::DeliveryKey;
use crate::ledger::{DeliveryState, JobState};
use crate::views::history::{DeliveryHistory, JobHistory, Redactions};

/// A delivery named in a form without its key (which holds a recipient address): the first
/// 16 hex digits of the key's sha256.
pub(crate) fn delivery_ref(key: &DeliveryKey) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.to_string().as_bytes());
    hex::encode(&digest[..8])
}

/// The job page; its times in `tz`, the report's zone (UTC beside them), when it is configured.
pub fn job(session: &Session, h: &JobHistory, now: DateTime<Utc>, tz: Option<Tz>) -> Markup {
    let j = &h.job;
    let hide = h.redactions();
    let operator = session.role == Role::Operator;
    shell(
        &j.key.to_string(),
        Some(session),
        html! {
            p { a href="/ui/jobs" { "← Jobs" } }
            h1 { "Job " (j.key) " " (state_badge(j.state.as_str())) }
            dl.facts {
                dt { "Fired" } dd { (when_in(tz, j.fire_at)) " (" (j.origin) ")" }
                dt { "Window" } dd { (when_in(tz, j.window.start)) " → " (when_in(tz, j.window.end)) }
                dt { "Render attempts" } dd { (j.attempts) }
                dt { "Redrives" } dd { (j.redrive_count) }
                @if let Some(t) = j.terminal_at {
                    dt { "Finished" } dd { (when_in(tz, t)) " (" (age(t, now)) " ago)" }
                }
                @if let Some(until) = j.wait_until {
                    dt { "Waits for its data until" } dd {
                        (when_in(tz, until))
                        @if j.state == JobState::Waiting { "; next probe " (when_in(tz, j.ready_at)) }
                        " (" (h.probes.len()) " probes)"
                    }
                }
                @if let Some(s) = &j.supersedes {
                    dt { "Supersedes" } dd { a href={ "/ui/jobs/" (s) } { (s) } " (this is revision " (j.key.revision()) ", a correction)" }
                }
                @if h.revisions.len() > 1 {
                    dt { "Revisions" } dd {
                        @for (i, r) in h.revisions.iter().enumerate() {
                            @if i > 0 { ", " }
                            @if r.key == j.key { (r.key) " (this one)" } @else { a href={ "/ui/jobs/" (r.key) } { (r.key) } }
                            " " (state_badge(r.state.as_str()))
                            @if let Some(a) = &r.artifact { " sha256 " code { (a.sha256.get(..12).unwrap_or(&a.sha256)) } }
                        }
                    }
                }
                @if let Some(late) = j.late_at {
                    dt { "Late" } dd.error { "The deadline passed at " (when_in(tz, late)) " without its data ready: what was rendered after it may be stale." }
                }
                @if let Some(d) = h.decision.as_ref().filter(|d| d.sent) {
                    dt { "Sent because" } dd { (d.words) " (send_when = \"" (d.rule) "\")" }
                }
                @if let Some(e) = &j.last_error {
                    @if j.state == JobState::Skipped {
                        dt { "Skipped" } dd { (hide.text(e)) "; nothing was sent" }
                    } @else {
                        dt { "Last error" } dd.error { (hide.text(e)) }
                    }
                }
            }
            (artifact(h, tz))
            @if operator {
                (job_actions(session, h))
            }
            h2 { "Timeline" }
            (timeline(h, &hide, tz))
            h2 { "Deliveries" }
            @if h.deliveries.is_empty() {
                p { "None yet: deliveries are created when the render commits." }
            }
            @for d in &h.deliveries {
                (delivery(session, d, &hide, operator, tz))
            }
            h2 { "Audit" }
            (audit(h, &hide, tz))
        },
    )
}

fn artifact(h: &JobHistory, tz: Option<Tz>) -> Markup {
    let j = &h.job;
    html! {
        h2 { "Artifact" }
        @match (&j.artifact, j.artifact_deleted_at) {
            (None, _) => { p { "Not rendered." } }
            (Some(a), deleted) => {
                dl.facts {
                    dt { "sha256" } dd { code { (a.sha256) } }
                    dt { "Size" } dd { (a.bytes) " bytes" }
                    dt { "Parts" } dd { ".html, " (crate::views::history::parts_of(a)) }
                    @if let Some(g) = j.generated_at { dt { "Generated" } dd { (when_in(tz, g)) } }
                }
                @if let Some(at) = deleted {
                    p.swept { "Swept on " (when_in(tz, at)) " by retention: the ledger rows remain." }
                } @else {
                    @if a.csv_key.is_some() {
                        p { "Attached to every email: "
                            a href={ "/ui/jobs/" (j.key) "/artifact.csv" } { (j.key.csv_filename()) } }
                    }
                    iframe.preview sandbox="" title="Rendered report"
                        src={ "/ui/jobs/" (j.key) "/artifact" } {}
                }
            }
        }
    }
}

/// One line of the timeline: when, what.
struct Event {
    at: DateTime<Utc>,
    what: Markup,
}

fn timeline(h: &JobHistory, hide: &Redactions, tz: Option<Tz>) -> Markup {
    let j = &h.job;
    let mut events = vec![
        Event {
            at: j.fire_at,
            what: html! { "Fired (" (j.origin) ")" },
        },
        Event {
            at: j.created_at,
            what: html! { "Job created" },
        },
    ];
    if let Some(g) = j.generated_at {
        events.push(Event {
            at: g,
            what: html! { "First render" },
        });
    }
    for d in &h.deliveries {
        for a in &d.attempt_log {
            let dest = d.delivery.key.redacted();
            events.push(Event {
                at: a.finished_at,
                what: html! {
                    "Attempt " (a.attempt) " to " (dest) ": " (state_badge(a.class.as_str()))
                    @if let Some(c) = a.code { " " (c) }
                    @if let Some(r) = &a.reason { " — " (hide.text(r)) }
                },
            });
        }
    }
    for probe in &h.probes {
        events.push(Event {
            at: probe.at,
            what: html! { "Probe of its data: " (state_badge(probe.outcome.as_str())) " — " (hide.text(&probe.answer)) },
        });
    }
    for r in &h.redrives {
        events.push(Event {
            at: r.at,
            what: html! { (r.action) " by " (r.by) ": " (hide.text(&r.reason)) },
        });
    }
    if let Some(t) = j.terminal_at {
        events.push(Event {
            at: t,
            what: html! { "Finished: " (j.state.as_str()) },
        });
    }
    if let Some(t) = j.artifact_deleted_at {
        events.push(Event {
            at: t,
            what: html! { "Artifact swept by retention" },
        });
    }
    events.sort_by_key(|e| e.at);
    html! {
        ol.timeline {
            @for e in &events {
                li { (when_in(tz, e.at)) " " (e.what) }
            }
        }
    }
}

fn delivery(
    session: &Session,
    d: &DeliveryHistory,
    hide: &Redactions,
    operator: bool,
    tz: Option<Tz>,
) -> Markup {
    let dl = &d.delivery;
    html! {
        section.delivery aria-label={ "Delivery " (dl.key.redacted()) } {
            h3 { (dl.key.kind().as_str()) " " (crate::domain::redact::redact_destination(dl.key.destination())) " " (state_badge(dl.state.as_str())) }
            p.hint {
                (dl.attempts) " attempt(s), " (dl.redrive_count) " redrive(s)"
                @if dl.state == DeliveryState::Pending { "; next try " (when_in(tz, dl.ready_at)) }
                @if let Some(e) = &dl.last_error { "; last error: " (hide.text(e)) }
                @if d.sent_a_link() { "; got a link instead of the whole report, too large for it" }
            }
            @for b in &d.bounces {
                p.bounce { "Then " (hide.text(&crate::views::history::bounce_line(b))) }
            }
            @if !d.attempt_log.is_empty() {
                (scroll_region("Attempts", html! { table.attempts {
                    thead { tr {
                        th scope="col" { "#" } th scope="col" { "Finished" } th scope="col" { "Class" }
                        th scope="col" { "Code" } th scope="col" { "Retry-After" }
                        th scope="col" { "Next ready" } th scope="col" { "Reason" }
                    } }
                    tbody { @for a in &d.attempt_log { tr {
                        td.num { (a.attempt) }
                        td { (when_in(tz, a.finished_at)) }
                        td { (state_badge(a.class.as_str())) }
                        td { @if let Some(c) = a.code { (c) } }
                        td { @if let Some(ms) = a.retry_after_ms { (ms / 1000) "s" } }
                        td { @if let Some(t) = a.next_ready_at { (when_in(tz, t)) } }
                        td { @if let Some(r) = &a.reason { (hide.text(r)) } }
                    } } }
                } }))
            }
            @if operator && dl.state == DeliveryState::Quarantined {
                (action_form(session, &format!("/ui/jobs/{}/redrive", dl.key.job()),
                    Some(&delivery_ref(&dl.key)), "Redrive this delivery"))
            }
        }
    }
}

fn job_actions(session: &Session, h: &JobHistory) -> Markup {
    let j = &h.job;
    html! {
        @if j.state == JobState::Quarantined {
            (action_form(session, &format!("/ui/jobs/{}/redrive", j.key), None, "Redrive the job"))
        }
        @if JobState::CANCELLABLE.contains(&j.state) {
            (action_form(session, &format!("/ui/jobs/{}/cancel", j.key), None, "Cancel the job"))
        }
        @if j.state.is_terminal() {
            (action_form(session, &format!("/ui/jobs/{}/reissue", j.key), None, "Reissue as a correction"))
        }
    }
}

/// A POST form for an audited action: name and reason required, the session's CSRF token.
pub(super) fn action_form(
    session: &Session,
    action: &str,
    delivery: Option<&str>,
    label: &str,
) -> Markup {
    html! {
        form.action method="post" action=(action) aria-label=(label) {
            input type="hidden" name="csrf" value=(session.csrf);
            @if let Some(d) = delivery { input type="hidden" name="delivery" value=(d); }
            label { "Your name " input name="by" required autocomplete="name"; }
            label { "Reason " input name="reason" required size="32"; }
            button type="submit" { (label) }
        }
    }
}

fn audit(h: &JobHistory, hide: &Redactions, tz: Option<Tz>) -> Markup {
    html! {
        @if h.redrives.is_empty() {
            p { "No action yet." }
        } @else {
            (scroll_region("Audit", html! { table.audit {
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Action" } th scope="col" { "By" }
                    th scope="col" { "Via" } th scope="col" { "What" } th scope="col" { "Reason" }
                } }
                tbody { @for r in &h.redrives { tr {
                    td { (when_in(tz, r.at)) }
                    td { (r.action) }
                    td { (r.by) }
                    td { (r.via.as_deref().unwrap_or("")) }
                    td { @match &r.delivery_key { Some(d) => (d.redacted()), None => "the job" } }
                    td { (hide.text(&r.reason)) }
                } } }
            } }))
        }
    }
}
