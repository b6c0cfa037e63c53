//! Amazon SES's notifications through SNS over real HTTP, both backends: AWS's documented
//! bounce and complaint samples, carried in its documented SNS message and signed as SNS signs
//! (by `tests/support/sns_sign.py`, an implementation of the string to sign that is not
//! dawnpost's, with Python's `cryptography`), SignatureVersion 1 and 2; the certificate read
//! from `ses_certificates_dir`. A topic not configured, a certificate URL off AWS, a tampered
//! message and a signature of another key are refused, nothing suppressed by them.

use crate::common;

use std::io::Write as _;
use std::process::Stdio;

use common::TestLedger;
use common::fixtures::{bounce_sample, message_id_of, sent_email};
use common::ops_server::{Server, start_with};
use dawnpost::ledger::Cause;
use reqwest::StatusCode;

const TOPIC: &str = "arn:aws:sns:us-west-2:123456789012:MyTopic";

/// The SNS sample carrying `message` (an SES notification), signed with a new key whose
/// certificate goes to `certs`.
fn signed(message: &str, version: &str, certs: &std::path::Path) -> String {
    let mut sns: serde_json::Value =
        serde_json::from_str(&bounce_sample("sns-notification.json")).expect("json");
    sns["Message"] = message.into();
    sns["SignatureVersion"] = version.into();
    let script = format!("{}/tests/support/sns_sign.py", env!("CARGO_MANIFEST_DIR"));
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg(certs)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(sns.to_string().as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("sns_sign.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

async fn post(s: &Server, body: String) -> (StatusCode, serde_json::Value) {
    let r = (s.http.post(format!("{}/v1/bounces/ses", s.base)))
        .header("x-amz-sns-message-type", "Notification")
        .header("content-type", "text/plain; charset=UTF-8")
        .body(body)
        .send()
        .await
        .expect("post");
    let status = r.status();
    let body = r.bytes().await.unwrap_or_default();
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

async fn ses_notifications_are_taken_when_sns_signed_them(t: &TestLedger) {
    if !common::python::has("cryptography") {
        return;
    }
    let certs = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        "[recipients]\nses_topic_arns = [\"{TOPIC}\"]\nses_certificates_dir = \"{}\"\n",
        certs.path().display()
    );
    let s = start_with(t, &toml).await;
    let key = sent_email(t, "warehouse-17:2026-11-29", "jane@example.com").await;
    let ours = message_id_of(&key);
    let bounce = bounce_sample("ses-bounce-notification.json").replace("custom-message-ID", &ours);
    let rec = t.ledger.recipients();

    // Refused: a topic not configured, a certificate off AWS, a tampered message.
    let body = signed(&bounce, "2", certs.path());
    let other_topic = body.replace(TOPIC, "arn:aws:sns:us-west-2:123456789012:Other");
    assert_eq!(post(&s, other_topic).await.0, StatusCode::UNAUTHORIZED);
    let off_aws = body.replace(
        "https://sns.us-west-2.amazonaws.com/",
        "https://sns.evil.example/",
    );
    assert_eq!(post(&s, off_aws).await.0, StatusCode::UNAUTHORIZED);
    let tampered = body.replace("5.1.1", "4.1.1");
    let (status, reply) = post(&s, tampered).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{reply}");
    // Signed by another key than the certificate's (signed again: the file is replaced).
    let first = body.clone();
    let _ = signed(&bounce, "2", certs.path());
    assert_eq!(post(&s, first).await.0, StatusCode::UNAUTHORIZED);
    assert!(rec.suppressions(true, 10).await.expect("l").is_empty());

    for version in ["1", "2"] {
        let (status, reply) = post(&s, signed(&bounce, version, certs.path())).await;
        assert_eq!(status, StatusCode::OK, "version {version}: {reply}");
        let taken = &reply["bounces"][0];
        assert_eq!(taken["kind"], "hard", "{reply}");
        assert_eq!(taken["status"], "5.1.1");
        assert_eq!(
            taken["delivery"], "warehouse-17:2026-11-29/email:j***@example.com",
            "{reply}"
        );
    }
    let bounces = rec.bounces_of(&key).await.expect("bounces");
    assert_eq!(bounces.len(), 2);
    assert!(
        (bounces[0].diagnostic.as_deref())
            .is_some_and(|d| d.contains("j***@example.com") && !d.contains("jane@")),
        "{bounces:?}"
    );
    assert_eq!(
        rec.suppressions(false, 10).await.expect("l")[0].cause,
        Cause::Bounce
    );

    // The complaint sample names another recipient, whom nothing was sent: kept, unmatched.
    let complaint = signed(
        &bounce_sample("ses-complaint-notification.json"),
        "2",
        certs.path(),
    );
    let (status, reply) = post(&s, complaint).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["bounces"][0]["kind"], "complaint");
    assert!(reply["bounces"][0].get("delivery").is_none(), "{reply}");
    assert_eq!(rec.unmatched().await.expect("count"), 1);
    s.cancel.cancel();
}

async fn ses_is_not_enabled_without_a_topic(t: &TestLedger) {
    let s = start_with(t, "").await;
    let (status, reply) = post(&s, bounce_sample("sns-notification.json")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    s.cancel.cancel();
}

crate::on_both_backends!(
    ses_notifications_are_taken_when_sns_signed_them,
    ses_is_not_enabled_without_a_topic,
);
