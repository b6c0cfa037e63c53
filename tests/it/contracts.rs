//! The public contracts, pinned: the webhook body (version 1) and the ops API's JSON (version
//! 1, in each reply's `version`), each compared with its checked-in sample in `docs/contracts/`. A failure here means a
//! receiver or a script would see something else: change the sample only with a new version
//! (or a deliberate, documented addition), never to make the test pass. Run with
//! `DAWNPOST_BLESS_CONTRACTS=1` to rewrite the samples from what the code produces, then read
//! the diff.

use std::path::PathBuf;

use chrono::Duration;
use dawnpost::delivery::webhook::{
    ArtifactBody, AttachmentBody, BodyHead, BodyVersion, WEBHOOK_BODY_VERSION, WebhookBody,
    WindowBody,
};
use dawnpost::domain::keys::{DeliveryKey, JobKey};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, LeaseParams, NewAttempt, NewDelivery};
use dawnpost::report::artifact::ArtifactRef;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::fixtures::new_job;
use crate::common::ops_server::{TOKEN, start};
use crate::common::{TestLedger, at};

fn sample_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("docs/contracts")
        .join(name)
}

/// `actual` equals the sample `name` (as JSON: every field, value and type; key order aside).
pub(crate) fn pinned(name: &str, actual: &Value) {
    let path = sample_path(name);
    if std::env::var_os("DAWNPOST_BLESS_CONTRACTS").is_some() {
        let text = serde_json::to_string_pretty(actual).expect("json") + "\n";
        std::fs::write(&path, text).expect("write the sample");
        return;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless it first)", path.display()));
    let expected: Value = serde_json::from_str(&text).expect("the sample is JSON");
    assert!(
        &expected == actual,
        "{name} is not the documented contract:\nexpected {}\nactual   {}",
        serde_json::to_string_pretty(&expected).unwrap_or_default(),
        serde_json::to_string_pretty(actual).unwrap_or_default(),
    );
}

fn raw(s: &str) -> Box<serde_json::value::RawValue> {
    serde_json::value::to_raw_value(s).expect("raw")
}

/// The sample job both webhook samples are of: its key, its delivery's and its artifact.
fn sample_job(bytes: i64) -> (JobKey, DeliveryKey, ArtifactRef) {
    let job: JobKey = "warehouse-17:2026-10-25".parse().expect("job key");
    let delivery = DeliveryKey::new(
        job.clone(),
        dawnpost::delivery::webhook::KIND,
        "https://hooks.example/carrier/7",
    );
    let artifact = ArtifactRef {
        html_key: "warehouse-17/2026-10-25/9f2c.html".into(),
        text_key: "warehouse-17/2026-10-25/9f2c.txt".into(),
        csv_key: Some("warehouse-17/2026-10-25/9f2c.csv".into()),
        sha256: "9f2c".into(),
        bytes,
        parts: Vec::new(),
    };
    (job, delivery, artifact)
}

/// The fields both webhook bodies share, for the sample job.
fn sample_head<'a>(
    job: &'a JobKey,
    delivery: &'a DeliveryKey,
    artifact: &'a ArtifactRef,
) -> BodyHead<'a> {
    BodyHead {
        job,
        delivery,
        report: job.report(),
        title: "Warehouse 17 daily operations",
        date: job.date(),
        window: WindowBody {
            start: "2026-10-23T22:00:00Z".into(),
            end: "2026-10-24T22:00:00Z".into(),
        },
        revision: None,
        supersedes: None,
        artifact: ArtifactBody::of(artifact),
    }
}

