//! Microsoft Teams: a message posted to a Workflows (Power Automate) webhook whose URL is in
//! the environment variable a report's `[[report.teams]]` names (`chat.rs`). The message's one
//! attachment is an Adaptive Card (version 1.5 or lower): the artifact's `teams` part, from
//! `templates/<template>.teams.hbs` or the default this kind builds (the title, the window in
//! the report's timezone, its figures as facts, the link to the whole report).
//!
//! A flow answers 202 before it runs, and refuses a message over 28,672 bytes only then, where
//! the sender never sees it: a message is kept under 24 KB here, and one over it goes as a
//! short card with the link. Answers: 200 or 202 sent; 429 rate limited (Retry-After, or the
//! retry policy's backoff); 400 and 413 permanent, with the reason; other 4xx permanent; 5xx
//! transient.

use serde_json::{Value, json};

use super::chat::{self, Poster};
use super::destination::{
    Build, Confirm, Destination, NotConfirmed, Notice, OnAmbiguous, Parcel, Preview, Sender,
    Sending, Shown, permanent,
};
use super::{DeliverError, Outcome, SendTarget};
use crate::config::{ConfigError, DestinationConfig, Fields, Read, Settings};
use crate::domain::keys::{DeliveryKey, DestinationKind};
use crate::domain::outcome::ResponseClass;
use crate::report::render::Rendered;

pub(crate) struct Teams;

/// The Teams kind's name, and its part's.
pub const KIND: DestinationKind = DestinationKind::named("teams");
const PART: &str = "teams";

/// The largest message posted (the card in its envelope), in bytes: under the 28,672 a flow
/// takes, with room for what the flow adds.
pub const MAX_MESSAGE_BYTES: usize = 24 * 1024;

/// The newest Adaptive Card version Teams renders in a Workflows message.
const MAX_VERSION: (u32, u32) = (1, 5);

impl DestinationConfig for Teams {
    fn kind(&self) -> DestinationKind {
        KIND
    }

    fn template_part(&self) -> Option<&'static str> {
        Some(PART)
    }

    /// `[[report.teams]]`: `url_env`, `on_ambiguous`.
    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        chat::read_hooks("teams", f, errors, warnings)
    }

    /// `owner_teams = { url_env = "…" }`.
    fn read_owners(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        chat::read_owner("owner_teams", f, errors, warnings)
    }
}

impl Destination for Teams {
    fn send_target(&self, destination: &str, _relay: &SendTarget) -> SendTarget {
        chat::send_target(KIND, destination)
    }

    fn timeout(&self, settings: &Settings) -> std::time::Duration {
        settings.webhook.timeout.as_std()
    }

    fn sender(&self, build: &Build<'_>) -> Result<Box<dyn Sender>, DeliverError> {
        let timeout = build.config.settings.webhook.timeout.as_std();
        Ok(Box::new(TeamsSender {
            poster: Poster::new(super::webhook::client(timeout, build.ca)?),
            links: build.links.clone(),
        }))
    }

    fn target_shown(&self, target: &str, reports: usize) -> String {
        format!("teams workflow {target} ({reports} report(s))")
    }

    fn default_part(&self) -> Option<crate::report::render::DefaultPart> {
        Some((PART, default_card))
    }

    fn on_ambiguous(&self, report: &crate::config::Report, to: &str) -> Option<OnAmbiguous> {
        let hook = chat::hook(&report.destinations, KIND, to);
        Some(hook.map_or_else(OnAmbiguous::default, |h| h.on_ambiguous))
    }

    fn invalid(
        &self,
        _: &crate::config::Report,
        rendered: &Rendered,
        _: &crate::config::Config,
    ) -> Vec<String> {
        match rendered.parts.get(PART).map(|c| enveloped(c)) {
            Some(Err(problem)) => vec![format!(
                "the teams card is not an Adaptive Card Teams takes: {problem}"
            )],
            _ => Vec::new(),
        }
    }

    fn checked(
        &self,
        rendered: &Rendered,
        _parts: &(String, u64),
        config: &crate::config::Config,
    ) -> Vec<String> {
        over_words(rendered, config).into_iter().collect()
    }

