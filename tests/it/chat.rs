//! Slack and Teams destinations end to end, against peers on 127.0.0.1 that answer as the
//! services document (`common::chat_peers`): the default message and a template's, stored in
//! the artifact and posted as stored; the services' answers classified; a message over the
//! limits sent as a short one with the link; an ambiguous post held for an operator or retried
//! as configured; Slack's one message a second per webhook; no URL in the ledger. Every card is
//! also parsed by Microsoft's `adaptivecards` package. On SQLite, and on PostgreSQL when it is
//! configured.

use crate::common;
use common::{dk, jk};

use std::sync::Arc;
use std::time::Duration;

use common::chat_peers::{Answer, ChatPeer, Script, Service};
use common::{Project, TestLedger, run_date};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, DeliveryState, Via};

/// Held by each test that sets the variables its webhooks are named by: the SQLite and the
/// PostgreSQL runs of a test set them to their own peers' URLs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const DATE: &str = "2026-11-30";
const LINK_ENV: &str = "DAWNPOST_TEST_CHAT_LINK_KEY";
const LINK_KEY: &str = "chat-link-key-0123456789abcdef0123456789";

/// Settings: short retries, a 1 s webhook timeout, and links under `public_url` when `linked`.
fn settings(linked: bool) -> String {
    let server = match linked {
        true => format!(
            "[server]\npublic_url = \"https://reports.example/\"\nlink_secret_env = \"{LINK_ENV}\"\n"
        ),
        false => String::new(),
    };
    format!(
        "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"file\"\n\
         [pool]\nconcurrency = 8\nlease = \"30s\"\ndrain_timeout = \"2s\"\n\
         [retry]\nbase = \"100ms\"\ncap = \"300ms\"\nmax_retry_after = \"3s\"\nmax_attempts = 3\nmax_age = \"1h\"\n\
         [webhook]\ntimeout = \"1s\"\n{server}"
    )
}

/// A report of the shipped template and sample with figures, sending to `chat` (TOML).
fn report(id: &str, chat: &str) -> String {
    format!(
        r#"
[[report]]
id = "{id}"
title = "Warehouse 17 — nightly"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
email = []
figures = [
  {{ label = "Orders shipped", path = "data.summary.orders_shipped" }},
  {{ label = "Late", path = "data.summary.orders_late" }},
]
{chat}
"#
    )
}

/// Sets each `(variable, url)`, and the link key.
fn set_env(vars: &[(&str, String)]) {
    for (name, value) in vars {
        // SAFETY: each variable is this file's own, set under SERIAL, before the run that
        // reads it.
        unsafe { std::env::set_var(name, value) };
    }
    unsafe { std::env::set_var(LINK_ENV, LINK_KEY) };
}

async fn run(p: &Project, t: &TestLedger) -> dawnpost::node::runner::RunOnceSummary {
    run_date(&p.load(), &t.ledger, DATE, Duration::from_secs(60)).await
}

fn no_script() -> Script {
    Arc::new(|_: &str, _| None)
}

/// The JSON the artifact stores as the job's `part`.
async fn stored_part(p: &Project, t: &TestLedger, job: &str, part: &str) -> String {
    let job = t
        .ledger
        .jobs()
        .get(&jk(job))
        .await
        .expect("job")
        .expect("a job");
    let artifact = job.artifact.expect("an artifact");
    assert!(
        artifact.parts.iter().any(|n| n == part),
        "{:?}",
        artifact.parts
    );
    let store = dawnpost::report::artifact::ArtifactStore::open("file://var/artifacts", p.root())
        .expect("store");
    let rendered = store.read_rendered(&artifact).await.expect("read back");
    rendered.parts[part].clone()
}

/// What `adaptivecards` finds wrong in each file (a card, or a message carrying one).
fn card_errors(files: &[std::path::PathBuf]) -> Vec<String> {
    let found = common::checkers::adaptive_cards(files);
    found
        .iter()
        .flat_map(|(file, errors)| errors.iter().map(move |e| format!("{file}: {e}")))
        .collect()
}

