//! The pipeline end to end through real sockets on 127.0.0.1: an SMTP peer answering 250, 451
//! or 550 per recipient, and an HTTP receiver answering 429 with Retry-After, 410, 503 and
//! hanging. Runs on SQLite, and on PostgreSQL when it is configured.

use crate::common;
use common::{dk, jk};

use std::sync::Arc;
use std::time::Duration;

use common::peers::{HttpRule, Receiver, SmtpPeer, SmtpRule};
use common::{Project, TestLedger, run_date};
use dawnpost::Config;
use dawnpost::delivery::signing::Secret;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{DeliveryState, JobState};
use dawnpost::node::runner::RunOnceSummary;
use dawnpost::report::artifact::ArtifactStore;

const DATE: &str = "2026-11-30";
const SECRET_ENV: &str = "DAWNPOST_TEST_PIPELINE_SECRET";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn settings(smtp_port: u16, extra: &str) -> String {
    format!(
        r#"
[email]
from = "Dawnpost Test <reports@dawnpost.test>"
transport = "smtp"
smtp_url = "smtp://127.0.0.1:{smtp_port}"
timeout = "5s"
[pool]
concurrency = 8
admission_per_second = 500
lease = "30s"
drain_timeout = "2s"
[retry]
base = "100ms"
cap = "400ms"
max_retry_after = "3s"
max_attempts = 3
max_age = "1h"
[webhook]
timeout = "1s"
{extra}
"#
    )
}

