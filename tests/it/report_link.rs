//! A report too large for its destinations: through a real relay (aiosmtpd) that refuses
//! messages over its SIZE, the email goes as a bounded copy (its text part and a link) under
//! the limit, the webhook as references and links (body version 2); the daemon serves the
//! link — the whole artifact, checked against its sha256 — and answers 410 once retention has
//! deleted it.

use crate::common;
use common::text;

use std::sync::Arc;
use std::time::Duration;

use common::daemon::{Daemon, command, get};
use common::peers::{HttpRule, Receiver};
use common::{Project, run_in};
use mail_parser::MessageParser;

const LIMIT: u64 = 1 << 20;
const KEY: &str = "0123456789abcdef0123456789abcdef-link-key";

/// A report of `rows` rows to one address through the relay on `smtp` and to a webhook on
/// `rx`, with 1 MiB limits, and links under the daemon's `[server]` on `http`.
fn project(rows: usize, smtp: u16, http: u16, rx: &Receiver) -> Project {
    let p = Project::new(&format!(
        r#"
[[report]]
id = "big"
title = "A big night"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/big.json" }}
email = ["ops@example.com"]
[[report.webhook]]
url = "{}"
"#,
        rx.url("hook")
    ));
    p.write_sample_rows("config/sample/big.json", rows);
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://127.0.0.1:{smtp}\"\nmax_message_bytes = \"1MiB\"\n[webhook]\nmax_body_bytes = \"1MiB\"\n[server]\nbind = \"127.0.0.1:{http}\"\npublic_url = \"http://127.0.0.1:{http}/\"\n"
        ),
    );
    p
}