async fn default_messages_are_stored_posted_and_answered_as_documented(t: &TestLedger) {
    // The variables name webhooks of this test's own peers: one test sets them at a time.
    let _serial = SERIAL.lock().await;
    let script: Script = Arc::new(|path: &str, n| match path {
        "archived" => Some(Answer::new(410, "channel_is_archived")),
        "removed" => Some(Answer::new(404, "no_service")),
        "busy" if n == 1 => Some(Answer::new(429, "rate_limited").retry_after("1")),
        _ => None,
    });
    let slack = ChatPeer::start(Service::Slack, script).await;
    // A flow that takes less than dawnpost sends refuses it as Teams does, with 413.
    let small: Script = Arc::new(|path: &str, _| {
        (path == "small").then(|| Answer::new(413, r#"{"error":{"code":"MessageTooLarge"}}"#))
    });
    let teams = ChatPeer::start(Service::Teams, small).await;
    set_env(&[
        ("DAWNPOST_TEST_TEAMS_SMALL", teams.url("small")),
        ("DAWNPOST_TEST_SLACK_OPS", slack.url("ops")),
        ("DAWNPOST_TEST_SLACK_ARCHIVED", slack.url("archived")),
        ("DAWNPOST_TEST_SLACK_REMOVED", slack.url("removed")),
        ("DAWNPOST_TEST_SLACK_BUSY", slack.url("busy")),
        ("DAWNPOST_TEST_TEAMS_OPS", teams.url("ops")),
    ]);
    let chat = [
        "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_OPS\"",
        "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_ARCHIVED\"",
        "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_REMOVED\"",
        "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_BUSY\"",
        "[[report.teams]]\nurl_env = \"DAWNPOST_TEST_TEAMS_OPS\"",
        "[[report.teams]]\nurl_env = \"DAWNPOST_TEST_TEAMS_SMALL\"",
    ]
    .join("\n");
    let p = Project::new(&report("chat", &chat));
    p.write("config/dawnpost.toml", &settings(true));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 3, "three quarantined: {summary:?}");

    // Posted as stored: the message is the artifact's part, byte for byte.
    let job = format!("chat:{DATE}");
    let posted = slack.hits_for("ops");
    assert_eq!(posted.len(), 1);
    let stored = stored_part(&p, t, &job, "slack").await;
    assert_eq!(posted[0].body, stored.as_bytes());
    let message = posted[0].json();
    assert_eq!(
        message["blocks"][0]["text"]["text"],
        "Warehouse 17 — nightly"
    );
    let figures = message["blocks"][2]["fields"].to_string();
    assert!(
        figures.contains("*Orders shipped*\\n1,842") && figures.contains("*Late*\\n23"),
        "{figures}"
    );
    let link = format!("<https://reports.example/r/{job}?s=");
    assert!(
        message["blocks"][3]["text"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(&link)),
        "{message}"
    );
    assert!(
        message["text"]
            .as_str()
            .is_some_and(|t| t.contains("Sunday 29 November 2026 (Europe/Berlin)"))
    );

    let busy = slack.hits_for("busy");
    assert_eq!(busy.len(), 2, "a 429 is retried");
    let waited = busy[1].at - busy[0].at;
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(6),
        "{waited:?}"
    );

    let delivery = |env: &str, kind: &str| dk(&format!("{job}/{kind}:{env}"));
    let l = &t.ledger;
    for (env, kind, words) in [
        (
            "DAWNPOST_TEST_SLACK_ARCHIVED",
            "slack",
            "HTTP 410: the webhook's channel is archived (channel_is_archived)",
        ),
        (
            "DAWNPOST_TEST_SLACK_REMOVED",
            "slack",
            "HTTP 404: the webhook is disabled, removed or invalid (no_service)",
        ),
        (
            "DAWNPOST_TEST_TEAMS_SMALL",
            "teams",
            "HTTP 413: the message is too large for the workflow",
        ),
    ] {
        let d = l
            .deliveries()
            .get(&delivery(env, kind))
            .await
            .expect("get")
            .expect("delivery");
        assert_eq!(d.state, DeliveryState::Quarantined, "{env}");
        assert!(
            d.last_error.as_deref().unwrap_or("").contains(words),
            "{:?}",
            d.last_error
        );
        assert_eq!(
            l.deliveries()
                .attempts(&d.key)
                .await
                .expect("attempts")
                .len(),
            1,
            "permanent: not retried"
        );
    }
    for (env, kind) in [
        ("DAWNPOST_TEST_SLACK_BUSY", "slack"),
        ("DAWNPOST_TEST_TEAMS_OPS", "teams"),
    ] {
        let d = l
            .deliveries()
            .get(&delivery(env, kind))
            .await
            .expect("get")
            .expect("delivery");
        assert_eq!(d.state, DeliveryState::Sent, "{env}");
    }

    // Teams: the stored card, in its envelope, answered 202; parsed by Microsoft's parser.
    let posted = teams.hits_for("ops");
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].status, 202);
    let message = posted[0].json();
    let card = &message["attachments"][0]["content"];
    let stored: serde_json::Value =
        serde_json::from_str(&stored_part(&p, t, &job, "teams").await).expect("a card");
    assert_eq!(card, &stored);
    assert_eq!(
        card["body"][2]["facts"][0],
        serde_json::json!({"title": "Orders shipped", "value": "1,842"})
    );
    let file = p.root().join("teams-message.json");
    std::fs::write(&file, &posted[0].body).expect("write");
    assert_eq!(card_errors(&[file]), Vec::<String>::new());

    // The ledger names each destination by its variable, never by its URL.
    let show = dawnpost::views::history::JobHistory::load(l, &jk(&job))
        .await
        .expect("show")
        .expect("a job");
    let shown = show.render_text();
    assert!(
        shown.contains("slack:DAWNPOST_TEST_SLACK_ARCHIVED"),
        "{shown}"
    );
    assert!(shown.contains("channel_is_archived"), "{shown}");
    for peer in [&slack, &teams] {
        assert!(
            !shown.contains(&peer.port().to_string()),
            "a URL shown: {shown}"
        );
    }
    let dlq = dawnpost::views::history::Dlq::load(l)
        .await
        .expect("dlq")
        .render_text();
    assert!(
        dlq.contains("slack DAWNPOST_TEST_SLACK_REMOVED")
            || dlq.contains("DAWNPOST_TEST_SLACK_REMOVED"),
        "{dlq}"
    );
    assert!(!dlq.contains(&slack.port().to_string()), "{dlq}");
}