#[test]
fn the_webhook_body_is_version_1_as_documented() {
    let (job, delivery, artifact) = sample_job(2048);
    let csv = "carrier,parcels\r\nDHL,17\r\n";
    let (html, text, csv_raw) = (raw("<p>17 parcels</p>"), raw("17 parcels"), raw(csv));
    let body = WebhookBody {
        version: BodyVersion,
        head: sample_head(&job, &delivery, &artifact),
        html: &html,
        text: &text,
        csv: Some(&csv_raw),
        attachments: AttachmentBody::csv_of(&job, &artifact, Some(csv)),
        charts: Vec::new(),
    };
    let encoded = serde_json::to_string(&body).expect("encode");
    assert_eq!(WEBHOOK_BODY_VERSION, 1);
    assert!(
        encoded.starts_with(r#"{"version":1,"#),
        "the version comes first, so a receiver can read it before the rest: {encoded}"
    );
    let value: Value = serde_json::from_str(&encoded).expect("json");
    pinned("webhook-v1.json", &value);
}

#[test]
fn the_linked_webhook_body_is_version_2_as_documented() {
    use dawnpost::delivery::webhook::{LINKED_BODY_VERSION, LinkedBody, LinkedVersion, PartLinks};
    let (job, delivery, artifact) = sample_job(24_117_248);
    let links = dawnpost::delivery::links::Links::new(
        &url::Url::parse("https://dawnpost.example/").expect("url"),
        b"0123456789abcdef0123456789abcdef".to_vec(),
    );
    let link = |part| links.link(&job, "9f2c", part);
    let body = LinkedBody {
        version: LinkedVersion,
        head: sample_head(&job, &delivery, &artifact),
        links: PartLinks {
            html: link(dawnpost::delivery::links::Part::Html),
            text: link(dawnpost::delivery::links::Part::Text),
            csv: Some(link(dawnpost::delivery::links::Part::Csv)),
        },
        inline_bytes: 25_165_824,
        max_body_bytes: 1 << 20,
        attachments: AttachmentBody::csv_of(&job, &artifact, Some("carrier,parcels\r\n")),
        charts: Vec::new(),
    };
    let encoded = serde_json::to_string(&body).expect("encode");
    assert_eq!(LINKED_BODY_VERSION, 2);
    assert!(encoded.starts_with(r#"{"version":2,"#), "{encoded}");
    let value: Value = serde_json::from_str(&encoded).expect("json");
    pinned("webhook-v2-linked.json", &value);
}

/// A quarantined job with a quarantined webhook delivery and a sent email, at fixed instants.
async fn quarantined_job(t: &TestLedger) -> (JobKey, DeliveryKey) {
    let l = &t.ledger;
    let fired = at(2026, 11, 29, 5, 30);
    let job = new_job("warehouse-17", "2026-11-29", fired);
    l.jobs()
        .insert_many(std::slice::from_ref(&job), fired)
        .await
        .expect("insert");
    let params = LeaseParams {
        owner: "node-a:4242".into(),
        now: at(2026, 11, 29, 5, 31),
        lease_for: Duration::minutes(5),
        limit: 10,
    };
    let leased = l.leases().jobs(&params).await.expect("lease").remove(0);
    let hook = DeliveryKey::new(
        job.key.clone(),
        dawnpost::delivery::webhook::KIND,
        "https://carrier.example/hooks/secret-path?x=1",
    );
    let mail = DeliveryKey::new(
        job.key.clone(),
        dawnpost::delivery::email::KIND,
        "ops@warehouse.example",
    );
    let artifact = ArtifactRef {
        html_key: "warehouse-17/2026-11-29/00ab.html".into(),
        text_key: "warehouse-17/2026-11-29/00ab.txt".into(),
        csv_key: None,
        sha256: "00ab".into(),
        bytes: 4096,
        parts: Vec::new(),
    };
    let deliveries = [
        NewDelivery { key: hook.clone() },
        NewDelivery { key: mail.clone() },
    ];
    l.jobs()
        .rendered(&leased.lease, &artifact, &deliveries, params.now)
        .await
        .expect("rendered");
    let sent_at = at(2026, 11, 29, 5, 32);
    for d in l
        .leases()
        .deliveries(&LeaseParams {
            now: sent_at,
            ..params.clone()
        })
        .await
        .expect("lease")
    {
        let (class, code, reason, next) = match *d.delivery.key.kind() {
            dawnpost::delivery::webhook::KIND => (
                ResponseClass::Permanent,
                410,
                "HTTP 410 from https://carrier.example/hooks/secret-path?x=1",
                DeliveryNext::Quarantine,
            ),
            _ => (
                ResponseClass::Accepted,
                250,
                "250 queued for ops@warehouse.example",
                DeliveryNext::Sent,
            ),
        };
        let attempt = NewAttempt {
            requested_at: sent_at,
            finished_at: sent_at + Duration::milliseconds(250),
            class,
            code: Some(code),
            retry_after: None,
            reason: Some(reason.into()),
            diagnostics: None,
        };
        l.deliveries()
            .finish(&d.lease, &attempt, next)
            .await
            .expect("finish");
    }
    l.jobs()
        .settle(&job.key, at(2026, 11, 29, 5, 33))
        .await
        .expect("settle");
    (job.key, hook)
}

async fn the_ops_api_answers_version_1_as_documented(t: &TestLedger) {
    let s = start(t).await;
    let (job, hook) = quarantined_job(t).await;
    let get = |path: String| {
        let s = &s;
        async move {
            let (status, body) = s.ops(Method::GET, &path, Some(TOKEN), None).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            body
        }
    };
    pinned(
        "api-v1-jobs.json",
        &get("/v1/jobs?state=quarantined".into()).await,
    );
    pinned("api-v1-job.json", &get(format!("/v1/jobs/{job}")).await);
    pinned("api-v1-dlq.json", &get("/v1/dlq".into()).await);
    let revealed = get("/v1/dlq?reveal=true".into()).await;
    assert_eq!(revealed["deliveries"][0]["key"], hook.to_string());

    let encoded: String =
        url::form_urlencoded::byte_serialize(hook.to_string().as_bytes()).collect();
    let audit = json!({"by": "alice", "reason": "carrier endpoint restored"});
    let (status, reply) = s
        .ops(
            Method::POST,
            &format!("/v1/deliveries/{encoded}/redrive"),
            Some(TOKEN),
            Some(audit.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    pinned("api-v1-delivery-redriven.json", &reply);
    pinned(
        "api-v1-job-redriven-history.json",
        &get(format!("/v1/jobs/{job}")).await,
    );
    s.cancel.cancel();
    let _ = s.handle.await;
}

/// A run request's reply: the job, and whether it was there before.
async fn a_run_request_answers_version_1_as_documented(t: &TestLedger) {
    use crate::common::ops_server::SECRET;
    let s = start(t).await;
    let body = r#"{"report": "warehouse-17", "date": "2026-11-29"}"#;
    let now = at(2026, 11, 30, 9, 0).timestamp();
    let (status, reply) = s.ingest("run-1", now, body, SECRET).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    pinned("api-v1-run.json", &reply);
    let (status, again) = s.ingest("run-1", now, body, SECRET).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["duplicate"], true);
    s.cancel.cancel();
    let _ = s.handle.await;
}

/// A job redrive's reply: the job and how many of its deliveries moved back.
async fn a_job_redrive_answers_version_1_as_documented(t: &TestLedger) {
    let s = start(t).await;
    let (job, _) = quarantined_job(t).await;
    let (status, reply) = s
        .ops(
            Method::POST,
            &format!("/v1/jobs/{job}/redrive"),
            Some(TOKEN),
            Some(json!({"by": "alice", "reason": "carrier endpoint restored"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    pinned("api-v1-job-redriven.json", &reply);
    s.cancel.cancel();
    let _ = s.handle.await;
}

on_both_backends!(
    the_ops_api_answers_version_1_as_documented,
    a_job_redrive_answers_version_1_as_documented,
    a_run_request_answers_version_1_as_documented,
);
