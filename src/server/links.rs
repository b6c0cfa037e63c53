//! `GET /r/{job}/{sha256}[/text|/csv]?s=…`: the whole report behind a link that a
//! destination got instead of a report too large for it; `GET /r/{job}?s=…`, the same report
//! by a link signed over its job alone, which a message made with the report (a chat
//! message) carries. The signature (`crate::delivery::links`) names
//! the job and its artifact's digest; what is served is read back from the store and checked
//! against that digest, as `show` does. Once retention deleted the artifact: 410, saying how
//! long it was kept. A link that does not verify is 404, which says nothing.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::ServerState;
use crate::delivery::links::Part;
use crate::domain::keys::JobKey;
use crate::report::artifact::StoredArtifact;
use crate::report::render::Rendered;

/// What a served report may do: its own inline styles and data images; no script, no request.
const REPORT_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data: 'self'; frame-ancestors 'none'";

#[derive(Debug, Deserialize)]
pub(super) struct Signed {
    #[serde(default)]
    s: String,
}

/// `GET /r/{job}/{sha256}`: the report's HTML, with links to its other parts.
pub(super) async fn report(
    State(st): State<ServerState>,
    Path((job, sha256)): Path<(String, String)>,
    Query(q): Query<Signed>,
) -> Response {
    serve(&st, (&job, &sha256, None), &q.s).await
}

/// `GET /r/{job}`: the job's report, by a link signed over the job alone (what a message made
/// with the report, such as a chat message, links to): served as its artifact's link is.
pub(super) async fn job_report(
    State(st): State<ServerState>,
    Path(job): Path<String>,
    Query(q): Query<Signed>,
) -> Response {
    let (Some(links), Ok(key)) = (&st.links, job.parse::<JobKey>()) else {
        return not_found();
    };
    if !links.verify_report(&key, &q.s) {
        return not_found();
    }
    let sha256 = match st.ledger.jobs().get(&key).await {
        Ok(Some(job)) => match job.artifact {
            Some(a) => a.sha256,
            None => return not_found(),
        },
        Ok(None) => return gone(&st, &key),
        Err(e) => {
            tracing::warn!(job = %key, error = %e, "link: the ledger could not be read");
            return unavailable();
        }
    };
    // Served under the artifact's own signature, which this key makes.
    let sig = links.link(&key, &sha256, Part::Html);
    let sig = sig.rsplit("s=").next().unwrap_or_default().to_string();
    serve(&st, (&job, &sha256, None), &sig).await
}

/// `GET /r/{job}/charts/{id}`: one chart of the job's report, by its link (signed over the
/// job, as `GET /r/{job}` is): its PNG, read back and checked against the artifact's digest.
pub(super) async fn chart(
    State(st): State<ServerState>,
    Path((job, id)): Path<(String, String)>,
    Query(q): Query<Signed>,
) -> Response {
    let (Some(links), Ok(key)) = (&st.links, job.parse::<JobKey>()) else {
        return not_found();
    };
    if !links.verify_report(&key, &q.s) {
        return not_found();
    }
    let artifact = match st.ledger.jobs().get(&key).await {
        Ok(Some(job)) => match (job.artifact, job.artifact_deleted_at) {
            (Some(a), None) => a,
            (Some(_), Some(_)) => return gone(&st, &key),
            (None, _) => return not_found(),
        },
        Ok(None) => return gone(&st, &key),
        Err(e) => {
            tracing::warn!(job = %key, error = %e, "link: the ledger could not be read");
            return unavailable();
        }
    };
    let png = match st.artifacts.check(&artifact).await {
        Ok(StoredArtifact::Intact(r)) => r.images.get(&id).cloned(),
        Ok(_) => {
            tracing::error!(job = %key, "link: the stored artifact is not the one the ledger records; not served");
            let msg = "The stored report does not match its record; it is not served.";
            return (StatusCode::BAD_GATEWAY, msg).into_response();
        }
        Err(e) => {
            tracing::warn!(job = %key, error = %e, "link: the artifact could not be read");
            return (
                StatusCode::BAD_GATEWAY,
                "The report could not be read from the store; try again later.",
            )
                .into_response();
        }
    };
    match png {
        Some(png) => (
            [
                (header::CONTENT_TYPE, "image/png"),
                (header::CACHE_CONTROL, "private, max-age=86400"),
            ],
            png,
        )
            .into_response(),
        None => not_found(),
    }
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "The ledger could not be read; try again later.",
    )
        .into_response()
}

