//! Slack: a message posted to an incoming webhook whose URL is in the environment variable a
//! report's `[[report.slack]]` names (`chat.rs`). The message is the artifact's `slack` part:
//! Block Kit JSON from `templates/<template>.slack.hbs`, or the default this kind builds (the
//! title, the window in the report's timezone, its figures, the link to the whole report).
//!
//! Slack's limits hold before a post (<https://docs.slack.dev/reference/block-kit/blocks>):
//! `text` ≤ 40,000 characters, ≤ 50 blocks, a section's text ≤ 3,000 and ≤ 10 fields of ≤
//! 2,000, a header ≤ 150; and the blocks in all ≤ 12,000 characters, under the undocumented
//! `msg_blocks_too_long` seen near 13,000. A message over them goes as a short one with the
//! link; one that is not Block Kit is refused (`check` names it).
//!
//! Answers (<https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks>): 200
//! `ok` sent; 429 rate limited (Retry-After); a 4xx with its error string permanent, in words;
//! 5xx transient. One message a second per webhook unless a `[[rate_limit]]` says otherwise.

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

pub(crate) struct Slack;

/// The Slack kind's name, and its part's.
pub const KIND: DestinationKind = DestinationKind::named("slack");
const PART: &str = "slack";

/// Slack's documented limits, and dawnpost's bound on the blocks in all.
const MAX_TEXT: usize = 40_000;
const MAX_BLOCKS: usize = 50;
const MAX_SECTION_TEXT: usize = 3_000;
const MAX_FIELDS: usize = 10;
const MAX_FIELD_TEXT: usize = 2_000;
const MAX_HEADER: usize = 150;
const MAX_BLOCKS_CHARS: usize = 12_000;
/// An image block's alt text.
const MAX_ALT: usize = 2_000;

/// The block types Slack's messages take.
const BLOCK_TYPES: &[&str] = &[
    "actions",
    "context",
    "divider",
    "file",
    "header",
    "image",
    "input",
    "markdown",
    "rich_text",
    "section",
    "table",
    "video",
];

impl DestinationConfig for Slack {
    fn kind(&self) -> DestinationKind {
        KIND
    }

    fn template_part(&self) -> Option<&'static str> {
        Some(PART)
    }

    /// `[[report.slack]]`: `url_env`, `on_ambiguous`.
    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        chat::read_hooks("slack", f, errors, warnings)
    }

    /// `owner_slack = { url_env = "…" }`.
    fn read_owners(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        chat::read_owner("owner_slack", f, errors, warnings)
    }
}

impl Destination for Slack {
    fn send_target(&self, destination: &str, _relay: &SendTarget) -> SendTarget {
        chat::send_target(KIND, destination)
    }

    fn timeout(&self, settings: &Settings) -> std::time::Duration {
        settings.webhook.timeout.as_std()
    }

    fn sender(&self, build: &Build<'_>) -> Result<Box<dyn Sender>, DeliverError> {
        let timeout = build.config.settings.webhook.timeout.as_std();
        Ok(Box::new(SlackSender {
            poster: Poster::new(super::webhook::client(timeout, build.ca)?),
            links: build.links.clone(),
        }))
    }

    fn target_shown(&self, target: &str, reports: usize) -> String {
        format!(
            "slack webhook {target} ({reports} report(s); 1 message/s unless a [[rate_limit]] names it)"
        )
    }

    fn default_part(&self) -> Option<crate::report::render::DefaultPart> {
        Some((PART, default_message))
    }

    fn on_ambiguous(&self, report: &crate::config::Report, to: &str) -> Option<OnAmbiguous> {
        let hook = chat::hook(&report.destinations, KIND, to);
        Some(hook.map_or_else(OnAmbiguous::default, |h| h.on_ambiguous))
    }

    /// Slack documents one message a second per webhook, with short bursts.
    fn default_rate(&self) -> Option<(&'static str, f64, u32)> {
        Some(("slack:*", 1.0, 1))
    }