fn report_block(id: &str, emails: &[&str], webhooks: &[String]) -> String {
    let mut s = format!(
        r#"
[[report]]
id = "{id}"
title = "Report {id}"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
email = [{}]
"#,
        emails
            .iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for url in webhooks {
        s.push_str(&format!(
            "[[report.webhook]]\nurl = \"{url}\"\nsecret_env = \"{SECRET_ENV}\"\n"
        ));
    }
    s
}

async fn run(p: &Project, t: &TestLedger) -> RunOnceSummary {
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    run_date(&config, &t.ledger, DATE, Duration::from_secs(60)).await
}

async fn artifact_objects(p: &Project, report: &str) -> usize {
    let store = ArtifactStore::open("file://var/artifacts", p.root()).expect("store");
    store.count(report, DATE).await.expect("count")
}

fn set_secret() {
    // SAFETY: every test sets the same value, before any thread reads it.
    unsafe { std::env::set_var(SECRET_ENV, SECRET) };
}

async fn email_one_per_recipient_classified_and_redriven(t: &TestLedger) {
    let rule: SmtpRule = Arc::new(|rcpt: &str, n: usize| match rcpt {
        r if r.starts_with("busy") && n == 1 => (250, 451), // refused after DATA: the relay saw it
        r if r.starts_with("bad") => (550, 250),
        _ => (250, 250),
    });
    let peer = SmtpPeer::start(rule).await;
    let p = Project::new(&report_block(
        "mail",
        &["ok@example.com", "busy@example.com", "bad@example.com"],
        &[],
    ));
    p.write("config/dawnpost.toml", &settings(peer.addr.port(), ""));

    let first = run(&p, t).await;
    assert_eq!(first.exit_code, 3, "something was quarantined: {first:?}");
    let accepted: Vec<String> = peer.accepted().iter().map(|m| m.rcpt.clone()).collect();
    assert_eq!(
        accepted.iter().filter(|r| *r == "ok@example.com").count(),
        1
    );
    assert_eq!(
        accepted.iter().filter(|r| *r == "busy@example.com").count(),
        1
    );
    assert!(!accepted.contains(&"bad@example.com".to_string()));

    // The retry of busy@ carried the same Message-ID and delivery header as the refused try.
    let busy: Vec<_> = peer
        .seen()
        .into_iter()
        .filter(|m| m.rcpt == "busy@example.com")
        .collect();
    assert_eq!(busy.len(), 2);
    let ids: Vec<String> = busy
        .iter()
        .map(|m| m.header("Message-ID").expect("message id"))
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert!(
        ids[0].starts_with('<') && ids[0].ends_with("@dawnpost.test>"),
        "{}",
        ids[0]
    );
    assert_eq!(
        busy[0].header("X-Dawnpost-Delivery").as_deref(),
        Some("mail:2026-11-30/email:busy@example.com")
    );
    let mail = &busy[1];
    assert!(mail.data.contains("multipart/alternative"));
    assert!(mail.data.contains("text/plain") && mail.data.contains("text/html"));
    assert!(
        mail.header("Subject")
            .expect("subject")
            .contains("Report mail")
    );

    let l = &t.ledger;
    let attempts = l
        .deliveries()
        .attempts(&dk("mail:2026-11-30/email:busy@example.com"))
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (attempts[0].class, attempts[0].code),
        (ResponseClass::RateLimited, Some(451))
    );
    assert_eq!(attempts[1].class, ResponseClass::Accepted);
    assert!(
        attempts[1].requested_at >= attempts[0].next_ready_at.expect("next ready"),
        "no retry before its time"
    );
    let bad = l
        .deliveries()
        .attempts(&dk("mail:2026-11-30/email:bad@example.com"))
        .await
        .expect("attempts");
    assert_eq!(bad.len(), 1, "5xx is permanent: quarantined at once");
    assert_eq!(
        (bad[0].class, bad[0].code),
        (ResponseClass::Permanent, Some(550))
    );
    for a in attempts.iter().chain(&bad) {
        let text = format!("{:?} {:?}", a.reason, a.diagnostics);
        assert!(
            !text.contains("busy@example.com") && !text.contains("bad@example.com"),
            "redacted: {text}"
        );
    }
    assert_eq!(
        l.jobs()
            .get(&jk("mail:2026-11-30"))
            .await
            .expect("get")
            .expect("job")
            .state,
        JobState::Quarantined
    );

    // An operator fixes the mailbox and redrives: delivered, audited, nothing else resent.
    peer.set_rule(Arc::new(|_: &str, _| (250, 250)));
    l.deliveries()
        .redrive(
            &dk("mail:2026-11-30/email:bad@example.com"),
            &Audit::new("ops-alice", "mailbox restored", Via::Cli).expect("audited"),
            chrono::Utc::now(),
        )
        .await
        .expect("redrive");
    let second = run(&p, t).await;
    assert_eq!(second.exit_code, 0, "{second:?}");
    let accepted: Vec<String> = peer.accepted().iter().map(|m| m.rcpt.clone()).collect();
    assert_eq!(
        accepted.len(),
        3,
        "one email per recipient in all: {accepted:?}"
    );
    let d = l
        .deliveries()
        .get(&dk("mail:2026-11-30/email:bad@example.com"))
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!((d.state, d.redrive_count), (DeliveryState::Sent, 1));
    let audit = l
        .deliveries()
        .redrives(&jk("mail:2026-11-30"))
        .await
        .expect("audit");
    assert_eq!(
        (audit[0].by.as_str(), audit[0].reason.as_str()),
        ("ops-alice", "mailbox restored")
    );

    // Re-running a finished date sends nothing.
    let third = run(&p, t).await;
    assert_eq!(third.exit_code, 0);
    assert_eq!(peer.accepted().len(), 3);
    assert_eq!(third.stats.sent, 0);
    assert_eq!(
        artifact_objects(&p, "mail").await,
        3,
        "one artifact (html + txt + csv) whatever the attempts"
    );
}

