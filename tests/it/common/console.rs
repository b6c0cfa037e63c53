//! Requests to the console as a browser without script makes them: GETs and form POSTs with
//! the session cookie, redirects not followed (so each 303 and its cookie can be checked).

use reqwest::StatusCode;
use reqwest::header::{LOCATION, SET_COOKIE};

use super::ops_server::Server;

/// A client that does not follow redirects, so each 303 and its cookie can be checked.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub async fn get(s: &Server, path: &str, cookie: Option<&str>) -> reqwest::Response {
    let mut req = client().get(format!("{}{path}", s.base));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.expect("request")
}

pub async fn post_form(
    s: &Server,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> reqwest::Response {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut req = client()
        .post(format!("{}{path}", s.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.expect("request")
}

/// Signs in with `token` and returns the `name=value` of the session cookie.
pub async fn sign_in(s: &Server, token: &str) -> String {
    let r = post_form(s, "/ui/login", None, &[("token", token)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()[SET_COOKIE].to_str().expect("ascii").to_string();
    set.split(';').next().expect("pair").to_string()
}

pub fn location(r: &reqwest::Response) -> &str {
    r.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The value of a hidden form field in a page.
pub fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).expect("field") + marker.len();
    html[start..].split('"').next().expect("value").to_string()
}

/// A page's body after a GET that must answer 200.
pub async fn page(s: &Server, path: &str, cookie: &str) -> String {
    let r = get(s, path, Some(cookie)).await;
    assert_eq!(r.status(), StatusCode::OK, "GET {path}");
    r.text().await.expect("body")
}