    /// The message as it would be posted: the card in its envelope.
    fn preview(&self, s: &Shown<'_>) -> Result<Option<Preview>, String> {
        let Some(card) = s.rendered.parts.get(PART) else {
            return Ok(None);
        };
        let message = enveloped(card)
            .map_err(|p| format!("the teams card is not an Adaptive Card Teams takes: {p}"))?;
        let links = super::links::Links::from_settings(&s.config.settings.server)
            .ok()
            .flatten();
        let body = match (message.len() > MAX_MESSAGE_BYTES, &links) {
            (true, Some(l)) => bounded(&s.report.title, message.len(), &l.report(s.job)),
            _ => message,
        };
        Ok(Some(Preview {
            size: format!(
                "teams message {}",
                crate::report::render::human_size(body.len())
            ),
            file: Some(("teams.json", body)),
            warnings: over_words(s.rendered, s.config).into_iter().collect(),
        }))
    }
}

/// What `check` and `preview` warn of a message over the size kept.
fn over_words(rendered: &Rendered, config: &crate::config::Config) -> Option<String> {
    let message = rendered.parts.get(PART).and_then(|c| enveloped(c).ok())?;
    (message.len() > MAX_MESSAGE_BYTES).then(|| {
        format!(
            "the teams message is {}, over the {} kept under Teams' 28,672-byte limit: {}",
            crate::report::render::human_size(message.len()),
            crate::report::render::human_size(MAX_MESSAGE_BYTES),
            config.settings.server.too_large_fate("its Teams workflows")
        )
    })
}

/// The default card: the title, the window, the figures as facts, and the link.
fn default_card(context: &Value) -> Result<String, String> {
    let f = chat::facts(context)?;
    let mut body = vec![
        json!({"type": "TextBlock", "text": f.title, "size": "Large", "weight": "Bolder", "wrap": true, "style": "heading"}),
        json!({"type": "TextBlock", "text": format!("{} · {}", f.date, f.window), "isSubtle": true, "spacing": "None", "wrap": true}),
    ];
    if f.stale {
        let words = "The data was not ready by the deadline: this is what there was.";
        body.push(json!({"type": "TextBlock", "text": words, "color": "Warning", "wrap": true}));
    }
    if !f.figures.is_empty() {
        let facts: Vec<Value> = (f.figures.iter())
            .map(|(label, value)| json!({"title": label, "value": value}))
            .collect();
        body.push(json!({"type": "FactSet", "facts": facts}));
    }
    for (alt, url) in &f.charts {
        body.push(json!({"type": "Image", "url": url, "altText": alt, "size": "Stretch"}));
    }
    serde_json::to_string(&card(body, f.link.as_deref())).map_err(|e| e.to_string())
}

/// An Adaptive Card 1.5 of `body`, with an action opening `link` when there is one.
fn card(body: Vec<Value>, link: Option<&str>) -> Value {
    let mut card = json!({
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "body": body,
    });
    if let Some(url) = link {
        card["actions"] =
            json!([{"type": "Action.OpenUrl", "title": "Open the whole report", "url": url}]);
    }
    card
}

/// A card in place of one over the size kept: the title, why, and the link.
fn bounded(title: &str, bytes: usize, link: &str) -> Vec<u8> {
    let over = format!(
        "{}, over {}",
        crate::report::render::human_size(bytes),
        crate::report::render::human_size(MAX_MESSAGE_BYTES)
    );
    let body = vec![
        json!({"type": "TextBlock", "text": title, "size": "Large", "weight": "Bolder", "wrap": true, "style": "heading"}),
        json!({"type": "TextBlock", "text": chat::over_limits_words("Teams", &over), "wrap": true}),
    ];
    envelope(&card(body, Some(link))).unwrap_or_default()
}

/// The Workflows message that carries `card` as its one attachment.
fn envelope(card: &Value) -> Result<Vec<u8>, String> {
    let message = json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    });
    serde_json::to_vec(&message).map_err(|e| e.to_string())
}

/// The message carrying the stored card `text`, or why the card is not one Teams takes: not
/// JSON, not an `AdaptiveCard`, a version over 1.5 or none, a body that is not a list of
/// elements with a type.
fn enveloped(text: &str) -> Result<Vec<u8>, String> {
    let card: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if card.get("type").and_then(Value::as_str) != Some("AdaptiveCard") {
        return Err("type: not \"AdaptiveCard\"".into());
    }
    let version = card.get("version").and_then(Value::as_str).unwrap_or("");
    match version
        .split_once('.')
        .map(|(a, b)| (a.parse::<u32>(), b.parse::<u32>()))
    {
        Some((Ok(major), Ok(minor))) if (major, minor) <= MAX_VERSION && major >= 1 => {}
        _ => {
            return Err(format!(
                "version: {version:?}, where Teams takes 1.0 to 1.5"
            ));
        }
    }
    for key in ["body", "actions"] {
        match card.get(key) {
            None => {}
            Some(Value::Array(items)) => {
                if let Some(i) = items
                    .iter()
                    .position(|e| e.get("type").and_then(Value::as_str).is_none())
                {
                    return Err(format!("{key}[{i}]: an element without a type"));
                }
            }
            Some(_) => return Err(format!("{key}: not a list")),
        }
    }
    envelope(&card)
}