async fn an_ambiguous_post_is_held_or_retried_as_configured(t: &TestLedger) {
    // The variables name webhooks of this test's own peers: one test sets them at a time.
    let _serial = SERIAL.lock().await;
    // Both webhooks answer only after the 1 s timeout: the post may have arrived.
    let script: Script =
        Arc::new(|_: &str, _| Some(Answer::new(200, "ok").after(Duration::from_secs(3))));
    let slack = ChatPeer::start(Service::Slack, script).await;
    set_env(&[
        ("DAWNPOST_TEST_SLACK_HELD", slack.url("held")),
        ("DAWNPOST_TEST_SLACK_AGAIN", slack.url("again")),
    ]);
    let chat = "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_HELD\"\n\
                [[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_AGAIN\"\non_ambiguous = \"retry\"\n";
    let p = Project::new(&report("unsure", chat));
    p.write("config/dawnpost.toml", &settings(true));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");
    slack.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(
        slack.hits_for("held").len(),
        1,
        "held for an operator, not posted again"
    );
    assert_eq!(
        slack.hits_for("again").len(),
        3,
        "retried up to max_attempts"
    );

    let l = &t.ledger;
    let held = dk(&format!("unsure:{DATE}/slack:DAWNPOST_TEST_SLACK_HELD"));
    let attempts = l.deliveries().attempts(&held).await.expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].class, ResponseClass::Ambiguous);
    let reason = attempts[0].reason.clone().unwrap_or_default();
    assert!(
        reason.contains("on_ambiguous = \"quarantine\"") && reason.contains("redrive"),
        "{reason}"
    );
    let again = dk(&format!("unsure:{DATE}/slack:DAWNPOST_TEST_SLACK_AGAIN"));
    let attempts = l.deliveries().attempts(&again).await.expect("attempts");
    assert_eq!(attempts.len(), 3);
    let first = attempts[0].reason.clone().unwrap_or_default();
    assert!(
        first.contains("on_ambiguous = \"retry\"") && first.contains("twice"),
        "{first}"
    );
    let shown = dawnpost::views::history::JobHistory::load(l, &jk(&format!("unsure:{DATE}")))
        .await
        .expect("show")
        .expect("a job")
        .render_text();
    assert!(shown.contains("on_ambiguous = \"quarantine\""), "{shown}");

    // The operator saw it did not arrive, and redrives it: it is posted once more.
    let audit = Audit::new("ops", "not in the channel", Via::Cli).expect("audit");
    l.deliveries()
        .redrive(&held, &audit, chrono::Utc::now())
        .await
        .expect("redrive");
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");
    assert_eq!(slack.hits_for("held").len(), 2);
}