async fn webhooks_honour_retry_after_keep_keys_and_sign(t: &TestLedger) {
    set_secret();
    let rule: HttpRule = Arc::new(|path: &str, n: usize, _| match path {
        "throttle" if n == 1 => (429, Some("1".into()), Duration::ZERO),
        "gone" => (410, None, Duration::ZERO),
        "down" => (503, None, Duration::ZERO),
        _ => (204, None, Duration::ZERO),
    });
    let rx = Receiver::start(rule).await;
    let hooks: Vec<String> = ["ok", "throttle", "gone", "down"]
        .iter()
        .map(|p| rx.url(p))
        .collect();
    let p = Project::new(&report_block("hooks", &[], &hooks));
    p.write("config/dawnpost.toml", &settings(1, ""));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 3, "{summary:?}");

    let throttle = rx.hits_for("throttle");
    assert_eq!(throttle.len(), 2);
    assert!(
        throttle[1].at - throttle[0].at >= Duration::from_secs(1),
        "retried {:?} after a Retry-After of 1s",
        throttle[1].at - throttle[0].at
    );
    let key = dk(&format!("hooks:2026-11-30/webhook:{}", rx.url("throttle")));
    let secret = Secret::parse(SECRET).expect("secret");
    for hit in &throttle {
        assert_eq!(
            hit.header("idempotency-key").as_deref(),
            Some(key.to_string().as_str())
        );
        assert_eq!(
            hit.header("webhook-id").as_deref(),
            Some(key.to_string().as_str())
        );
        let ts: i64 = hit
            .header("webhook-timestamp")
            .expect("timestamp")
            .parse()
            .expect("number");
        secret
            .verify(
                &key.to_string(),
                ts,
                &hit.body,
                &hit.header("webhook-signature").expect("signature"),
            )
            .expect("a valid Standard Webhooks signature");
        assert!(
            hit.body.starts_with(br#"{"version":1,"#),
            "a version 1 body, its version first"
        );
        let body: serde_json::Value = serde_json::from_slice(&hit.body).expect("json body");
        // The fields of the documented sample (docs/contracts/webhook-v1.json), no more, no less.
        let sample: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/contracts/webhook-v1.json"))
                .expect("sample");
        let fields = |v: &serde_json::Value| -> Vec<String> {
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        assert_eq!(fields(&body), fields(&sample));
        assert_eq!(fields(&body["artifact"]), fields(&sample["artifact"]));
        assert_eq!(body["job"], "hooks:2026-11-30");
        assert_eq!(body["delivery"], key.to_string().as_str());
        assert_eq!(body["date"], DATE);
        assert_eq!(body["window"]["start"], "2026-11-28T23:00:00Z");
        assert!(
            body["artifact"]["sha256"]
                .as_str()
                .is_some_and(|s| s.len() == 64)
        );
        assert!(body["html"].as_str().is_some_and(|h| h.contains("<table")));
        // The CSV attachment: its content, and a reference to its object in the store.
        assert!(
            body["csv"]
                .as_str()
                .is_some_and(|c| c.starts_with("shift,lead,picked"))
        );
        let attachment = &body["attachments"][0];
        assert_eq!(attachment["filename"], "hooks-2026-11-30.csv");
        assert_eq!(attachment["content_type"], "text/csv; charset=utf-8");
        assert_eq!(attachment["key"], body["artifact"]["csv_key"]);
        assert!(
            attachment["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("hooks/2026-11-30/") && k.ends_with(".csv"))
        );
        assert!(body["text"].as_str().is_some_and(|h| h.contains("SHIFTS")));
    }
    assert_eq!(rx.hits_for("ok").len(), 1);
    assert_eq!(rx.hits_for("gone").len(), 1, "410 is permanent");
    assert_eq!(
        rx.hits_for("down").len(),
        3,
        "503 retried up to max_attempts"
    );

    let l = &t.ledger;
    let down = l
        .deliveries()
        .get(&dk(&format!("hooks:2026-11-30/webhook:{}", rx.url("down"))))
        .await
        .expect("get")
        .expect("d");
    assert_eq!(down.state, DeliveryState::Quarantined);
    assert!(
        down.last_error
            .as_deref()
            .unwrap_or("")
            .contains("attempt budget exhausted"),
        "{:?}",
        down.last_error
    );
    let attempts = l.deliveries().attempts(&key).await.expect("attempts");
    assert_eq!(attempts[0].retry_after_ms, Some(1000));
    assert_eq!(attempts[0].code, Some(429));
    let dlq = dawnpost::views::history::Dlq::load(l).await.expect("dlq");
    assert_eq!(dlq.deliveries.len(), 2);
}

async fn a_hanging_receiver_is_ambiguous_and_keeps_its_key(t: &TestLedger) {
    set_secret();
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_secs(3)));
    let rx = Receiver::start(rule).await;
    let p = Project::new(&report_block("hang", &[], &[rx.url("hang")]));
    p.write("config/dawnpost.toml", &settings(1, ""));
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 3);
    let key = dk(&format!("hang:2026-11-30/webhook:{}", rx.url("hang")));
    let attempts = t
        .ledger
        .deliveries()
        .attempts(&key)
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 3);
    assert!(
        attempts.iter().all(|a| a.class == ResponseClass::Ambiguous),
        "{attempts:?}"
    );
    rx.wait_for(3, Duration::from_secs(10)).await;
    assert!(
        rx.hits()
            .iter()
            .all(|h| h.header("idempotency-key").as_deref() == Some(key.to_string().as_str()))
    );
}

