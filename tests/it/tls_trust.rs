//! `tls.ca_file` for webhooks and http sources, against an HTTPS peer whose certificate a CA
//! made in the test signed (`tests/support/https_sink.py`, trustme): without the bundle the
//! webhook and the source are each quarantined at once, `certificate not trusted`; with it the
//! source renders and the webhook is delivered.

use crate::common;

use std::time::Duration;

use common::{Project, TestLedger, dk, run_date};
use dawnpost::Config;
use dawnpost::domain::outcome::ResponseClass;

struct Peer {
    port: u16,
    _child: tokio::process::Child,
    dir: tempfile::TempDir,
}

async fn https_peer() -> Option<Peer> {
    if !common::python::has("trustme") {
        return None;
    }
    let port = common::python::free_port();
    let dir = tempfile::tempdir().expect("dir");
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/sample/warehouse-17.json"
    );
    let ca = dir.path().join("ca.pem");
    let child = common::python::peer(
        "https_sink.py",
        [port.to_string().as_ref(), ca.as_os_str(), data.as_ref()],
    )
    .await;
    Some(Peer {
        port,
        _child: child,
        dir,
    })
}

fn project(peer: &Peer, trust: bool, source_https: bool) -> Project {
    let source = if source_https {
        format!(
            "source = {{ kind = \"http\", url = \"https://127.0.0.1:{}/w17\", timeout = \"5s\" }}\nsample = \"config/sample/warehouse-17.json\"",
            peer.port
        )
    } else {
        "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\" }".to_string()
    };
    let p = Project::new(&format!(
        "[[report]]\nid = \"tls\"\ntitle = \"TLS\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"Europe/Berlin\"\ntemplate = \"daily_ops\"\n{source}\n[[report.webhook]]\nurl = \"https://127.0.0.1:{}/hook\"\n",
        peer.port
    ));
    let tls = if trust {
        format!(
            "[tls]\nca_file = \"{}\"\n",
            peer.dir.path().join("ca.pem").display()
        )
    } else {
        String::new()
    };
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[retry]\nbase = \"100ms\"\ncap = \"200ms\"\nmax_attempts = 2\nmax_age = \"2s\"\n{tls}"
        ),
    );
    p
}

/// Runs the project's report for 2026-11-30 on a fresh SQLite ledger.
async fn run(
    peer: &Peer,
    trust: bool,
    source_https: bool,
) -> (TestLedger, dawnpost::node::runner::RunOnceSummary) {
    let p = project(peer, trust, source_https);
    let t = TestLedger::sqlite().await;
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let summary = run_date(&config, &t.ledger, "2026-11-30", Duration::from_secs(20)).await;
    (t, summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_only_through_the_ca_bundle() {
    let Some(peer) = https_peer().await else {
        return;
    };
    let hook = format!(
        "tls:2026-11-30/webhook:https://127.0.0.1:{}/hook",
        peer.port
    );

    // Not trusted: the webhook is quarantined at once, saying why.
    let (t, summary) = run(&peer, false, false).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");
    let attempts = t
        .ledger
        .deliveries()
        .attempts(&dk(&hook))
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].class, ResponseClass::Permanent);
    let reason = attempts[0].reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("certificate not trusted: "), "{reason}");
    t.cleanup().await;

    // Not trusted, an https source: the render is quarantined at once, saying why.
    let (t, summary) = run(&peer, false, true).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");
    let job = t
        .ledger
        .jobs()
        .get(&common::jk("tls:2026-11-30"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.attempts, 1, "no retry: {job:?}");
    let error = job.last_error.unwrap_or_default();
    assert!(error.contains("certificate not trusted: "), "{error}");
    t.cleanup().await;

    // Trusted through tls.ca_file: the https source renders, the webhook is delivered.
    let (t, summary) = run(&peer, true, true).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let attempts = t
        .ledger
        .deliveries()
        .attempts(&dk(&hook))
        .await
        .expect("attempts");
    assert_eq!(
        attempts.iter().map(|a| a.class).collect::<Vec<_>>(),
        [ResponseClass::Accepted]
    );
    t.cleanup().await;
}
