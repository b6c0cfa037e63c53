//! The ops console under `/ui/` (README.md, "HTTP"): server-rendered pages over the ledger, with
//! no script and no external asset. A token login sets a signed session cookie ([`session`]);
//! without one every page redirects to `/ui/login`. Every response carries a strict
//! Content-Security-Policy; every state-changing form carries the session's CSRF token.

mod access;
mod dlq;
mod job;
mod job_view;
mod jobs;
mod overview;
pub mod pages;
mod report_page;
mod reports;
mod retention;
mod runbook;
pub mod session;
mod suppressions;

use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;

use super::{ServerState, making_work};
use session::{COOKIE, SESSION_SECS, Session};

/// The console's stylesheet, in the binary.
const CSS: &str = include_str!("console.css");

/// What every console response may load: its own stylesheet and nothing else; no script, no
/// framing by other sites, forms posting back here only.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
     frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A console failure, shown as a page.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    /// A form or query the console cannot act on: what is wrong, by field.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "this form has expired or did not come from this console: reload the page and try again"
    )]
    Csrf,
    #[error("signed in as viewer: this action needs the operator token")]
    ViewerOnly,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        use crate::ledger::LedgerError;
        let status = match &self {
            ConsoleError::Ledger(LedgerError::NotFound { .. }) => StatusCode::NOT_FOUND,
            ConsoleError::Ledger(
                LedgerError::WrongState { .. } | LedgerError::OlderNodes { .. },
            ) => StatusCode::CONFLICT,
            ConsoleError::Ledger(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ConsoleError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ConsoleError::Csrf | ConsoleError::ViewerOnly => StatusCode::FORBIDDEN,
        };
        let shown = match &self {
            ConsoleError::Ledger(
                LedgerError::NotFound { key, .. } | LedgerError::WrongState { key, .. },
            ) => {
                // A delivery's key holds its recipient: shown redacted.
                let redacted = key
                    .parse::<crate::domain::keys::DeliveryKey>()
                    .map(|d| d.redacted())
                    .unwrap_or_else(|_| key.clone());
                self.to_string().replace(key.as_str(), &redacted)
            }
            ConsoleError::Ledger(LedgerError::OlderNodes { .. }) => self.to_string(),
            ConsoleError::Ledger(_) => {
                tracing::error!(error = %self, "console page failed");
                "The ledger is unavailable; see the daemon's log.".to_string()
            }
            _ => self.to_string(),
        };
        let body = pages::shell(
            "Error",
            None,
            maud::html! { h1 { "Error" } p.error role="alert" { (shown) } },
        );
        (status, page(body)).into_response()
    }
}

/// The console's routes, all under `/ui`.
pub fn router(state: ServerState) -> Router<ServerState> {
    let signed_in = Router::new()
        .route("/ui/", get(overview::show))
        .route("/ui/jobs", get(jobs::list))
        .route("/ui/jobs/{key}", get(job::show))
        .route("/ui/jobs/{key}/artifact", get(job::artifact))
        .route("/ui/jobs/{key}/artifact.csv", get(job::artifact_csv))
        .route(
            "/ui/jobs/{key}/redrive",
            making_work(post(job::redrive), &state),
        )
        .route("/ui/jobs/{key}/cancel", post(job::cancel))
        .route(
            "/ui/jobs/{key}/reissue",
            making_work(post(job::reissue), &state),
        )
        .route("/ui/dlq", get(dlq::groups))
        .route("/ui/reports", get(reports::list))
        .route("/ui/reports/{id}", get(report_page::show))
        .route(
            "/ui/reports/{id}/run",
            making_work(post(report_page::run), &state),
        )
        .route("/ui/reports/{id}/test", post(report_page::test))
        .route("/ui/retention", get(retention::show))
        .route(
            "/ui/suppressions",
            get(suppressions::list).post(suppressions::suppress),
        )
        .route("/ui/suppressions/{id}/lift", post(suppressions::lift))
        .route("/ui/dlq/plan", post(dlq::plan))
        .route("/ui/runbooks/{id}", get(runbook::show))
        .route(
            "/ui/runbooks/{id}/start",
            making_work(post(runbook::start), &state),
        )
        .route("/ui/runbooks/{id}/stop", post(runbook::stop))
        .route("/ui/logout", post(logout))
        .route_layer(axum::middleware::from_fn_with_state(state, require_session));
    Router::new()
        .merge(signed_in)
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/login", get(login_form).post(login))
        .route("/ui/static/console.css", get(css))
        .layer(axum::middleware::map_response(security_headers))
}

fn page(markup: Markup) -> Html<String> {
    Html(markup.into_string())
}

async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    // A handler's own policy stands (the artifact preview's).
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        CSS,
    )
        .into_response()
}

/// The session a request's cookie carries, if valid now.
fn session_of(st: &ServerState, headers: &HeaderMap) -> Option<Session> {
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)?;
    st.tokens.verify(cookie.value(), st.clock.now())
}

/// Lets a signed-in request through with its [`Session`]; any other goes to the login.
async fn require_session(
    State(st): State<ServerState>,
    mut request: Request,
    next: Next,
) -> Response {
    match session_of(&st, request.headers()) {
        Some(s) => {
            request.extensions_mut().insert(s);
            next.run(request).await
        }
        None => Redirect::to("/ui/login").into_response(),
    }
}

async fn login_form(State(st): State<ServerState>) -> Response {
    let problem = (!st.tokens.any()).then_some(NO_TOKENS);
    page(pages::login(problem)).into_response()
}

const NO_TOKENS: &str = "No console token is configured: set the ops token (server.ops_token_env) or the viewer token (server.viewer_token_env) and restart.";

#[derive(Debug, Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

async fn login(
    State(st): State<ServerState>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let given = form.map(|Form(f)| f.token).unwrap_or_default();
    let now = st.clock.now();
    let issued = st
        .tokens
        .login(given.trim())
        .and_then(|role| st.tokens.issue(role, now).map(|c| (role, c)));
    let Some((role, cookie)) = issued else {
        tracing::warn!("console login refused");
        let problem = if st.tokens.any() {
            "That token is not valid."
        } else {
            NO_TOKENS
        };
        return (StatusCode::UNAUTHORIZED, page(pages::login(Some(problem)))).into_response();
    };
    tracing::info!(role = role.as_str(), "console login");
    let set = session_cookie(cookie, SESSION_SECS).secure(st.secure_cookies);
    see_other_with_cookie("/ui/", &set.build().to_string())
}

#[derive(Debug, Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    axum::Extension(session): axum::Extension<Session>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let given = form.map(|Form(f)| f.csrf).unwrap_or_default();
    if !session.csrf_ok(&given) {
        return Err(ConsoleError::Csrf);
    }
    let clear = session_cookie(String::new(), 0).build().to_string();
    Ok(see_other_with_cookie("/ui/login", &clear))
}

/// The session cookie with `value`, kept `max_age` seconds: only for `/ui`, out of scripts'
/// reach, never sent on a cross-site request.
fn session_cookie(value: String, max_age: i64) -> cookie::CookieBuilder<'static> {
    cookie::Cookie::build((COOKIE, value))
        .path("/ui")
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .max_age(cookie::time::Duration::seconds(max_age))
}

fn see_other_with_cookie(to: &str, cookie: &str) -> Response {
    let mut r = Redirect::to(to).into_response();
    if let Ok(v) = HeaderValue::from_str(cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
