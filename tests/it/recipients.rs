//! Recipients through the binary: a delivery status notification piped into `dawnpost bounce`
//! is matched to the delivery its returned headers (or only its Message-ID) name, `show` tells
//! "sent, then bounced", the next night's email to that address ends `suppressed` (the job
//! still done), `suppressions` lists it masked, `unsuppress` lifts it audited and the next
//! night sends again; what is not a report, or matches nothing, suppresses nobody.

use crate::common;

use std::io::Write as _;
use std::process::{Output, Stdio};

use common::{Project, run_in, text};

const BOB: &str = "bob@carrier-y.example";

fn project() -> Project {
    Project::new(&common::report("w", "0 30 6 * * *", "UTC").replace(
        "email = [\"ops@example.com\"]",
        &format!("email = [\"ops@example.com\", \"{BOB}\"]"),
    ))
}

/// `dawnpost ARGS` with `stdin` piped in.
fn piped(p: &Project, args: &[&str], stdin: &str) -> Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .current_dir(p.root())
        .args(args)
        .env_remove("DAWNPOST_DATABASE_URL")
        .env_remove("DAWNPOST_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin");
    }
    child.wait_with_output().expect("wait")
}

/// A DSN as Postfix writes one: `recipient` failed with 5.1.1; the returned headers are
/// `returned`.
fn dsn(recipient: &str, returned: &str) -> String {
    format!(
        "From: MAILER-DAEMON@relay.example (Mail Delivery System)\r
To: reports@example.com\r
Subject: Undelivered Mail Returned to Sender\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=delivery-status; boundary=\"R\"\r
\r
--R\r
Content-Description: Notification\r
Content-Type: text/plain; charset=us-ascii\r
\r
This is the mail system at host relay.example.\r
--R\r
Content-Description: Delivery report\r
Content-Type: message/delivery-status\r
\r
Reporting-MTA: dns; relay.example\r
\r
Final-Recipient: rfc822; {recipient}\r
Original-Recipient: rfc822;{recipient}\r
Action: failed\r
Status: 5.1.1\r
Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: Recipient address rejected: User unknown\r
\r
--R\r
Content-Description: Undelivered Message Headers\r
Content-Type: text/rfc822-headers\r
\r
{returned}\r
--R--\r
"
    )
}

fn run_date(p: &Project, date: &str) -> String {
    let run = run_in(p.root(), &["run", "--once", "--date", date]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    text(&run)
}

/// The `Message-ID` of the .eml written for `date` to `BOB`.
fn message_id_to_bob(p: &Project, date: &str) -> String {
    let outbox = p.root().join("var/outbox");
    for entry in std::fs::read_dir(&outbox).expect("outbox") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.contains(date) && name.contains("bob@") {
            let eml = std::fs::read_to_string(&path).expect("eml");
            let line = (eml.lines())
                .find(|l| l.to_ascii_lowercase().starts_with("message-id:"))
                .expect("a Message-ID");
            return line["message-id:".len()..].trim().to_string();
        }
    }
    panic!("no .eml to bob for {date} in {}", outbox.display());
}