/// `GET /r/{job}/{sha256}/text` and `…/csv`.
pub(super) async fn part(
    State(st): State<ServerState>,
    Path((job, sha256, part)): Path<(String, String, String)>,
    Query(q): Query<Signed>,
) -> Response {
    serve(&st, (&job, &sha256, Some(&part)), &q.s).await
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "No such report.").into_response()
}

async fn serve(
    st: &ServerState,
    (job, sha256, part): (&str, &str, Option<&str>),
    sig: &str,
) -> Response {
    let (Some(links), Ok(key), Some(part)) = (&st.links, job.parse::<JobKey>(), Part::parse(part))
    else {
        return not_found();
    };
    if !links.verify(&key, sha256, sig) {
        return not_found();
    }
    let job = match st.ledger.jobs().get(&key).await {
        Ok(Some(job)) => job,
        Ok(None) => return gone(st, &key),
        Err(e) => {
            tracing::warn!(job = %key, error = %e, "link: the ledger could not be read");
            return unavailable();
        }
    };
    let artifact = match (job.artifact, job.artifact_deleted_at) {
        (Some(a), None) if a.sha256 == sha256 => a,
        _ => return gone(st, &key),
    };
    let rendered = match st.artifacts.check(&artifact).await {
        Ok(StoredArtifact::Intact(r)) => r,
        Ok(other) => {
            let found = match other {
                StoredArtifact::Missing => "a part is missing",
                _ => "its parts hash to another sha256",
            };
            tracing::error!(job = %key, found, "link: the stored artifact is not the one the ledger records; not served");
            let msg = "The stored report does not match its record; it is not served. The operators are told in the daemon's log.";
            return (StatusCode::BAD_GATEWAY, msg).into_response();
        }
        Err(e) => {
            tracing::warn!(job = %key, error = %e, "link: the artifact could not be read");
            return (
                StatusCode::BAD_GATEWAY,
                "The report could not be read from the store; try again later.",
            )
                .into_response();
        }
    };
    served(links, &key, sha256, part, rendered)
}

/// The part asked for, under the report's policy.
fn served(
    links: &crate::delivery::links::Links,
    key: &JobKey,
    sha256: &str,
    part: Part,
    r: Rendered,
) -> Response {
    let mut response = match part {
        Part::Html => {
            let also = other_parts(links, key, sha256, r.csv.is_some());
            // The charts the email carries as parts, by their links here.
            let html = crate::report::render::cids_replaced(r.html, &r.images, |id, _| {
                html_escape(&links.chart(key, id))
            });
            Html(with_header(&html, &also)).into_response()
        }
        Part::Text => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            r.text,
        )
            .into_response(),
        Part::Csv => match r.csv {
            None => return not_found(),
            Some(csv) => {
                let mut r =
                    ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv).into_response();
                let disposition = format!("attachment; filename=\"{}\"", key.csv_filename());
                if let Ok(v) = HeaderValue::from_str(&disposition) {
                    r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
                }
                r
            }
        },
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(REPORT_CSP),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

/// The links to a report's other parts, as a line above it.
fn other_parts(
    links: &crate::delivery::links::Links,
    key: &JobKey,
    sha256: &str,
    csv: bool,
) -> String {
    let text = links.link(key, sha256, Part::Text);
    let mut line = format!(
        "<p style=\"margin:0;padding:8px 12px;font:14px/20px sans-serif;background-color:#f5f7fa;color:#1f2933\">Also as <a href=\"{}\">plain text</a>",
        html_escape(&text)
    );
    if csv {
        let csv = links.link(key, sha256, Part::Csv);
        line.push_str(&format!(" · <a href=\"{}\">CSV</a>", html_escape(&csv)));
    }
    line.push_str("</p>");
    line
}

/// `html` with `line` first in its body (or first of all, without a `<body>` tag).
fn with_header(html: &str, line: &str) -> String {
    let at = html
        .find("<body")
        .and_then(|i| html[i..].find('>').map(|j| i + j + 1))
        .unwrap_or(0);
    format!("{}{line}{}", &html[..at], &html[at..])
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

/// 410: the report was kept for its retention and deleted.
fn gone(st: &ServerState, key: &JobKey) -> Response {
    let kept = st
        .node
        .sweeper
        .policy()
        .for_report(key.report().as_str())
        .artifact;
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Report no longer kept</title></head>\
         <body><h1>This report is no longer kept</h1><p>{} for {} was kept for {kept} after it was sent \
         (its retention) and has been deleted. Ask its sender for a new copy.</p></body></html>\n",
        html_escape(key.report().as_str()),
        key.date()
    );
    let mut r = (StatusCode::GONE, Html(page)).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(REPORT_CSP),
    );
    r
}