fn with_key(mut c: std::process::Command) -> std::process::Command {
    c.env("DAWNPOST_LINK_SECRET", KEY);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_too_large_goes_as_a_bounded_copy_and_a_link_served_until_retention() {
    if !common::python::has("aiosmtpd") {
        return;
    }
    let (smtp, http) = (common::python::free_port(), common::python::free_port());
    let mail = tempfile::tempdir().expect("tempdir");
    let size = LIMIT.to_string();
    let _relay = common::python::peer(
        "smtp_sink.py",
        [
            smtp.to_string().as_ref(),
            mail.path().as_os_str(),
            "--size".as_ref(),
            size.as_ref(),
        ],
    )
    .await;
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(3_000, smtp, http, &rx);
    let once = with_key(command(&p, &["run", "--once", "--date", "2026-11-30"]))
        .output()
        .expect("run");
    assert_eq!(once.status.code(), Some(0), "delivered: {}", text(&once));

    // The email: under the relay's limit, its text part and the link.
    let eml = std::fs::read_dir(mail.path())
        .expect("dir")
        .next()
        .expect("one message")
        .expect("entry")
        .path();
    let raw = std::fs::read(&eml).expect("eml");
    assert!((raw.len() as u64) < LIMIT, "{} bytes", raw.len());
    let message = MessageParser::default().parse(&raw).expect("a message");
    assert_eq!(message.attachment_count(), 0, "the CSV is behind the link");
    let body = message.body_text(0).expect("a text part").to_string();
    assert!(
        body.contains("too large to send by email"),
        "{}",
        &body[..body.len().min(600)]
    );
    assert!(body.contains("SUMMARY"), "the report's text part follows");
    let link = body
        .lines()
        .find(|l| l.starts_with(&format!("http://127.0.0.1:{http}/r/big:2026-11-30/")))
        .expect("the link")
        .to_string();

    // The webhook: version 2, references and links, no inlined part.
    let hook: serde_json::Value =
        serde_json::from_slice(&rx.hits_for("hook")[0].body).expect("json");
    assert_eq!(hook["version"], 2);
    assert!(
        hook.get("html").is_none() && hook.get("csv").is_none(),
        "nothing inlined"
    );
    assert!(hook["inline_bytes"].as_u64().expect("size") > LIMIT);
    assert_eq!(
        hook["links"]["html"],
        link.as_str(),
        "one link for both destinations"
    );
    let csv_link = hook["links"]["csv"]
        .as_str()
        .expect("a csv link")
        .to_string();

    // `show` and its JSON say which destinations got a link instead of the whole report.
    let shown = text(&run_in(p.root(), &["show", "big:2026-11-30"]));
    let linked = shown
        .lines()
        .filter(|l| l.contains("(got a link instead of the whole report)"));
    assert_eq!(linked.count(), 2, "the email and the webhook: {shown}");
    let json = run_in(p.root(), &["show", "big:2026-11-30", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let flags: Vec<&serde_json::Value> = (json["deliveries"].as_array().into_iter().flatten())
        .map(|d| &d["sent_a_link"])
        .collect();
    assert_eq!(
        flags,
        [
            &serde_json::Value::Bool(true),
            &serde_json::Value::Bool(true)
        ]
    );

    // The daemon serves the whole artifact, as stored.
    let daemon = Daemon::start(with_key(command(&p, &["run"])));
    let path = |l: &str| {
        l.trim_start_matches(&format!("http://127.0.0.1:{http}"))
            .to_string()
    };
    let (status, html) = get(&daemon.addr, &path(&link)).await;
    assert_eq!(status, 200, "{html}");
    let stored = |ext: &str| {
        let dir = p.root().join("var/artifacts/big/2026-11-30");
        let f = std::fs::read_dir(&dir)
            .expect("artifacts")
            .map(|e| e.expect("entry").path())
            .find(|f| f.extension().is_some_and(|e| e == ext))
            .expect("a part");
        std::fs::read_to_string(f).expect("part")
    };
    let whole = stored("html");
    assert!(
        html.contains(&whole[whole.find("<h1").expect("h1")..]),
        "the stored HTML, whole"
    );
    assert!(
        html.contains("plain text</a>") && html.contains("CSV</a>"),
        "links to the other parts"
    );
    let (status, csv) = get(&daemon.addr, &path(&csv_link)).await;
    assert_eq!(
        (status, csv == stored("csv")),
        (200, true),
        "the CSV, byte for byte"
    );
    let forged = link.replace("?s=", "?s=00");
    assert_eq!(
        get(&daemon.addr, &path(&forged)).await.0,
        404,
        "a link that does not verify"
    );

    // Retention deletes the artifact (7 days by default): the link says so.
    let later = (chrono::Utc::now().date_naive() + chrono::Days::new(10)).to_string();
    let swept = run_in(p.root(), &["sweep", "--as-of", &later]);
    assert!(swept.status.success(), "{}", text(&swept));
    let (status, page) = get(&daemon.addr, &path(&link)).await;
    assert_eq!(status, 410, "{page}");
    assert!(
        page.contains("no longer kept") && page.contains("kept for 7d"),
        "{page}"
    );
    let _ = daemon.stop();
}

#[test]
fn without_a_public_url_a_report_too_large_is_refused_saying_what_would_send_it() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rx = rt.block_on(Receiver::start(rule));
    let p = project(3_000, 9, 9, &rx);
    let settings = std::fs::read_to_string(p.config_dir().join("dawnpost.toml")).expect("toml");
    let without: String = settings
        .lines()
        .filter(|l| !l.starts_with("public_url"))
        .map(|l| format!("{l}\n"))
        .collect();
    p.write(
        "config/dawnpost.toml",
        &without.replace("transport = \"smtp\"", "transport = \"file\""),
    );
    let check = run_in(p.root(), &["check"]);
    let said = text(&check);
    assert!(
        said.contains("cannot be sent it: set [server] public_url"),
        "{said}"
    );
    let once = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(once.status.code(), Some(3), "quarantined: {}", text(&once));
    let show = text(&run_in(p.root(), &["show", "big:2026-11-30"]));
    assert!(
        show.contains("over email.max_message_bytes (1MiB): set [server] public_url"),
        "{show}"
    );
    assert!(
        show.contains("over webhook.max_body_bytes (1MiB): set [server] public_url"),
        "{show}"
    );
    assert!(rx.hits().is_empty(), "nothing sent");
}

async fn a_link_serves_the_stored_artifact_refuses_an_altered_one_and_is_gone_after_retention(
    t: &common::TestLedger,
) {
    use common::fixtures::{params, ready_jobs, t0};
    use common::ops_server::{LINK_BASE, links, start};
    let s = start(t).await;
    let key = common::jk("warehouse-17:2026-11-29");
    ready_jobs(t, &["warehouse-17:2026-11-29"]).await;
    let leased = t
        .ledger
        .leases()
        .jobs(&params("w1", t0(), 1))
        .await
        .expect("lease");
    let rendered = dawnpost::report::render::Rendered {
        html: "<!DOCTYPE html><html><body><h1>Big</h1></body></html>".into(),
        text: "Big".into(),
        csv: Some("a,b\r\n1,2\r\n".into()),
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    };
    let (artifact, _) = s
        .artifacts
        .write("warehouse-17", "2026-11-29", &std::sync::Arc::new(rendered))
        .await
        .expect("write");
    t.ledger
        .jobs()
        .rendered(&leased[0].lease, &artifact, &[], t0())
        .await
        .expect("rendered");
    let url = |part| {
        links()
            .link(&key, &artifact.sha256, part)
            .replace(LINK_BASE, &s.base)
    };
    let got = |u: String| async move {
        let r = reqwest::get(u).await.expect("get");
        (r.status().as_u16(), r.text().await.expect("body"))
    };
    let (status, html) = got(url(dawnpost::delivery::links::Part::Html)).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("<h1>Big</h1>") && html.contains("CSV</a>"),
        "{html}"
    );
    assert_eq!(
        got(url(dawnpost::delivery::links::Part::Csv)).await,
        (200, "a,b\r\n1,2\r\n".into())
    );
    assert_eq!(
        got(url(dawnpost::delivery::links::Part::Text)).await,
        (200, "Big".into())
    );
    let other = links()
        .link(&key, "0000", dawnpost::delivery::links::Part::Html)
        .replace(LINK_BASE, &s.base);
    assert_eq!(
        got(other).await.0,
        410,
        "a signed link to an artifact the job no longer has"
    );
    let unsigned = url(dawnpost::delivery::links::Part::Html).replace("?s=", "?s=ab");
    assert_eq!(got(unsigned).await.0, 404);

    // Altered in the store: not served.
    let stored = s
        .project
        .root()
        .join("var/artifacts")
        .join(&artifact.html_key);
    std::fs::write(&stored, "<p>altered</p>").expect("alter");
    assert_eq!(got(url(dawnpost::delivery::links::Part::Html)).await.0, 502);

    // Deleted by retention: 410, saying how long it was kept.
    let retired = t
        .ledger
        .retention()
        .retire_artifact(&key, t0(), || async { Ok::<(), String>(()) })
        .await;
    assert!(matches!(retired, Ok(Some(Ok(())))), "{retired:?}");
    let (status, page) = got(url(dawnpost::delivery::links::Part::Html)).await;
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("no longer kept"), "{page}");
}

on_both_backends!(
    a_link_serves_the_stored_artifact_refuses_an_altered_one_and_is_gone_after_retention
);
