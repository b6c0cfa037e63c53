//! One-click unsubscribe (RFC 8058): `POST /u/{token}` with the body
//! `List-Unsubscribe=One-Click` suppresses the token's address for its report at once — no
//! confirmation, idempotent, 200 — as a mail client posts it from the `List-Unsubscribe` and
//! `List-Unsubscribe-Post` headers; `GET /u/{token}` (a person following the link) shows one
//! button that posts the same, and no script. A token is the report and address signed with the
//! link key: a malformed one is 400, a forged one or one for a report no longer configured 404,
//! and neither changes anything.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::ServerState;
use crate::delivery::links::TokenError;
use crate::ledger::{Cause, NewSuppression};

/// What the pages may do: their own inline style, and post their one form here.
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

/// The body a one-click unsubscribe posts.
const ONE_CLICK: &str = "List-Unsubscribe=One-Click";

/// Why a token is refused, as the page that says so.
struct Refused(StatusCode, &'static str, String);

impl Refused {
    fn page(self) -> Response {
        page(self.0, self.1, &self.2)
    }
}

/// The report and address `token` names, or why it is refused.
fn read(st: &ServerState, token: &str) -> Result<(String, String), Refused> {
    let not_found = |why: &str| Refused(StatusCode::NOT_FOUND, "Not found", why.to_string());
    let Some(links) = &st.links else {
        return Err(not_found("This server sends no unsubscribe links."));
    };
    let (report, address) = links.unsubscribed(token).map_err(|e| match e {
        TokenError::Malformed => Refused(
            StatusCode::BAD_REQUEST,
            "Not an unsubscribe link",
            e.to_string(),
        ),
        TokenError::Forged => not_found("This link is not one this server made."),
    })?;
    if st.reports.get(&report).is_none() {
        return Err(not_found(
            "The report this link unsubscribes from is no longer sent.",
        ));
    }
    Ok((report, address))
}

pub(super) async fn confirm(State(st): State<ServerState>, Path(token): Path<String>) -> Response {
    let (report, address) = match read(&st, &token) {
        Ok(r) => r,
        Err(refused) => return refused.page(),
    };
    let shown = crate::domain::redact::redact_address(&address);
    let body = html! {
        p { "Stop sending the report " strong { (report) } " to " (shown) "?" }
        form method="post" {
            input type="hidden" name="List-Unsubscribe" value="One-Click";
            button type="submit" { "Unsubscribe" }
        }
    };
    framed(StatusCode::OK, "Unsubscribe", body)
}

pub(super) async fn one_click(
    State(st): State<ServerState>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    let (report, address) = match read(&st, &token) {
        Ok(r) => r,
        Err(refused) => return refused.page(),
    };
    if !String::from_utf8_lossy(&body).contains(ONE_CLICK) {
        let why = "An unsubscribe is posted with the body List-Unsubscribe=One-Click.";
        return page(StatusCode::BAD_REQUEST, "Not an unsubscribe", why);
    }
    let s = NewSuppression {
        address: &address,
        report: Some(&report),
        cause: Cause::Unsubscribe,
        why: "unsubscribed with one click",
        at: st.clock.now(),
    };
    let shown = crate::domain::redact::redact_address(&address);
    match st.ledger.recipients().suppress(s, None).await {
        Ok(new) => {
            if new {
                tracing::info!(report = %report, recipient = %shown, "unsubscribed with one click");
            }
            let words = format!("{shown} will not be sent the report {report} any more.");
            page(StatusCode::OK, "Unsubscribed", &words)
        }
        Err(e) => {
            tracing::error!(error = %e, "unsubscribe: the ledger is unavailable");
            let why = "The unsubscribe could not be recorded; try again later.";
            page(StatusCode::SERVICE_UNAVAILABLE, "Try again", why)
        }
    }
}

fn page(status: StatusCode, title: &str, words: &str) -> Response {
    framed(status, title, html! { p { (words) } })
}

fn framed(status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { "body{font-family:sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}" }
            }
            body { h1 { (title) } (body) }
        }
    };
    let mut r = (status, markup.into_string()).into_response();
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_CSP),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}