    fn invalid(
        &self,
        _: &crate::config::Report,
        rendered: &Rendered,
        _: &crate::config::Config,
    ) -> Vec<String> {
        match rendered.parts.get(PART).map(|m| checked(m)) {
            Some(Err(problem)) => vec![format!(
                "the slack message is not Block Kit Slack takes: {problem}"
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

    /// The message as it would be posted.
    fn preview(&self, s: &Shown<'_>) -> Result<Option<Preview>, String> {
        let Some(message) = s.rendered.parts.get(PART) else {
            return Ok(None);
        };
        let links = super::links::Links::from_settings(&s.config.settings.server)
            .ok()
            .flatten();
        let body = match checked(message) {
            Ok(over) if over.is_empty() => message.as_bytes().to_vec(),
            Ok(over) => match &links {
                Some(l) => bounded(&s.report.title, &over.join("; "), &l.report(s.job)),
                None => message.as_bytes().to_vec(),
            },
            Err(problem) => {
                return Err(format!(
                    "the slack message is not Block Kit Slack takes: {problem}"
                ));
            }
        };
        Ok(Some(Preview {
            size: format!(
                "slack message {}",
                crate::report::render::human_size(body.len())
            ),
            file: Some(("slack.json", body)),
            warnings: over_words(s.rendered, s.config).into_iter().collect(),
        }))
    }
}

/// What `check` and `preview` warn of a message over Slack's limits.
fn over_words(rendered: &Rendered, config: &crate::config::Config) -> Option<String> {
    let over = rendered.parts.get(PART).and_then(|m| checked(m).ok())?;
    (!over.is_empty()).then(|| {
        format!(
            "the slack message is over Slack's limits ({}): {}",
            over.join("; "),
            config.settings.server.too_large_fate("its Slack webhooks")
        )
    })
}

/// The default message: a header, the window, the figures, and the link.
fn default_message(context: &Value) -> Result<String, String> {
    let f = chat::facts(context)?;
    let mut blocks = vec![header(&f.title)];
    let mut when = escape(&format!("{} · {}", f.date, f.window));
    if f.stale {
        when.push_str(" · the data was not ready by the deadline: this is what there was");
    }
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": when}]}));
    if !f.figures.is_empty() {
        let fields: Vec<Value> = (f.figures.iter().take(MAX_FIELDS))
            .map(|(label, value)| {
                let text = cut(
                    &format!("*{}*\n{}", escape(label), escape(value)),
                    MAX_FIELD_TEXT,
                );
                json!({"type": "mrkdwn", "text": text})
            })
            .collect();
        blocks.push(json!({"type": "section", "fields": fields}));
    }
    for (alt, url) in f.charts.iter().take(MAX_BLOCKS - 6) {
        let image = json!({"type": "image", "image_url": url, "alt_text": cut(alt, MAX_ALT)});
        blocks.push(image);
    }
    if let Some(link) = &f.link {
        let text = format!("<{link}|Open the whole report>");
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}));
    }
    let text = cut(&format!("{} — {}", f.title, f.window), MAX_TEXT);
    serde_json::to_string(&json!({"text": text, "blocks": blocks})).map_err(|e| e.to_string())
}

fn header(title: &str) -> Value {
    json!({"type": "header", "text": {"type": "plain_text", "text": cut(title, MAX_HEADER), "emoji": true}})
}

/// A message in place of one over Slack's limits: the title, why, and the link.
fn bounded(title: &str, over: &str, link: &str) -> Vec<u8> {
    let words = chat::over_limits_words("Slack", over);
    let section = format!("{} <{link}|Open the whole report>", escape(&words));
    let message = json!({
        "text": cut(&format!("{title}: {words} {link}"), MAX_TEXT),
        "blocks": [header(title), {"type": "section", "text": {"type": "mrkdwn", "text": cut(&section, MAX_SECTION_TEXT)}}],
    });
    serde_json::to_vec(&message).unwrap_or_default()
}

/// Slack's mrkdwn escapes: `&`, `<` and `>` only.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// At most `max` characters, an ellipsis ending one that was cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if s.chars().count() > max => format!("{}…", &s[..at]),
        _ => s.to_string(),
    }
}

