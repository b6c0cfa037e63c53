//! Slack and Teams everywhere a destination appears besides the send (`chat.rs`): owners told
//! in chat, `[[family.slack]]` rows that leave it out, `check` and `preview` through the
//! binary (an unset variable, a message over the limits, the messages as posted, cards parsed
//! by Microsoft's `adaptivecards`), `plan`, and the link a chat message carries served by the
//! daemon's server.

use crate::common;

use std::sync::Arc;

use common::chat_peers::{ChatPeer, Service};
use common::fixtures::{destinations, params, ready_jobs, t0};
use common::{Project, TestLedger, at, jk, run_in, text};
use dawnpost::report::render::Rendered;

/// Held by each test that sets the variables its webhooks are named by: the SQLite and the
/// PostgreSQL runs of a test set them to their own peers' URLs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// The shipped report with figures and `chat`.
fn report(chat: &str) -> String {
    format!(
        "{}figures = [{{ label = \"Late\", path = \"data.summary.orders_late\" }}]\n{chat}",
        common::report("warehouse-17", "0 30 6 * * *", "Europe/Berlin")
    )
}

async fn an_owner_is_told_in_slack_and_teams(t: &TestLedger) {
    // The variables name webhooks of this test's own peers: one test sets them at a time.
    let _serial = SERIAL.lock().await;
    let slack = ChatPeer::start(Service::Slack, Arc::new(|_: &str, _| None)).await;
    let teams = ChatPeer::start(Service::Teams, Arc::new(|_: &str, _| None)).await;
    // SAFETY: this file's own variables, set under SERIAL, before the round that reads them.
    unsafe {
        std::env::set_var("DAWNPOST_TEST_OWNER_SLACK", slack.url("owners"));
        std::env::set_var("DAWNPOST_TEST_OWNER_TEAMS", teams.url("owners"));
    }
    let owners = "deliver_by = \"08:00\"\n\
                  owner_slack = { url_env = \"DAWNPOST_TEST_OWNER_SLACK\" }\n\
                  owner_teams = { url_env = \"DAWNPOST_TEST_OWNER_TEAMS\" }\n";
    let p = Project::new(&format!(
        "{}{owners}",
        common::report("owned", "0 30 6 30 11 *", "UTC")
            .replace("email = [\"ops@example.com\"]", "email = []")
    ));
    let config = p.load();
    let clock = dawnpost::ManualClock::new(at(2026, 11, 30, 8, 0));
    let catalog = dawnpost::report::catalog::Catalog::load(&config).expect("catalog");
    let notifier = dawnpost::services::notifier::Notifier::new(
        &config,
        (t.ledger.clone(), catalog, Arc::new(clock.clone())),
        Arc::default(),
        Default::default(),
    )
    .expect("notifier");
    let round = notifier.run_once().await.expect("round");
    assert_eq!((round.messages, round.sent), (1, 2), "{round:?}");
    let message = slack.hits_for("owners")[0].json();
    let said = message["text"].as_str().unwrap_or("");
    assert!(said.contains("owned") && said.contains("late"), "{said}");
    let card = teams.hits_for("owners")[0].json();
    assert_eq!(card["attachments"][0]["content"]["type"], "AdaptiveCard");
    let sends = (t.ledger.notices().sends_of("owned:2026-11-30/late").await).expect("sends");
    let mut sent: Vec<String> = sends.iter().map(|s| s.key.clone()).collect();
    sent.sort();
    assert_eq!(
        sent,
        [
            "owned:2026-11-30/late/slack:DAWNPOST_TEST_OWNER_SLACK",
            "owned:2026-11-30/late/teams:DAWNPOST_TEST_OWNER_TEAMS"
        ]
    );
    let file = p.root().join("owner-card.json");
    std::fs::write(&file, &teams.hits_for("owners")[0].body).expect("write");
    let found = common::checkers::adaptive_cards(&[file]);
    assert!(
        found.iter().all(|(_, errors)| errors.is_empty()),
        "{found:?}"
    );
}

