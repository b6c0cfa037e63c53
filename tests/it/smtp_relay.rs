//! What an SMTP relay (aiosmtpd, `tests/support/smtp_sink.py`) sees and says at the edges: its
//! SIZE limit (declared in MAIL FROM; a message over it is never sent and is quarantined at
//! once, in words), STARTTLS with a certificate a private CA signed (not trusted: permanent,
//! saying why; trusted through `tls.ca_file`: delivered), and the EHLO name.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Project, TestLedger, dk, run_date};
use dawnpost::Config;
use dawnpost::domain::outcome::ResponseClass;

struct Relay {
    port: u16,
    _child: tokio::process::Child,
    dir: tempfile::TempDir,
}

impl Relay {
    async fn start(args: &[&str]) -> Option<Relay> {
        if !common::python::has("aiosmtpd, trustme") {
            return None;
        }
        let port = common::python::free_port();
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let mut all: Vec<std::ffi::OsString> = vec![
            port.to_string().into(),
            d.join("mail").into(),
            "--log".into(),
            d.join("relay.log").into(),
            "--tls-dir".into(),
            d.join("tls").into(),
        ];
        all.extend(args.iter().map(std::ffi::OsString::from));
        let child = common::python::peer("smtp_sink.py", all).await;
        Some(Relay {
            port,
            _child: child,
            dir,
        })
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("relay.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn messages(&self) -> usize {
        std::fs::read_dir(self.dir.path().join("mail")).map_or(0, |d| d.count())
    }

    /// The names each EHLO gave, in order.
    fn ehlo_names(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter_map(|l| l.strip_prefix("EHLO ").map(str::to_string))
            .collect()
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("tls/ca.pem")
    }
}

const REPORT: &str = r#"
[[report]]
id = "relay"
title = "Relay report"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
email = ["ok@example.com"]
"#;

/// Runs the report once through the relay with `email` settings added; the attempts of the one
/// delivery.
async fn run(relay: &Relay, email: &str, tls: Option<&Path>) -> Vec<dawnpost::ledger::Attempt> {
    let p = Project::new(REPORT);
    let tls = tls.map_or(String::new(), |ca| {
        format!("[tls]\nca_file = \"{}\"\n", ca.display())
    });
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://127.0.0.1:{}?tls=required\"\ntimeout = \"10s\"\n{email}\n[retry]\nbase = \"100ms\"\ncap = \"200ms\"\nmax_attempts = 3\n{tls}",
            relay.port
        ),
    );
    let t = TestLedger::sqlite().await;
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    run_date(&config, &t.ledger, "2026-11-30", Duration::from_secs(30)).await;
    let attempts = t
        .ledger
        .deliveries()
        .attempts(&dk("relay:2026-11-30/email:ok@example.com"))
        .await
        .expect("attempts");
    t.cleanup().await;
    attempts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_an_untrusted_ca_is_permanent_and_a_trusted_one_delivers() {
    let Some(relay) = Relay::start(&[]).await else {
        return;
    };
    let attempts = run(&relay, "", None).await;
    assert_eq!(attempts.len(), 1, "no retry mends it: {attempts:?}");
    let a = &attempts[0];
    assert_eq!(a.class, ResponseClass::Permanent, "{a:?}");
    let reason = a.reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("certificate not trusted: "), "{reason}");
    assert!(reason.contains("tls.ca_file"), "says what to do: {reason}");
    let diagnostics = a.diagnostics.as_deref().unwrap_or_default();
    assert!(
        !diagnostics.contains("Connection error: Connection error"),
        "each cause once: {diagnostics}"
    );
    assert_eq!(relay.messages(), 0);

    let attempts = run(&relay, "", Some(&relay.ca())).await;
    assert_eq!(
        attempts.iter().map(|a| a.class).collect::<Vec<_>>(),
        [ResponseClass::Accepted],
        "{attempts:?}"
    );
    assert_eq!(relay.messages(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_is_declared_and_a_message_over_the_relays_limit_is_never_sent() {
    let Some(small) = Relay::start(&["--size", "5000"]).await else {
        return;
    };
    let attempts = run(&small, "", Some(&small.ca())).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let a = &attempts[0];
    assert_eq!(
        (a.class, a.code),
        (ResponseClass::Permanent, Some(552)),
        "{a:?}"
    );
    let reason = a.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("larger than the relay accepts"), "{reason}");
    let diagnostics = a.diagnostics.as_deref().unwrap_or_default();
    assert!(diagnostics.contains("at most 5000"), "{diagnostics}");
    assert!(
        !small.log().iter().any(|l| l.starts_with("MAIL")),
        "refused before MAIL FROM: {:?}",
        small.log()
    );
    assert_eq!(small.messages(), 0);

    let Some(large) = Relay::start(&["--size", "10000000"]).await else {
        return;
    };
    let attempts = run(&large, "", Some(&large.ca())).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].class, ResponseClass::Accepted);
    let declared: Vec<u64> = large
        .log()
        .iter()
        .filter_map(|l| l.strip_prefix("MAIL "))
        .filter_map(|o| o.split_whitespace().find_map(|p| p.strip_prefix("SIZE=")))
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(declared.len(), 1, "{:?}", large.log());
    assert!(declared[0] > 5000, "the message's size: {declared:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_sees_a_fully_qualified_ehlo_name() {
    let Some(relay) = Relay::start(&[]).await else {
        return;
    };
    run(
        &relay,
        "helo_name = \"mailer.dawnpost.test\"",
        Some(&relay.ca()),
    )
    .await;
    let ehlo = relay.ehlo_names();
    assert!(!ehlo.is_empty());
    assert!(ehlo.iter().all(|n| n == "mailer.dawnpost.test"), "{ehlo:?}");

    let Some(relay) = Relay::start(&[]).await else {
        return;
    };
    run(&relay, "", Some(&relay.ca())).await;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let expected = if host.contains('.') {
        host
    } else {
        "dawnpost.test".to_string()
    };
    let ehlo = relay.ehlo_names();
    assert!(!ehlo.is_empty());
    assert!(
        ehlo.iter().all(|n| *n == expected),
        "{ehlo:?} want {expected}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_certificate_presented_as_the_relays_own_is_refused_in_words() {
    let Some(relay) = Relay::start(&["--ca-as-server"]).await else {
        return;
    };
    let attempts = run(&relay, "", Some(&relay.ca())).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let a = &attempts[0];
    assert_eq!(a.class, ResponseClass::Permanent, "{a:?}");
    let reason = a.reason.as_deref().unwrap_or_default();
    assert!(
        reason == "certificate not trusted: the peer presents a CA certificate as its own",
        "in words: {reason}"
    );
}