async fn a_throttled_host_sees_one_probe_per_retry_after(t: &TestLedger) {
    set_secret();
    // Every path of the host answers 429 (Retry-After: 1) for its first 2.5 seconds.
    let rule: HttpRule = Arc::new(|_: &str, _, since: Duration| {
        if since < Duration::from_millis(2500) {
            (429, Some("1".into()), Duration::ZERO)
        } else {
            (204, None, Duration::ZERO)
        }
    });
    let rx = Receiver::start(rule).await;
    let hooks: Vec<String> = (1..=6).map(|i| rx.url(&format!("t{i}"))).collect();
    let p = Project::new(&report_block("burst", &[], &hooks));
    p.write(
        "config/dawnpost.toml",
        &settings(1, "").replace("max_attempts = 3", "max_attempts = 20"),
    );
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let hits = rx.hits();
    let throttled = hits.iter().filter(|h| h.status == 429).count();
    // At most the first burst (six in flight before the first 429 came back) plus one probe
    // per Retry-After period; a per-delivery retry would have made 6 more per period.
    assert!(throttled <= 6 + 3, "{throttled} requests were answered 429");
    assert_eq!(hits.iter().filter(|h| h.status == 204).count(), 6);
}

async fn an_smtp_timeout_after_data_is_ambiguous_and_retried_with_the_same_message_id(
    t: &TestLedger,
) {
    let rule: SmtpRule = Arc::new(|_: &str, n: usize| if n == 1 { (250, 0) } else { (250, 250) });
    let peer = SmtpPeer::start(rule).await;
    let p = Project::new(&report_block("slow", &["ops@example.com"], &[]));
    p.write(
        "config/dawnpost.toml",
        &settings(peer.addr.port(), "").replace("timeout = \"5s\"", "timeout = \"1s\""),
    );
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let seen = peer.seen();
    assert_eq!(seen.len(), 2, "the relay saw the message twice");
    assert_eq!(seen[0].header("Message-ID"), seen[1].header("Message-ID"));
    let attempts = t
        .ledger
        .deliveries()
        .attempts(&dk("slow:2026-11-30/email:ops@example.com"))
        .await
        .expect("attempts");
    assert_eq!(
        attempts.iter().map(|a| a.class).collect::<Vec<_>>(),
        [ResponseClass::Ambiguous, ResponseClass::Accepted]
    );
}

/// Enqueues `key` due now and leases it, as an earlier attempt of its render did.
async fn earlier_attempt(t: &TestLedger, key: &str) -> dawnpost::ledger::JobLease {
    let now = chrono::Utc::now();
    let job = dawnpost::ledger::NewJob {
        key: jk(key),
        fire_at: now,
        window: dawnpost::domain::window::Window {
            start: now - chrono::Duration::hours(24),
            end: now,
        },
        ready_at: now,
        origin: dawnpost::ledger::JobOrigin::Schedule,
    };
    (t.ledger.jobs().insert_many(&[job], now).await).expect("enqueue");
    let params = dawnpost::ledger::LeaseParams {
        owner: "earlier:1".into(),
        now,
        lease_for: chrono::Duration::seconds(30),
        limit: 1,
    };
    let mut leased = t.ledger.leases().jobs(&params).await.expect("lease");
    assert_eq!(leased.len(), 1, "the earlier attempt leased the job");
    leased.remove(0).lease
}

/// A job's first render does not adopt what its folder already holds: no attempt of it wrote
/// that (a job of the same key deleted earlier, say), so it stores its own artifact.
async fn a_first_render_writes_its_own_artifact(t: &TestLedger) {
    let peer = SmtpPeer::start(Arc::new(|_: &str, _| (250, 250))).await;
    let p = Project::new(&report_block("own", &["ops@example.com"], &[]));
    p.write("config/dawnpost.toml", &settings(peer.addr.port(), ""));
    let store = ArtifactStore::open("file://var/artifacts", p.root()).expect("store");
    let stranger = dawnpost::report::render::Rendered {
        html: "<p>left by a job deleted before</p>".into(),
        text: "left by a job deleted before".into(),
        csv: None,
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    };
    let (left, _) = store
        .write("own", DATE, &Arc::new(stranger))
        .await
        .expect("write");
    assert_eq!(run(&p, t).await.exit_code, 0);
    let job = (t.ledger.jobs().get(&jk("own:2026-11-30")).await)
        .expect("get")
        .expect("job");
    let artifact = job.artifact.expect("artifact");
    assert_ne!(artifact.sha256, left.sha256);
    assert!(
        artifact.csv_key.is_some(),
        "the shipped template attaches a CSV"
    );
    let parts = 2 + 3;
    assert_eq!(
        artifact_objects(&p, "own").await,
        parts,
        "its own beside the other"
    );
    assert!(!peer.accepted()[0].data.contains("left by a job deleted"));
}