/// Whether `message` is a message Slack takes: `Err` when it is not (not JSON, no text and no
/// blocks, a block of no known type), else the limits it passes (none: it is sent as it is).
fn checked(message: &str) -> Result<Vec<String>, String> {
    let v: Value = serde_json::from_str(message).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(m) = &v else {
        return Err("not a JSON object".into());
    };
    let mut over = Vec::new();
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let text = match m.get("text") {
        None => 0,
        Some(Value::String(s)) => s.chars().count(),
        Some(_) => return Err("text: not a string".into()),
    };
    if text > MAX_TEXT {
        over.push(format!("text: {text} characters, over {MAX_TEXT}"));
    }
    let blocks = match m.get("blocks") {
        None => &Vec::new(),
        Some(Value::Array(b)) => b,
        Some(_) => return Err("blocks: not a list".into()),
    };
    if text == 0 && blocks.is_empty() {
        return Err("no text and no blocks (Slack answers no_text)".into());
    }
    if blocks.len() > MAX_BLOCKS {
        over.push(format!("{} blocks, over {MAX_BLOCKS}", blocks.len()));
    }
    for (i, b) in blocks.iter().enumerate() {
        let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
        if !BLOCK_TYPES.contains(&kind) {
            return Err(format!(
                "blocks[{i}].type: {kind:?} is not a block type Slack takes"
            ));
        }
        match kind {
            "header" => {
                let n = chars(&b["text"]["text"]);
                if b["text"]["type"] != "plain_text" || n == 0 {
                    return Err(format!(
                        "blocks[{i}].text: a header takes a non-empty plain_text"
                    ));
                }
                if n > MAX_HEADER {
                    over.push(format!(
                        "blocks[{i}].text.text: {n} characters, over {MAX_HEADER} for a header"
                    ));
                }
            }
            "section" => section(&mut over, i, b)?,
            _ => {}
        }
    }
    let all = serde_json::to_string(blocks).map_or(0, |s| s.chars().count());
    if all > MAX_BLOCKS_CHARS {
        over.push(format!(
            "blocks: {all} characters in all, over {MAX_BLOCKS_CHARS}"
        ));
    }
    Ok(over)
}

fn section(over: &mut Vec<String>, i: usize, b: &Value) -> Result<(), String> {
    let text = b["text"]["text"].as_str().map(|s| s.chars().count());
    let fields = b.get("fields").and_then(Value::as_array);
    if text.is_none() && fields.is_none() {
        return Err(format!("blocks[{i}]: a section takes a text or fields"));
    }
    if let Some(n) = text.filter(|n| *n > MAX_SECTION_TEXT) {
        over.push(format!(
            "blocks[{i}].text.text: {n} characters, over {MAX_SECTION_TEXT} for a section"
        ));
    }
    let fields = fields.map_or(&[][..], Vec::as_slice);
    if fields.len() > MAX_FIELDS {
        over.push(format!(
            "blocks[{i}].fields: {} fields, over {MAX_FIELDS}",
            fields.len()
        ));
    }
    for (j, field) in fields.iter().enumerate() {
        let n = field["text"].as_str().map_or(0, |s| s.chars().count());
        if n > MAX_FIELD_TEXT {
            over.push(format!(
                "blocks[{i}].fields[{j}].text: {n} characters, over {MAX_FIELD_TEXT}"
            ));
        }
    }
    Ok(())
}

/// The Slack kind's sender.
struct SlackSender {
    poster: Poster,
    /// Links to a job's report (`[server] public_url`): where a message over the limits points.
    links: Option<super::links::Links>,
}