/// The link a chat message carries (`/r/{job}?s=…`, signed over the job) opens that job's
/// report; a forged or another job's signature opens nothing.
async fn a_report_link_opens_its_jobs_report(t: &TestLedger) {
    let s = common::ops_server::start(t).await;
    let job = "warehouse-17:2026-11-29";
    ready_jobs(t, &[job]).await;
    let l = &t.ledger;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let rendered = Rendered {
        html: "<html><body><h1>Stock at warehouse 17</h1><img src=\"cid:chart-late@dawnpost\" alt=\"Late\"></body></html>".into(),
        text: "Stock at warehouse 17".into(),
        csv: None,
        parts: [("slack".to_string(), "{\"text\": \"x\"}".to_string())].into(),
        images: [("late".to_string(), b"\x89PNG not really".to_vec())].into(),
        xlsx: None,
    };
    let (artifact, _) = (s.artifacts)
        .write("warehouse-17", "2026-11-29", &Arc::new(rendered))
        .await
        .expect("write");
    (l.jobs().rendered(
        &leased[0].lease,
        &artifact,
        &destinations(job, &["a@x.example"]),
        t0(),
    ))
    .await
    .expect("rendered");
    let links = common::ops_server::links();
    let link = links.report(&jk(job));
    let path = link
        .strip_prefix(common::ops_server::LINK_BASE)
        .expect("under the base");
    let get = |path: String| {
        let http = s.http.clone();
        let url = format!("{}{path}", s.base);
        async move {
            let r = http.get(url).send().await.expect("get");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    let (status, body) = get(path.to_string()).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Stock at warehouse 17"), "{body}");
    // Its chart, by the link the report's own page shows it by.
    let chart = links.chart(&jk(job), "late");
    let chart_path = chart
        .strip_prefix(common::ops_server::LINK_BASE)
        .expect("under the base");
    assert!(body.contains(&chart_path.replace('&', "&amp;")), "{body}");
    let r = s
        .http
        .get(format!("{}{chart_path}", s.base))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(
        r.bytes().await.expect("bytes").as_ref(),
        b"\x89PNG not really"
    );
    let none = links.chart(&jk(job), "early");
    let none = none
        .strip_prefix(common::ops_server::LINK_BASE)
        .unwrap_or_default();
    assert_eq!(get(none.to_string()).await.0, 404, "no such chart");
    let forged = format!("{}{}", &path[..path.len() - 4], "0000");
    assert_eq!(get(forged).await.0, 404);
    let other = links.report(&jk("warehouse-17:2026-11-28"));
    let other = other.rsplit("s=").next().unwrap_or("");
    assert_eq!(get(format!("/r/{job}?s={other}")).await.0, 404);
    // An artifact's own link is no job link.
    let artifact_link = links.link(
        &jk(job),
        &artifact.sha256,
        dawnpost::delivery::links::Part::Html,
    );
    let sig = artifact_link.rsplit("s=").next().unwrap_or("");
    assert_eq!(get(format!("/r/{job}?s={sig}")).await.0, 404);
    s.cancel.cancel();
}

crate::on_both_backends!(
    an_owner_is_told_in_slack_and_teams,
    a_report_link_opens_its_jobs_report
);

#[test]
fn a_family_row_that_leaves_its_webhook_empty_has_no_slack_destination() {
    let p = Project::new(
        r#"
[[family]]
id = "site-{{row.id}}"
rows = { kind = "csv", path = "config/sites.csv" }
title = "Site {{row.id}}"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
email = []
[[family.slack]]
url_env = "{{row.slack_env}}"
on_ambiguous = "retry"
"#,
    );
    p.write("config/sites.csv", "id,slack_env\n1,SLACK_SITE_1\n2,\n");
    let check = run_in(p.root(), &["check"]);
    let shown = text(&check);
    assert_eq!(check.status.code(), Some(0), "{shown}");
    let line = |id: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        line("site-1 ").contains("destinations: 0 email, 0 webhook, 1 slack, 0 teams"),
        "{shown}"
    );
    assert!(line("site-2 ").contains("0 slack"), "{shown}");
    let config = p.load();
    let report = |id: &str| {
        config
            .reports
            .iter()
            .find(|r| r.id.as_str() == id)
            .expect("a report")
    };
    let slack = dawnpost::delivery::slack::KIND;
    assert_eq!(
        report("site-1").destinations.to(slack),
        ["SLACK_SITE_1"],
        "{shown}"
    );
    assert!(report("site-2").destinations.to(slack).is_empty());
}

#[test]
fn check_and_preview_show_the_messages_as_they_would_be_posted() {
    let chat = "[[report.slack]]\nurl_env = \"DAWNPOST_TEST_UNSET_SLACK\"\n\
                [[report.teams]]\nurl_env = \"DAWNPOST_TEST_UNSET_TEAMS\"\n";
    let p = Project::new(&report(chat));
    // 51 blocks: over Slack's 50.
    let blocks = vec![r#"{"type": "divider"}"#; 51].join(",");
    p.write(
        "templates/daily_ops.slack.hbs",
        &format!("{{\"text\": \"{{{{report.title}}}}\", \"blocks\": [{blocks}]}}"),
    );
    let check = run_in(p.root(), &["check"]);
    let said = text(&check);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(said.contains("report \"warehouse-17\": slack[0].url_env: environment variable DAWNPOST_TEST_UNSET_SLACK is not set here"), "{said}");
    assert!(
        said.contains("the slack message is over Slack's limits (51 blocks, over 50)"),
        "{said}"
    );
    assert!(
        said.contains("cannot be sent it: set [server] public_url"),
        "{said}"
    );

    let out = p.root().join("preview");
    let preview = run_in(
        p.root(),
        &[
            "preview",
            "warehouse-17",
            "--date",
            "2026-11-30",
            "--out",
            "preview",
        ],
    );
    assert_eq!(preview.status.code(), Some(0), "{}", text(&preview));
    let slack: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("warehouse-17-2026-11-30.slack.json"))
            .expect("the slack message"),
    )
    .expect("JSON");
    assert_eq!(
        slack["blocks"].as_array().map(Vec::len),
        Some(51),
        "as the template made it: no link to bound it with"
    );
    let teams = out.join("warehouse-17-2026-11-30.teams.json");
    let message: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&teams).expect("the teams message"))
            .expect("JSON");
    assert_eq!(
        message["type"], "message",
        "the card in its envelope, as posted"
    );
    assert_eq!(
        message["attachments"][0]["content"]["body"][2]["facts"][0]["value"],
        "23"
    );
    let found = common::checkers::adaptive_cards(&[teams]);
    assert!(
        found.iter().all(|(_, errors)| errors.is_empty()),
        "{found:?}"
    );
    let sizes = text(&preview);
    assert!(
        sizes.contains("slack message") && sizes.contains("teams message"),
        "{sizes}"
    );
}

