//! What the chat kinds share (`slack.rs`, `teams.rs`): a destination named by the environment
//! variable that holds its incoming webhook's URL — a secret, so the name is what the ledger,
//! the logs and the pages show, never the URL; its `on_ambiguous` policy; the POST, with a
//! bounded read of the reply; and the facts a default message shows (the charts by their
//! links, since an incoming webhook cannot upload a file).
//!
//! ```toml
//! [[report.slack]]
//! url_env = "SLACK_OPS_WEBHOOK"
//! on_ambiguous = "quarantine"   # or "retry"; what follows a post that may have arrived
//! ```

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::destination::{OnAmbiguous, permanent};
use super::{Outcome, SendTarget};
use crate::config::{ConfigError, Destinations, Fields, Place, Read};
use crate::domain::keys::DestinationKind;
use crate::domain::outcome::ResponseClass;

/// One chat destination as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChatHook {
    /// The variable holding the webhook's URL; the destination's name.
    pub url_env: String,
    pub on_ambiguous: OnAmbiguous,
}

/// A report's (or its owners') chat destinations of one kind.
pub(crate) type ChatHooks = Vec<ChatHook>;

/// `[[report.<key>]]` tables: distinct variables, each with its policy. In a `[[family]]`, a
/// table whose `url_env` a row leaves empty is no destination.
pub(crate) fn read_hooks(
    key: &'static str,
    f: &mut Fields<'_, '_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Read {
    let place = f.place.clone();
    let items = match f.raw(key) {
        None => return Read::default(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            errors.push(place.error(key, format!("expected [[report.{key}]] tables")));
            return Read::default();
        }
    };
    let mut hooks = ChatHooks::new();
    for (i, item) in items.iter().enumerate() {
        let here = place.nested(&format!("{key}[{i}]"));
        let toml::Value::Table(t) = item else {
            errors.push(here.error("(table)", format!("expected a [[report.{key}]] table")));
            continue;
        };
        let Some(hook) = read_hook(t, &here, errors, warnings) else {
            continue;
        };
        if hooks.iter().any(|h| h.url_env == hook.url_env) {
            let message = format!("{} is listed twice", hook.url_env);
            errors.push(here.error("url_env", message));
        } else {
            hooks.push(hook);
        }
    }
    read(hooks)
}

/// `owner_<kind> = { url_env = "…" }`: one chat destination told when the report is late or
/// quarantined.
pub(crate) fn read_owner(
    key: &'static str,
    f: &mut Fields<'_, '_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Read {
    let place = f.place.clone();
    match f.raw(key) {
        None => Read::default(),
        Some(toml::Value::Table(t)) => {
            let hook = read_hook(t, &place.nested(key), errors, warnings);
            read(hook.into_iter().collect())
        }
        Some(_) => {
            let message = "expected a table such as { url_env = \"…\" }";
            errors.push(place.error(key, message));
            Read::default()
        }
    }
}

fn read(hooks: ChatHooks) -> Read {
    Read {
        to: hooks.iter().map(|h| h.url_env.clone()).collect(),
        detail: Some(Arc::new(hooks)),
    }
}

/// One table: `url_env` (required but in a family's row) and `on_ambiguous`.
fn read_hook(
    t: &toml::Table,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<ChatHook> {
    let mut f = Fields::new(t, place.clone());
    let on_ambiguous = (f.opt::<String>("on_ambiguous", errors)).and_then(|text| {
        let parsed = OnAmbiguous::parse(&text);
        if parsed.is_none() {
            let message = format!("{text:?}: use \"quarantine\" or \"retry\"");
            errors.push(place.error("on_ambiguous", message));
        }
        parsed
    });
    let in_family = place.row.is_some();
    let url_env = match t.get("url_env") {
        None if in_family => {
            f.finish(errors);
            return None;
        }
        // A URL pasted here is a secret in the configuration: said so, and never echoed.
        Some(toml::Value::String(v)) if v.contains("://") => {
            let message = "holds a URL: put the webhook's URL in an environment variable and name the variable here";
            errors.push(place.error("url_env", message));
            f.raw("url_env");
            None
        }
        _ => f.env_name_required("url_env", errors),
    };
    f.finish(errors);
    let url_env = url_env?;
    if std::env::var_os(&url_env).is_none() {
        let message = format!("environment variable {url_env} is not set here");
        warnings.push(place.warning("url_env", &message));
    }
    Some(ChatHook {
        url_env,
        on_ambiguous: on_ambiguous.unwrap_or_default(),
    })
}

/// The destination `url_env` of `kind` among `destinations`.
pub(crate) fn hook<'d>(
    destinations: &'d Destinations,
    kind: DestinationKind,
    url_env: &str,
) -> Option<&'d ChatHook> {
    (destinations.detail::<ChatHooks>(kind)?.iter()).find(|h| h.url_env == url_env)
}

/// Where a chat destination's sends go: its webhook, `<kind>:<variable>` (what a 429 pauses,
/// and what a `[[rate_limit]]` names: `host = "slack:slack_ops_webhook"`, or `"slack:*"`).
pub(crate) fn send_target(kind: DestinationKind, url_env: &str) -> SendTarget {
    SendTarget::named(&format!("{kind}:{url_env}"))
}

/// The webhook URL in variable `url_env`: unset, or not an http(s) URL, is a permanent outcome
/// that names the variable (never its value).
pub(crate) fn url_of(url_env: &str) -> Result<url::Url, Outcome> {
    let value = std::env::var(url_env)
        .map_err(|_| permanent(format!("environment variable {url_env} is not set")))?;
    match url::Url::parse(value.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
        _ => Err(permanent(format!(
            "environment variable {url_env} does not hold an http(s) URL"
        ))),
    }
}

/// A reply as a chat kind classifies it: its status, its Retry-After, and the start of its
/// body.
pub(crate) struct Reply {
    pub status: u16,
    pub retry_after: Option<chrono::Duration>,
    pub body: String,
}

impl Reply {
    /// A 429: rate limited, with the Retry-After asked (the retry policy backs off without
    /// one).
    pub fn throttled(&self, service: &str) -> Outcome {
        let why = match self.retry_after {
            Some(_) => format!("{service} is rate limiting this webhook (HTTP 429)"),
            None => format!("{service} is rate limiting this webhook (HTTP 429, no Retry-After)"),
        };
        let mut outcome = Outcome::new(ResponseClass::RateLimited, Some(429), why);
        outcome.retry_after = self.retry_after;
        self.noted(outcome)
    }

    /// `outcome` with the reply's body as its diagnostics, when it has one.
    pub fn noted(&self, outcome: Outcome) -> Outcome {
        match self.body.trim() {
            "" => outcome,
            body => outcome.with_diagnostics(body.to_string()),
        }
    }
}

/// POSTs chat messages: no redirect followed, no retry inside the client (each send is one
/// attempt the ledger records), cut at `[webhook] timeout`.
pub(crate) struct Poster {
    client: reqwest::Client,
}

impl Poster {
    pub fn new(client: reqwest::Client) -> Poster {
        Poster { client }
    }

    /// POSTs `body` (JSON) to `url` from variable `url_env`: the reply, or the outcome of a
    /// request that got none (a failure to connect is transient; a timeout or a reset after
    /// the request went out is ambiguous). What it says never holds the URL.
    pub async fn post(
        &self,
        (url, url_env): (url::Url, &str),
        body: Vec<u8>,
        now: DateTime<Utc>,
    ) -> Result<Reply, Outcome> {
        let sent = (self.client.post(url.clone()))
            .header("content-type", "application/json; charset=utf-8")
            .body(body)
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let retry_after = (resp.headers().get("retry-after"))
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| super::retry::parse_retry_after(v, now));
                let body = super::webhook::reply_snippet(resp).await;
                Ok(Reply {
                    status,
                    retry_after,
                    body,
                })
            }
            Err(e) => {
                let detail = crate::domain::words::error_chain(&e)
                    .replace(url.as_str(), &format!("${url_env}"));
                Err(super::webhook::failed(&e).with_diagnostics(detail))
            }
        }
    }
}