async fn render_is_once_escaped_and_strict(t: &TestLedger) {
    let peer = SmtpPeer::start(Arc::new(|_: &str, _| (250, 250))).await;
    let p = Project::new(&report_block("esc", &["ops@example.com"], &[]));
    p.write("config/dawnpost.toml", &settings(peer.addr.port(), ""));
    // An artifact stored by an earlier attempt whose lease came back before its render was
    // recorded (its node died, or its commit failed): reused, not redone.
    let store = ArtifactStore::open("file://var/artifacts", p.root()).expect("store");
    let earlier = Arc::new(dawnpost::report::render::Rendered {
        html: "<p>rendered before the crash</p>".into(),
        text: "rendered before the crash".into(),
        csv: None,
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    });
    let lease = earlier_attempt(t, "esc:2026-11-30").await;
    let (stored, wrote) = store.write("esc", DATE, &earlier).await.expect("write");
    assert!(wrote);
    let now = chrono::Utc::now();
    (t.ledger
        .jobs()
        .retry(&lease, now, "the commit failed", now)
        .await)
        .expect("lease back");
    let (_, again) = store
        .write("esc", DATE, &earlier)
        .await
        .expect("write again");
    assert!(!again, "create-only: the second write finds the object");
    let summary = run(&p, t).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let job = t
        .ledger
        .jobs()
        .get(&jk("esc:2026-11-30"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        job.artifact.as_ref().map(|a| a.sha256.clone()),
        Some(stored.sha256.clone())
    );
    assert_eq!(artifact_objects(&p, "esc").await, 2);
    assert!(
        peer.accepted()[0]
            .data
            .contains("rendered before the crash")
    );

    // Escaping: `<EU-12>` in the data is escaped in the HTML part only.
    let p2 = Project::new(&report_block("esc2", &["ops@example.com"], &[]));
    p2.write("config/dawnpost.toml", &settings(peer.addr.port(), ""));
    assert_eq!(run(&p2, t).await.exit_code, 0);
    let job = t
        .ledger
        .jobs()
        .get(&jk("esc2:2026-11-30"))
        .await
        .expect("get")
        .expect("job");
    let artifact = job.artifact.expect("artifact");
    let store2 = ArtifactStore::open("file://var/artifacts", p2.root()).expect("store");
    let rendered = store2.read_rendered(&artifact).await.expect("read");
    assert!(
        rendered
            .html
            .contains("Missing customs papers &lt;EU-12&gt;"),
        "HTML is escaped"
    );
    assert!(
        rendered.text.contains("Missing customs papers <EU-12>"),
        "text is not"
    );
    let csv = rendered
        .csv
        .as_deref()
        .expect("the shipped template attaches a CSV");
    assert!(csv.contains("Early,A. Krüger,6210"), "{csv}");
    assert_eq!(
        artifact.bytes as usize,
        rendered.html.len() + rendered.text.len() + csv.len()
    );

    // Strict: data that lost a field the template uses is a permanent failure naming it.
    let p3 = Project::new(&report_block("strict", &["ops@example.com"], &[]));
    p3.write("config/dawnpost.toml", &settings(peer.addr.port(), ""));
    assert!(Config::load(&p3.config_dir(), &dawnpost::delivery::readers()).is_ok());
    let config = Config::load(&p3.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    p3.write(
        "config/sample/warehouse-17.json",
        r#"{"site": "W17", "rows": [], "exceptions": []}"#,
    );
    let summary = run_date(&config, &t.ledger, DATE, Duration::from_secs(30)).await;
    assert_eq!(summary.exit_code, 3);
    let job = t
        .ledger
        .jobs()
        .get(&jk("strict:2026-11-30"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Quarantined);
    assert_eq!(job.attempts, 1, "permanent: no retry");
    assert!(
        job.last_error
            .as_deref()
            .unwrap_or("")
            .contains("data.summary"),
        "{:?}",
        job.last_error
    );
}

on_both_backends!(
    an_smtp_timeout_after_data_is_ambiguous_and_retried_with_the_same_message_id,
    render_is_once_escaped_and_strict,
    a_first_render_writes_its_own_artifact,
    email_one_per_recipient_classified_and_redriven,
    webhooks_honour_retry_after_keep_keys_and_sign,
    a_hanging_receiver_is_ambiguous_and_keeps_its_key,
    a_throttled_host_sees_one_probe_per_retry_after,
);