#[test]
fn a_bounce_suppresses_the_next_sends_until_an_operator_lifts_it() {
    let p = project();
    run_date(&p, "2026-11-29");
    let key = format!("w:2026-11-29/email:{BOB}");

    // The mailbox's filter pipes the DSN in.
    let returned = format!("From: reports@example.com\r\nTo: {BOB}\r\nX-Dawnpost-Delivery: {key}");
    let out = piped(&p, &["bounce"], &dsn(BOB, &returned));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("hard 5.1.1")
            && said.contains("recorded on w:2026-11-29/email:b***@carrier-y.example")
            && said.contains("suppressed for every report"),
        "{said}"
    );
    assert!(!said.contains(BOB), "masked: {said}");

    // The delivery stays sent; the bounce follows it.
    let shown = text(&run_in(p.root(), &["show", "w:2026-11-29"]));
    let line = (shown.lines())
        .find(|l| l.contains("email:b***@carrier-y.example"))
        .expect("bob's delivery");
    assert!(line.contains("  sent  "), "{shown}");
    assert!(
        shown.contains("then bounced 5.1.1 (hard) at") && shown.contains("via dsn"),
        "{shown}"
    );
    let json = run_in(p.root(), &["show", "w:2026-11-29", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    let bounced: Vec<&serde_json::Value> = (json["deliveries"].as_array().into_iter().flatten())
        .filter(|d| d.get("bounces").is_some())
        .collect();
    assert_eq!(bounced.len(), 1, "{json}");
    assert_eq!(bounced[0]["state"], "sent");
    assert_eq!(bounced[0]["bounces"][0]["status"], "5.1.1");
    assert_eq!(bounced[0]["bounces"][0]["kind"], "hard");

    // The next night: bob's email is not sent, the job is still done.
    run_date(&p, "2026-11-30");
    let shown = text(&run_in(p.root(), &["show", "w:2026-11-30"]));
    assert!(shown.contains("state done"), "{shown}");
    assert!(
        shown.contains("suppressed  attempts 0")
            && shown.contains("not sent: the recipient is suppressed for every report"),
        "{shown}"
    );
    let list = text(&run_in(p.root(), &["suppressions"]));
    assert!(
        list.contains("b***@carrier-y.example  for every report")
            && list.contains("bounce: hard bounce 5.1.1 reported by dsn"),
        "{list}"
    );
    let revealed = text(&run_in(p.root(), &["suppressions", "--reveal"]));
    assert!(revealed.contains(BOB), "{revealed}");

    // Lifted by an operator, audited; the next night sends again.
    let lift = run_in(
        p.root(),
        &[
            "unsuppress",
            BOB,
            "--by",
            "ops",
            "--reason",
            "mailbox restored",
        ],
    );
    assert!(lift.status.success(), "{}", text(&lift));
    let all = text(&run_in(p.root(), &["suppressions", "--all"]));
    assert!(
        all.contains("lifted") && all.contains("by ops via cli: mailbox restored"),
        "{all}"
    );
    assert!(text(&run_in(p.root(), &["suppressions"])).contains("no suppressions"));
    run_date(&p, "2026-12-01");
    let shown = text(&run_in(p.root(), &["show", "w:2026-12-01"]));
    assert!(!shown.contains("suppressed"), "{shown}");

    // A DSN naming only the Message-ID (its headers without X-Dawnpost-Delivery) is matched
    // among the sent deliveries to its recipient.
    let id = message_id_to_bob(&p, "2026-12-01");
    let returned = format!("From: reports@example.com\r\nTo: {BOB}\r\nMessage-ID: {id}");
    let out = piped(&p, &["bounce", "--json"], &dsn(BOB, &returned));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(reply["version"], 1, "{}", text(&out));
    assert_eq!(
        reply["delivery"], "w:2026-12-01/email:b***@carrier-y.example",
        "{reply}"
    );
    assert_eq!(reply["suppressed"]["cause"], "bounce", "{reply}");
}

#[test]
fn what_matches_nothing_or_is_no_report_suppresses_nobody() {
    let p = project();
    run_date(&p, "2026-11-29");
    let returned = "From: someone@else.example\r\nMessage-ID: <not-ours@else.example>";
    let out = piped(&p, &["bounce"], &dsn("stranger@else.example", returned));
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("matched no delivery: kept, not used to suppress"),
        "{said}"
    );
    // A delivery key that names no delivery is no match either.
    let forged = format!("X-Dawnpost-Delivery: w:2026-01-01/email:{BOB}");
    let out = piped(&p, &["bounce"], &dsn(BOB, &forged));
    assert!(text(&out).contains("matched no delivery"), "{}", text(&out));
    assert!(text(&run_in(p.root(), &["suppressions"])).contains("no suppressions"));

    let out = piped(
        &p,
        &["bounce"],
        "From: a@b.example\r\nSubject: hello\r\n\r\nhi\r\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("stdin: the message is neither a delivery status notification"),
        "{}",
        text(&out)
    );
    let out = run_in(
        p.root(),
        &["suppress", "not-an-address", "--by", "ops", "--reason", "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not an email address"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("panicked"));
}