/// What a default message says: the report's title and date, its window in its own
/// timezone, its key figures, and the link to the whole report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Facts {
    pub title: String,
    pub date: String,
    /// The window in words, in the report's timezone.
    pub window: String,
    /// Each figure's label and its value in words.
    pub figures: Vec<(String, String)>,
    pub link: Option<String>,
    /// Each chart's message and link, when the report has charts and a link.
    pub charts: Vec<(String, String)>,
    /// Rendered at its deadline without its data ready.
    pub stale: bool,
}

/// The facts of a render's template context (`report::render::context`); a figure the data
/// has no value for, or a list or an object for, fails naming it.
pub(crate) fn facts(context: &Value) -> Result<Facts, String> {
    let text = |v: &Value| v.as_str().map(str::to_string);
    let title = text(&context["report"]["title"]).unwrap_or_default();
    // An alert's message leads with its headline, as its email's subject does.
    let title = match text(&context["alert"]["headline"]) {
        Some(headline) => format!("{headline} · {title}"),
        None => title,
    };
    let date = text(&context["date"]).unwrap_or_default();
    let window = window_words(context).unwrap_or_else(|| date.clone());
    let mut figures = Vec::new();
    for f in context["figures"].as_array().into_iter().flatten() {
        let label = text(&f["label"]).unwrap_or_default();
        let path = text(&f["path"]).unwrap_or_default();
        let value = match &f["value"] {
            Value::Null => {
                return Err(format!("figure {label:?}: the data has no value at {path}"));
            }
            Value::String(s) => s.clone(),
            Value::Number(n) => grouped_number(n),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(format!(
                    "figure {label:?}: {path} is a list or an object, not a value"
                ));
            }
        };
        figures.push((label, value));
    }
    let charts = (context["charts"].as_object().into_iter().flatten())
        .filter_map(|(_, c)| Some((text(&c["alt"])?, text(&c["url"])?)))
        .collect();
    Ok(Facts {
        title,
        date,
        window,
        figures,
        link: text(&context["report_url"]),
        charts,
        stale: context["stale"].as_bool().unwrap_or(false),
    })
}