impl SlackSender {
    /// What is posted for `parcel`: its stored message, or a short one with the link when the
    /// stored one passes Slack's limits; worked out once for the job's Slack deliveries.
    fn message(&self, parcel: &Parcel<'_>) -> Result<(Vec<u8>, bool), Outcome> {
        let made = parcel.memo.get_or_init(KIND, || -> Result<(Vec<u8>, bool), Outcome> {
            let message = parcel.rendered.parts.get(PART).ok_or_else(|| {
                permanent("the job's artifact has no slack message: reissue the job to render one")
            })?;
            let over = checked(message)
                .map_err(|p| permanent(format!("the slack message is not Block Kit Slack takes: {p}")))?;
            if over.is_empty() {
                return Ok((message.as_bytes().to_vec(), false));
            }
            let links = self.links.as_ref().ok_or_else(|| {
                permanent(format!(
                    "the slack message is over Slack's limits ({}): set [server] public_url and link_secret_env to send a short message with a link instead",
                    over.join("; ")
                ))
            })?;
            let link = links.report(parcel.job);
            Ok((bounded(&parcel.report.title, &over.join("; "), &link), true))
        });
        made.as_ref().clone()
    }
}

impl Sender for SlackSender {
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
            let text = format!("*{}*\n{}", escape(notice.subject), escape(notice.body));
            let body =
                serde_json::to_vec(&json!({"text": cut(&text, MAX_TEXT)})).unwrap_or_default();
            match self
                .poster
                .post((url, notice.destination), body, notice.now)
                .await
            {
                Ok(reply) => classify(&reply),
                Err(outcome) => outcome,
            }
        })
    }
}

/// Slack's answer, by its status and its error string.
fn classify(reply: &chat::Reply) -> Outcome {
    let code = i64::from(reply.status);
    let error = reply.body.trim();
    let (class, why) = match reply.status {
        200..=299 => (ResponseClass::Accepted, "Slack answered ok".to_string()),
        429 => return reply.throttled("Slack"),
        408 | 425 | 500..=599 => (
            ResponseClass::Transient,
            format!("HTTP {code}: Slack failed ({})", words_of(error)),
        ),
        300..=399 => (
            ResponseClass::Permanent,
            format!("HTTP {code}: redirects are not followed"),
        ),
        400..=407 | 409..=424 | 426..=499 => (
            ResponseClass::Permanent,
            format!("HTTP {code}: {}", words_of(error)),
        ),
        _ => (ResponseClass::Unknown, format!("HTTP {code}")),
    };
    reply.noted(Outcome::new(class, Some(code), why))
}

/// Slack's error string in words, the string itself after them.
fn words_of(error: &str) -> String {
    let words = match error {
        "invalid_payload" => "Slack refused the message as malformed",
        "no_text" => "Slack refused a message with no text",
        "too_many_attachments" => "the message has too many attachments",
        "user_not_found" => "the webhook's user no longer exists",
        "action_prohibited" => "the workspace's administrators prohibit this post",
        "invalid_token" => "the webhook's token is invalid or revoked",
        "channel_not_found" => "the webhook's channel no longer exists",
        "no_service" => "the webhook is disabled, removed or invalid",
        "no_service_id" => "the webhook's URL is incomplete",
        "no_team" => "the webhook's workspace no longer exists",
        "team_disabled" => "the webhook's workspace is disabled",
        "channel_is_archived" => "the webhook's channel is archived",
        "posting_to_general_channel_denied" => "only administrators may post to this channel",
        "msg_blocks_too_long" => "the message's blocks are too long for Slack",
        "invalid_blocks" | "invalid_blocks_format" => "Slack refused the message's blocks",
        "rollup_error" => "Slack had an internal error",
        "" => return "no reason given".to_string(),
        other => return format!("Slack said {:?}", super::bounded(other.to_string(), 64)),
    };
    format!("{words} ({error})")
}

#[cfg(test)]
mod tests;
