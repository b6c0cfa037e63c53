//! The providers' bounce webhooks over real HTTP, both backends, fed their documented sample
//! payloads (`tests/support/bounces/`): each verified as its provider signs it (Postmark's Basic
//! credentials, Mailgun's HMAC, SendGrid's ECDSA P-256), matched to the delivery its message
//! names and recorded; a wrong secret, a replayed timestamp, another provider's payload and a
//! provider not enabled refused, nothing suppressed by them.

use crate::common;

use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use common::TestLedger;
use common::fixtures::{bounce_sample, message_id_of, sent_email};
use common::ops_server::{Server, start_with};
use dawnpost::Clock as _;
use dawnpost::ledger::Cause;
use reqwest::StatusCode;

const POSTMARK_ENV: &str = "DAWNPOST_TEST_POSTMARK_CREDENTIALS";
const MAILGUN_ENV: &str = "DAWNPOST_TEST_MAILGUN_KEY";
const SENDGRID_ENV: &str = "DAWNPOST_TEST_SENDGRID_KEY";
const MAILGUN_KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";

async fn post(
    s: &Server,
    path: &str,
    body: String,
    headers: &[(&str, String)],
) -> (StatusCode, serde_json::Value) {
    let mut req = s.http.post(format!("{}{path}", s.base)).body(body);
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    let r = req.send().await.expect("post");
    let status = r.status();
    let body = r.bytes().await.unwrap_or_default();
    (
        status,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// `name` for this test's backend: the two run at once and set their own variables.
fn var(t: &TestLedger, name: &str) -> String {
    format!(
        "{name}_{}",
        if t.schema().is_some() { "PG" } else { "SQLITE" }
    )
}

fn server_toml(t: &TestLedger) -> String {
    format!(
        "[recipients]\npostmark_credentials_env = \"{}\"\nmailgun_signing_key_env = \"{}\"\nsendgrid_verification_key_env = \"{}\"\n",
        var(t, POSTMARK_ENV),
        var(t, MAILGUN_ENV),
        var(t, SENDGRID_ENV)
    )
}

async fn postmark_bounces_and_complaints_are_taken_behind_its_credentials(t: &TestLedger) {
    // SAFETY: no other test reads or writes this test's variables.
    unsafe { std::env::set_var(var(t, POSTMARK_ENV), "postmark:s3cret") };
    let s = start_with(t, &server_toml(t)).await;
    let key = sent_email(t, "warehouse-17:2026-11-29", "john@example.com").await;
    let dump = format!(
        "From: reports@dawnpost.test\r\nTo: john@example.com\r\nX-Dawnpost-Delivery: {key}\r\n\r\nbody"
    );
    let body = bounce_sample("postmark-bounce.json").replace(
        "\"Test content\"",
        &serde_json::to_string(&dump).expect("json"),
    );
    let basic = |creds: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(creds);
        vec![("authorization", format!("Basic {b64}"))]
    };
    let (status, _) = post(
        &s,
        "/v1/bounces/postmark",
        body.clone(),
        &basic("postmark:wrong"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        post(&s, "/v1/bounces/postmark", body.clone(), &[]).await.0,
        StatusCode::UNAUTHORIZED
    );
    let rec = t.ledger.recipients();
    assert!(rec.suppressions(true, 10).await.expect("l").is_empty());

    let (status, reply) = post(&s, "/v1/bounces/postmark", body, &basic("postmark:s3cret")).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let taken = &reply["bounces"][0];
    assert_eq!(taken["kind"], "hard", "{reply}");
    assert_eq!(
        taken["delivery"], "warehouse-17:2026-11-29/email:j***@example.com",
        "{reply}"
    );
    assert_eq!(taken["suppressed"]["cause"], "bounce", "{reply}");
    let bounces = rec.bounces_of(&key).await.expect("bounces");
    assert_eq!(
        bounces[0].diagnostic.as_deref(),
        Some("Test bounce details")
    );

    // Its spam complaint: no dump of the message, so it matches nothing and suppresses nobody
    // more (kept and counted).
    let complaint = bounce_sample("postmark-spam-complaint.json");
    let (status, reply) = post(
        &s,
        "/v1/bounces/postmark",
        complaint,
        &basic("postmark:s3cret"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["bounces"][0]["kind"], "complaint");
    assert!(reply["bounces"][0].get("delivery").is_none(), "{reply}");
    // Another provider's payload is no Postmark webhook.
    let other = bounce_sample("sendgrid-events.json");
    assert_eq!(
        post(&s, "/v1/bounces/postmark", other, &basic("postmark:s3cret"))
            .await
            .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(rec.suppressions(true, 10).await.expect("l").len(), 1);
    s.cancel.cancel();
}

/// The sample with our recipient and Message-ID, signed as Mailgun signs: HMAC-SHA256 of the
/// timestamp and token with the signing key.
fn mailgun_post(key: &dawnpost::domain::keys::DeliveryKey, ts: i64, signing_key: &str) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut v: serde_json::Value =
        serde_json::from_str(&bounce_sample("mailgun-failed-permanent.json")).expect("json");
    let token = v["signature"]["token"].as_str().unwrap_or("").to_string();
    let mut mac =
        <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(signing_key.as_bytes()).expect("key");
    mac.update(ts.to_string().as_bytes());
    mac.update(token.as_bytes());
    v["signature"]["timestamp"] = ts.to_string().into();
    v["signature"]["signature"] = hex::encode(mac.finalize().into_bytes()).into();
    v["event-data"]["recipient"] = "alice@example.com".into();
    let id = message_id_of(key);
    v["event-data"]["message"]["headers"]["message-id"] = id.trim_matches(['<', '>']).into();
    v.to_string()
}

async fn mailgun_events_are_taken_when_signed_and_fresh(t: &TestLedger) {
    unsafe { std::env::set_var(var(t, MAILGUN_ENV), MAILGUN_KEY) };
    let s = start_with(t, &server_toml(t)).await;
    let key = sent_email(t, "warehouse-17:2026-11-29", "alice@example.com").await;
    let now = s.clock.now().timestamp();
    let rec = t.ledger.recipients();
    // The documented sample as it is (signed with Mailgun's key, long ago): refused.
    let (status, _) = post(
        &s,
        "/v1/bounces/mailgun",
        bounce_sample("mailgun-failed-permanent.json"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = post(
        &s,
        "/v1/bounces/mailgun",
        mailgun_post(&key, now, "another key"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let stale = now - 3600;
    let (status, reply) = post(
        &s,
        "/v1/bounces/mailgun",
        mailgun_post(&key, stale, MAILGUN_KEY),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a replay: {reply}");
    assert!(rec.suppressions(true, 10).await.expect("l").is_empty());

    let (status, reply) = post(
        &s,
        "/v1/bounces/mailgun",
        mailgun_post(&key, now, MAILGUN_KEY),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["bounces"][0]["kind"], "hard");
    assert_eq!(
        reply["bounces"][0]["delivery"], "warehouse-17:2026-11-29/email:a***@example.com",
        "{reply}"
    );
    let bounces = rec.bounces_of(&key).await.expect("bounces");
    assert_eq!(
        bounces[0].diagnostic.as_deref(),
        Some("605 Not delivering to previously bounced address")
    );
    assert_eq!(
        rec.suppressions(false, 10).await.expect("l")[0].cause,
        Cause::Bounce
    );
    s.cancel.cancel();
}

async fn sendgrid_events_are_taken_when_their_signature_verifies(t: &TestLedger) {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).expect("key");
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).expect("pair");
    // SendGrid shows its verification key as base64 DER (a SubjectPublicKeyInfo).
    let spki = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::PublicKeyX509Der>::as_der(
        pair.public_key(),
    )
    .expect("der");
    let b64 = base64::engine::general_purpose::STANDARD;
    unsafe { std::env::set_var(var(t, SENDGRID_ENV), b64.encode(spki.as_ref())) };
    let s = start_with(t, &server_toml(t)).await;
    let key = sent_email(t, "warehouse-17:2026-11-29", "example@test.com").await;
    let body = bounce_sample("sendgrid-events.json")
        .replace("<14c5d75ce93.dfd.64b469@ismtpd-555>", &message_id_of(&key));
    let ts = s.clock.now().timestamp().to_string();
    let sign = |ts: &str, body: &str| {
        let mut signed = ts.as_bytes().to_vec();
        signed.extend_from_slice(body.as_bytes());
        let sig = pair.sign(&rng, &signed).expect("sign");
        vec![
            (
                "x-twilio-email-event-webhook-signature",
                b64.encode(sig.as_ref()),
            ),
            ("x-twilio-email-event-webhook-timestamp", ts.to_string()),
        ]
    };
    let rec = t.ledger.recipients();
    let tampered = body.replace("5.0.0", "4.0.0");
    assert_eq!(
        post(&s, "/v1/bounces/sendgrid", tampered, &sign(&ts, &body))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        post(&s, "/v1/bounces/sendgrid", body.clone(), &[]).await.0,
        StatusCode::UNAUTHORIZED
    );
    let old = (s.clock.now().timestamp() - 3600).to_string();
    assert_eq!(
        post(&s, "/v1/bounces/sendgrid", body.clone(), &sign(&old, &body))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert!(rec.suppressions(true, 10).await.expect("l").is_empty());

    let (status, reply) = post(&s, "/v1/bounces/sendgrid", body.clone(), &sign(&ts, &body)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    // The delivered and deferred events are no bounce; the bounce and the spam report are.
    let kinds: Vec<&str> = (reply["bounces"].as_array().into_iter().flatten())
        .filter_map(|b| b["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["hard", "complaint"], "{reply}");
    assert_eq!(reply["bounces"][0]["status"], "5.0.0");
    assert_eq!(
        reply["bounces"][0]["delivery"], "warehouse-17:2026-11-29/email:e***@test.com",
        "{reply}"
    );
    assert_eq!(rec.bounces_of(&key).await.expect("b").len(), 2);
    s.cancel.cancel();
}

async fn a_provider_not_enabled_answers_404(t: &TestLedger) {
    let s = start_with(t, "").await;
    for path in [
        "/v1/bounces/postmark",
        "/v1/bounces/mailgun",
        "/v1/bounces/sendgrid",
    ] {
        let (status, reply) = post(&s, path, "{}".into(), &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {reply}");
        assert!(
            reply["error"]
                .as_str()
                .is_some_and(|e| e.contains("not enabled")),
            "{reply}"
        );
    }
    s.cancel.cancel();
}

crate::on_both_backends!(
    postmark_bounces_and_complaints_are_taken_behind_its_credentials,
    mailgun_events_are_taken_when_signed_and_fresh,
    sendgrid_events_are_taken_when_their_signature_verifies,
    a_provider_not_enabled_answers_404,
);