/// `Sunday 29 November 2026 (Europe/Berlin)` for a window of one whole local day, else its
/// start and end: `29 Nov 2026 06:00 – 30 Nov 2026 06:00 (Europe/Berlin)`.
fn window_words(context: &Value) -> Option<String> {
    let tz: chrono_tz::Tz = context["report"]["timezone"].as_str()?.parse().ok()?;
    let at = |k: &str| {
        let text = context["window"][k].as_str()?;
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&tz))
    };
    let (start, end) = (at("start")?, at("end")?);
    let midnight = chrono::NaiveTime::MIN;
    let whole_day = start.time() == midnight
        && end.time() == midnight
        && start.date_naive().succ_opt() == Some(end.date_naive());
    Some(match whole_day {
        true => format!("{} ({tz})", start.format("%A %-d %B %Y")),
        false => format!(
            "{} – {} ({tz})",
            start.format("%-d %b %Y %H:%M"),
            end.format("%-d %b %Y %H:%M")
        ),
    })
}

/// An integer with its thousands grouped (`1,842`); any other number as JSON writes it.
fn grouped_number(n: &serde_json::Number) -> String {
    let Some(i) = n.as_i64() else {
        return n.to_string();
    };
    let digits = i.unsigned_abs().to_string();
    let mut out = String::new();
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if i < 0 { format!("-{out}") } else { out }
}

/// What a message over a service's limits says instead, with the link to the whole report.
pub(crate) fn over_limits_words(service: &str, over: &str) -> String {
    format!("This report is too large for {service} ({over}); the whole report is behind the link.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context(figures: Value) -> Value {
        json!({
            "report": {"id": "w17", "title": "Warehouse 17", "timezone": "Europe/Berlin"},
            "date": "2026-11-30",
            "window": {"start": "2026-11-28T23:00:00Z", "end": "2026-11-29T23:00:00Z"},
            "stale": false,
            "figures": figures,
            "report_url": "https://reports.example/r/w17:2026-11-30?s=00",
        })
    }

    #[test]
    fn an_alerts_message_leads_its_title_with_the_headline() {
        let mut c = context(json!([]));
        assert_eq!(facts(&c).expect("facts").title, "Warehouse 17");
        c["alert"] = json!({"event": "triggered", "headline": "Alert: orders_late 23 > 20"});
        assert_eq!(
            facts(&c).expect("facts").title,
            "Alert: orders_late 23 > 20 · Warehouse 17"
        );
    }

    #[test]
    fn the_facts_read_the_window_locally_and_the_figures_in_words() {
        let figures = json!([
            {"label": "Shipped", "path": "data.s", "value": 1842},
            {"label": "Big", "path": "data.b", "value": -1234567},
            {"label": "On time", "path": "data.p", "value": 98.8},
            {"label": "Site", "path": "data.site", "value": "Duisburg"},
        ]);
        let f = facts(&context(figures)).expect("facts");
        assert_eq!(f.window, "Sunday 29 November 2026 (Europe/Berlin)");
        let values: Vec<&str> = f.figures.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["1,842", "-1,234,567", "98.8", "Duisburg"]);
        assert_eq!(
            f.link.as_deref(),
            Some("https://reports.example/r/w17:2026-11-30?s=00")
        );
        let mut partial = context(json!([]));
        partial["window"]["end"] = json!("2026-11-29T05:00:00Z");
        let f = facts(&partial).expect("facts");
        assert_eq!(
            f.window,
            "29 Nov 2026 00:00 – 29 Nov 2026 06:00 (Europe/Berlin)"
        );
    }

    #[test]
    fn a_figure_without_a_value_fails_naming_it() {
        let missing = json!([{"label": "Late", "path": "data.late", "value": null}]);
        let e = facts(&context(missing)).expect_err("no value");
        assert_eq!(e, "figure \"Late\": the data has no value at data.late");
        let list = json!([{"label": "Rows", "path": "data.rows", "value": [1]}]);
        assert!(
            facts(&context(list))
                .expect_err("a list")
                .contains("a list or an object")
        );
    }

    #[test]
    fn an_unset_or_malformed_variable_is_permanent_and_names_only_the_variable() {
        let e = url_of("DAWNPOST_TEST_CHAT_UNSET_VARIABLE").expect_err("unset");
        assert_eq!(e.class, ResponseClass::Permanent);
        assert!(
            e.reason.contains("DAWNPOST_TEST_CHAT_UNSET_VARIABLE"),
            "{}",
            e.reason
        );
    }
}
