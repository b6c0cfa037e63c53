//! The email cases against a real SMTP server, aiosmtpd (installed by `.ci/run`): 250, 451 at
//! RCPT (greylisting) and 550, one message per recipient.

use crate::common;
use common::dk;

use std::time::Duration;

use common::{Project, TestLedger, run_date};
use dawnpost::Config;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::DeliveryState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_smtp_server_gets_one_message_per_accepted_recipient() {
    if !common::python::has("aiosmtpd") {
        return;
    }
    let port = common::python::free_port();
    let mail_dir = tempfile::tempdir().expect("tempdir");
    let mut server = common::python::peer(
        "smtp_sink.py",
        [port.to_string().as_ref(), mail_dir.path().as_os_str()],
    )
    .await;

    let p = Project::new(
        r#"
[[report]]
id = "relay"
title = "Relay report"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
email = ["ok@example.com", "busy@example.com", "bad@example.com"]
list_unsubscribe = "mailto:unsubscribe@dawnpost.test?subject=relay"
"#,
    );
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\nreply_to = \"Ops desk <ops@dawnpost.test>\"\nlist_domain = \"reports.dawnpost.test\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://127.0.0.1:{port}\"\ntimeout = \"10s\"\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\nmax_attempts = 3\n"
        ),
    );
    let t = TestLedger::sqlite().await;
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let summary = run_date(&config, &t.ledger, "2026-11-30", Duration::from_secs(60)).await;
    assert_eq!(summary.exit_code, 3, "bad@ is quarantined: {summary:?}");

    let mut files: Vec<String> = std::fs::read_dir(mail_dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let rcpts: Vec<&str> = files
        .iter()
        .map(|f| f.split_once('-').expect("n-rcpt").1)
        .collect();
    assert_eq!(rcpts.len(), 2, "{files:?}");
    assert!(rcpts.contains(&"ok@example.com.eml") && rcpts.contains(&"busy@example.com.eml"));
    let busy = std::fs::read_to_string(
        mail_dir
            .path()
            .join(files.iter().find(|f| f.contains("busy")).expect("busy")),
    )
    .expect("read");
    assert!(busy.contains("X-Dawnpost-Delivery: relay:2026-11-30/email:busy@example.com"));
    assert!(busy.contains("multipart/alternative"));
    // The headers receivers expect of an automated list, as the relay received them.
    for header in [
        "Auto-Submitted: auto-generated",
        "List-Id: <relay.dawnpost.reports.dawnpost.test>",
        "List-Unsubscribe: <mailto:unsubscribe@dawnpost.test?subject=relay>",
        "Reply-To: \"Ops desk\" <ops@dawnpost.test>",
    ] {
        assert!(busy.contains(header), "{header} in {busy}");
    }

    let l = &t.ledger;
    let busy_attempts = l
        .deliveries()
        .attempts(&dk("relay:2026-11-30/email:busy@example.com"))
        .await
        .expect("attempts");
    assert_eq!(
        busy_attempts
            .iter()
            .map(|a| (a.class, a.code))
            .collect::<Vec<_>>(),
        [
            (ResponseClass::RateLimited, Some(451)),
            (ResponseClass::Accepted, Some(250))
        ]
    );
    let bad = l
        .deliveries()
        .get(&dk("relay:2026-11-30/email:bad@example.com"))
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!((bad.state, bad.attempts), (DeliveryState::Quarantined, 1));
    assert_eq!(bad.last_class, Some(ResponseClass::Permanent));
    assert!(
        !bad.last_error
            .unwrap_or_default()
            .contains("bad@example.com"),
        "the reason is redacted"
    );
    drop(server.stdin.take());
    let _ = server.wait().await;
}