/// The Teams kind's sender.
struct TeamsSender {
    poster: Poster,
    /// Links to a job's report (`[server] public_url`): where a message over the size points.
    links: Option<super::links::Links>,
}

impl TeamsSender {
    /// What is posted for `parcel`: its stored card in the envelope, or a short card with the
    /// link when that is over the size kept; worked out once for the job's Teams deliveries.
    fn message(&self, parcel: &Parcel<'_>) -> Result<(Vec<u8>, bool), Outcome> {
        let made = parcel.memo.get_or_init(KIND, || -> Result<(Vec<u8>, bool), Outcome> {
            let card = parcel.rendered.parts.get(PART).ok_or_else(|| {
                permanent("the job's artifact has no teams card: reissue the job to render one")
            })?;
            let message = enveloped(card).map_err(|p| {
                permanent(format!("the teams card is not an Adaptive Card Teams takes: {p}"))
            })?;
            if message.len() <= MAX_MESSAGE_BYTES {
                return Ok((message, false));
            }
            let links = self.links.as_ref().ok_or_else(|| {
                permanent(format!(
                    "the teams message is {} bytes, over the {MAX_MESSAGE_BYTES} kept under Teams' limit: set [server] public_url and link_secret_env to send a short card with a link instead",
                    message.len()
                ))
            })?;
            let link = links.report(parcel.job);
            Ok((bounded(&parcel.report.title, message.len(), &link), true))
        });
        made.as_ref().clone()
    }
}

impl Sender for TeamsSender {
    fn send<'a>(
        &'a self,
        parcel: &'a Parcel<'a>,
        to: &'a DeliveryKey,
        confirm: Confirm<'a>,
    ) -> Sending<'a, Result<Outcome, NotConfirmed>> {
        Box::pin(async move {
            let env = to.destination();
            let ready = chat::url_of(env).and_then(|url| Ok((url, self.message(parcel)?)));
            let (url, (body, linked)) = match ready {
                Ok(ready) => ready,
                Err(outcome) => return Ok(outcome),
            };
            confirm().await?;
            let outcome = match self.poster.post((url, env), body, parcel.now).await {
                Ok(reply) => classify(&reply),
                Err(outcome) => outcome,
            };
            Ok(if linked { outcome.linked() } else { outcome })
        })
    }

    fn notify<'a>(&'a self, notice: &'a Notice<'a>) -> Sending<'a, Outcome> {
        Box::pin(async move {
            let url = match chat::url_of(notice.destination) {
                Ok(url) => url,
                Err(outcome) => return outcome,
            };
            let body = vec![
                json!({"type": "TextBlock", "text": notice.subject, "weight": "Bolder", "wrap": true}),
                json!({"type": "TextBlock", "text": notice.body, "wrap": true}),
            ];
            let message = envelope(&card(body, None)).unwrap_or_default();
            match self
                .poster
                .post((url, notice.destination), message, notice.now)
                .await
            {
                Ok(reply) => classify(&reply),
                Err(outcome) => outcome,
            }
        })
    }
}

/// A flow's answer, by its status.
fn classify(reply: &chat::Reply) -> Outcome {
    let code = i64::from(reply.status);
    let (class, why) = match reply.status {
        200..=299 => (
            ResponseClass::Accepted,
            format!("HTTP {code}: the workflow took the message"),
        ),
        429 => return reply.throttled("Teams"),
        408 | 425 | 500..=599 => (
            ResponseClass::Transient,
            format!("HTTP {code}: the workflow failed"),
        ),
        300..=399 => (
            ResponseClass::Permanent,
            format!("HTTP {code}: redirects are not followed"),
        ),
        400..=407 | 409..=424 | 426..=499 => (ResponseClass::Permanent, refusal(reply.status)),
        _ => (ResponseClass::Unknown, format!("HTTP {code}")),
    };
    reply.noted(Outcome::new(class, Some(code), why))
}

/// A 4xx of a flow, in words.
fn refusal(status: u16) -> String {
    let words = match status {
        400 => "the workflow refused the message as malformed",
        413 => "the message is too large for the workflow",
        401 | 403 => "the workflow's URL is not authorized (its signature is wrong or was renewed)",
        404 | 410 => "the workflow does not exist or is turned off",
        _ => "the workflow refused the message",
    };
    format!("HTTP {status}: {words}")
}

#[cfg(test)]
mod tests;
