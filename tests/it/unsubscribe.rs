//! One-click unsubscribe (RFC 8058): a report with `unsubscribe = true` sends each recipient
//! `List-Unsubscribe` with its own signed link (and the report's `mailto:`) and
//! `List-Unsubscribe-Post`; the daemon's `POST /u/TOKEN` suppresses that address for that report
//! at once (idempotent, 200), `GET` shows one button and no script, and the next night's email
//! to it ends suppressed. A malformed, forged or stale token changes nothing.

use crate::common;

use common::daemon::{Daemon, command, get};
use common::ops_server::{LINK_BASE, links, start};
use common::{Project, TestLedger, run_in, text};
use dawnpost::ledger::Cause;

const KEY: &str = "0123456789abcdef0123456789abcdef-link-key";
const BOB: &str = "bob@carrier-y.example";

fn project(http: u16) -> Project {
    let p = Project::new(&common::report("w", "0 30 6 * * *", "UTC").replace(
        "email = [\"ops@example.com\"]",
        &format!(
            "email = [\"ops@example.com\", \"{BOB}\"]\nunsubscribe = true\nlist_unsubscribe = \"mailto:unsubscribe@example.com\""
        ),
    ));
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[server]\nbind = \"127.0.0.1:{http}\"\npublic_url = \"http://127.0.0.1:{http}/\"\n"
        ),
    );
    p
}

fn with_key(mut c: std::process::Command) -> std::process::Command {
    c.env("DAWNPOST_LINK_SECRET", KEY).env_remove("RUST_LOG");
    c
}

/// The headers of the .eml written for `date` to `BOB`, unfolded.
fn headers_to_bob(p: &Project, date: &str) -> String {
    let outbox = p.root().join("var/outbox");
    for entry in std::fs::read_dir(&outbox).expect("outbox") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.contains(date) && name.contains("bob@") {
            let eml = std::fs::read_to_string(&path).expect("eml");
            let head = eml.split("\r\n\r\n").next().unwrap_or("").to_string();
            return head.replace("\r\n ", " ").replace("\r\n\t", " ");
        }
    }
    panic!("no .eml to bob for {date}");
}

async fn post(addr: &str, path: &str, body: &'static str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(format!("http://{addr}{path}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_click_unsubscribes_that_address_from_that_report_at_once() {
    let http = common::python::free_port();
    let p = project(http);
    let run = with_key(command(&p, &["run", "--once", "--date", "2026-11-29"]))
        .output()
        .expect("run");
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));

    // Each recipient's own link, then the report's mailto:, and the one-click header.
    let head = headers_to_bob(&p, "2026-11-29");
    let line = (head.lines())
        .find(|l| l.starts_with("List-Unsubscribe: "))
        .expect("List-Unsubscribe");
    let prefix = format!("List-Unsubscribe: <http://127.0.0.1:{http}/u/");
    assert!(line.starts_with(&prefix), "{line}");
    assert!(
        line.ends_with(">, <mailto:unsubscribe@example.com>"),
        "{line}"
    );
    assert!(
        head.contains("List-Unsubscribe-Post: List-Unsubscribe=One-Click"),
        "{head}"
    );
    let link = &line["List-Unsubscribe: <".len()..line.find('>').expect(">")];
    let path = link.trim_start_matches(&format!("http://127.0.0.1:{http}"));
    assert!(
        !link.contains("bob@"),
        "the address is not in the link as text: {link}"
    );

    let daemon = Daemon::start(with_key(command(&p, &["run"])));
    // A person following the link sees one button, and no script.
    let (status, page) = get(&daemon.addr, path).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<form method=\"post\">") && page.contains("Unsubscribe</button>"),
        "{page}"
    );
    assert!(!page.contains("<script") && !page.contains(BOB), "{page}");
    // The mail client's one click, twice: 200 both times, one suppression.
    for _ in 0..2 {
        let (status, said) = post(&daemon.addr, path, "List-Unsubscribe=One-Click").await;
        assert_eq!(status, 200, "{said}");
        assert!(said.contains("will not be sent the report w"), "{said}");
    }
    // A tampered or malformed token, or no one-click body: refused, nothing suppressed.
    let forged = format!("{}0", &path[..path.len() - 1]);
    let forged = if forged == path {
        format!("{}1", &path[..path.len() - 1])
    } else {
        forged
    };
    assert_eq!(
        post(&daemon.addr, &forged, "List-Unsubscribe=One-Click")
            .await
            .0,
        404
    );
    assert_eq!(
        post(&daemon.addr, "/u/nonsense", "List-Unsubscribe=One-Click")
            .await
            .0,
        400
    );
    assert_eq!(post(&daemon.addr, path, "").await.0, 400);
    let _ = daemon.stop();

    let list = run_in(p.root(), &["suppressions", "--json", "--reveal"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).expect("json");
    let all = list["suppressions"].as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 1, "{list}");
    assert_eq!(
        (&all[0]["address"], &all[0]["report"], &all[0]["cause"]),
        (
            &serde_json::json!(BOB),
            &serde_json::json!("w"),
            &serde_json::json!("unsubscribe")
        )
    );

    // The next night bob is not sent the report; ops is.
    let run = with_key(command(&p, &["run", "--once", "--date", "2026-11-30"]))
        .output()
        .expect("run");
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let shown = text(&run_in(p.root(), &["show", "w:2026-11-30"]));
    assert!(
        shown.contains("suppressed  attempts 0") && shown.contains("suppressed for report w"),
        "{shown}"
    );
}

#[test]
fn unsubscribe_without_a_public_url_is_refused_by_check() {
    let p = project(common::python::free_port());
    p.write("config/dawnpost.toml", "");
    let check = run_in(p.root(), &["check"]);
    let said = text(&check);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(
        said.contains("w") && said.contains("unsubscribe = true needs [server] public_url"),
        "{said}"
    );
    assert!(!said.contains("panicked"));
}

/// A token for a report no longer configured, or signed with another key, changes nothing.
async fn a_stale_or_forged_token_changes_nothing(t: &TestLedger) {
    let s = start(t).await;
    let path = |url: String| url.trim_start_matches(LINK_BASE).to_string();
    let http = reqwest::Client::new();
    let one_click = async |p: String| {
        (http.post(format!("{}{p}", s.base)))
            .body("List-Unsubscribe=One-Click")
            .send()
            .await
            .expect("post")
            .status()
            .as_u16()
    };
    let gone = path(links().unsubscribe("retired-report", BOB));
    assert_eq!(one_click(gone).await, 404);
    let other = dawnpost::delivery::links::Links::new(
        &url::Url::parse(LINK_BASE).expect("url"),
        b"another key, thirty-two bytes long".to_vec(),
    );
    assert_eq!(
        one_click(path(other.unsubscribe("warehouse-17", BOB))).await,
        404
    );
    let rec = t.ledger.recipients();
    assert!(rec.suppressions(true, 10).await.expect("list").is_empty());
    // The real one works.
    assert_eq!(
        one_click(path(links().unsubscribe("warehouse-17", BOB))).await,
        200
    );
    let all = rec.suppressions(true, 10).await.expect("list");
    assert_eq!((all.len(), all[0].cause), (1, Cause::Unsubscribe));
    s.cancel.cancel();
}

on_both_backends!(a_stale_or_forged_token_changes_nothing);