/// A bulk redrive picks out one chat webhook's dead letters by its variable, as `dlq` groups
/// them; the dry run shows the variable, never the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_redrive_picks_one_webhook_by_its_variable() {
    let slack = ChatPeer::start(
        Service::Slack,
        Arc::new(|path: &str, _| match path {
            "archived" => Some(common::chat_peers::Answer::new(410, "channel_is_archived")),
            _ => Some(common::chat_peers::Answer::new(404, "no_service")),
        }),
    )
    .await;
    let p = Project::new(&report(
        "[[report.slack]]\nurl_env = \"BULK_SLACK_ARCHIVED\"\n[[report.slack]]\nurl_env = \"BULK_SLACK_REMOVED\"\n",
    ));
    let run = |args: &[&str]| {
        let out = common::daemon::command(&p, args)
            .env("BULK_SLACK_ARCHIVED", slack.url("archived"))
            .env("BULK_SLACK_REMOVED", slack.url("removed"))
            .env_remove("RUST_LOG")
            .output()
            .expect("run dawnpost");
        (out.status.code(), text(&out))
    };
    let (code, out) = run(&["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(code, Some(3), "{out}");
    let (code, out) = run(&["dlq"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("BULK_SLACK_ARCHIVED") && out.contains("BULK_SLACK_REMOVED"),
        "{out}"
    );
    let (code, out) = run(&[
        "redrive",
        "--report",
        "warehouse-17",
        "--class",
        "permanent",
        "--host",
        "BULK_SLACK_ARCHIVED",
        "--by",
        "ann",
        "--reason",
        "the channel is back",
        "--dry-run",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("1 quarantined deliver(ies) of warehouse-17 with class permanent"),
        "{out}"
    );
    assert!(
        out.contains("slack:BULK_SLACK_ARCHIVED") && !out.contains("BULK_SLACK_REMOVED"),
        "{out}"
    );
    assert!(!out.contains(&slack.port().to_string()), "no URL: {out}");
}