async fn a_message_over_the_limits_goes_short_with_the_link(t: &TestLedger) {
    // The variables name webhooks of this test's own peers: one test sets them at a time.
    let _serial = SERIAL.lock().await;
    let slack = ChatPeer::start(Service::Slack, no_script()).await;
    let teams = ChatPeer::start(Service::Teams, no_script()).await;
    set_env(&[
        ("DAWNPOST_TEST_SLACK_BIG", slack.url("big")),
        ("DAWNPOST_TEST_TEAMS_BIG", teams.url("big")),
    ]);
    let chat = "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_BIG\"\n\
                [[report.teams]]\nurl_env = \"DAWNPOST_TEST_TEAMS_BIG\"\n";
    let p = Project::new(&report("big", chat));
    // A template of 60 blocks, and a card of 40 KB: over Slack's 50 blocks and Teams' bound.
    let blocks: Vec<String> = (0..60)
        .map(|_| {
            r#"{"type": "section", "text": {"type": "mrkdwn", "text": "{{report.title}}"}}"#
                .to_string()
        })
        .collect();
    p.write(
        "templates/daily_ops.slack.hbs",
        &format!("{{\"text\": \"x\", \"blocks\": [{}]}}", blocks.join(",")),
    );
    let texts: Vec<String> = (0..400)
        .map(|i| format!(r#"{{"type": "TextBlock", "text": "line {i} of {{{{report.title}}}} with padding to be long"}}"#))
        .collect();
    p.write(
        "templates/daily_ops.teams.hbs",
        &format!(
            r#"{{"type": "AdaptiveCard", "version": "1.5", "body": [{}]}}"#,
            texts.join(",")
        ),
    );
    p.write("config/dawnpost.toml", &settings(true));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let job = format!("big:{DATE}");
    let link = format!("https://reports.example/r/{job}?s=");

    let posted = slack.hits_for("big");
    assert_eq!((posted.len(), posted[0].status), (1, 200));
    let message = posted[0].json();
    assert_eq!(message["blocks"].as_array().map(Vec::len), Some(2));
    let words = message["blocks"][1]["text"]["text"].as_str().unwrap_or("");
    assert!(
        words.contains("60 blocks, over 50") && words.contains(&link),
        "{words}"
    );
    // The artifact keeps the template's message as it rendered.
    let stored = stored_part(&p, t, &job, "slack").await;
    assert!(stored.len() > posted[0].body.len());

    let posted = teams.hits_for("big");
    assert_eq!((posted.len(), posted[0].status), (1, 202));
    assert!(posted[0].body.len() < 24 * 1024);
    let card = &posted[0].json()["attachments"][0]["content"];
    assert!(
        card["actions"][0]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with(&link)),
        "{card}"
    );
    let file = p.root().join("bounded-card.json");
    std::fs::write(&file, &posted[0].body).expect("write");
    assert_eq!(card_errors(&[file]), Vec::<String>::new());

    // Without public_url there is no link to send: refused before posting, saying what to set.
    let q = Project::new(&report("nolink", chat));
    for f in ["slack", "teams"] {
        let from = p.root().join(format!("templates/daily_ops.{f}.hbs"));
        q.write(
            &format!("templates/daily_ops.{f}.hbs"),
            &std::fs::read_to_string(from).expect("template"),
        );
    }
    q.write("config/dawnpost.toml", &settings(false));
    let summary = run(&q, t).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");
    assert_eq!(slack.hits_for("big").len(), 1, "nothing more posted");
    let d = t
        .ledger
        .deliveries()
        .get(&dk(&format!("nolink:{DATE}/slack:DAWNPOST_TEST_SLACK_BIG")))
        .await
        .expect("get")
        .expect("d");
    let why = d.last_error.unwrap_or_default();
    assert!(
        why.contains("over Slack's limits") && why.contains("public_url"),
        "{why}"
    );
}

async fn slack_posts_one_message_a_second_per_webhook(t: &TestLedger) {
    // The variables name webhooks of this test's own peers: one test sets them at a time.
    let _serial = SERIAL.lock().await;
    let slack = ChatPeer::start(Service::Slack, no_script()).await;
    set_env(&[("DAWNPOST_TEST_SLACK_PACED", slack.url("paced"))]);
    let chat = "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_SLACK_PACED\"\n";
    let reports: String = (1..=3)
        .map(|i| report(&format!("paced-{i}"), chat))
        .collect();
    let p = Project::new(&reports);
    p.write("config/dawnpost.toml", &settings(true));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let hits = slack.hits_for("paced");
    assert_eq!(hits.len(), 3, "each posted once, none turned back by Slack");
    let mut at: Vec<_> = hits.iter().map(|h| h.at).collect();
    at.sort();
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(900) && gap < Duration::from_secs(5),
            "{gap:?}"
        );
    }
}

on_both_backends!(
    default_messages_are_stored_posted_and_answered_as_documented,
    an_ambiguous_post_is_held_or_retried_as_configured,
    a_message_over_the_limits_goes_short_with_the_link,
    slack_posts_one_message_a_second_per_webhook,
);
