//! The HTTP surface over real HTTP on port 0: signed ingestion, the ops API, metrics, health.

use crate::common;
use common::jk;

use std::sync::Arc;
use std::time::Duration;

use common::ops_server::{OTHER_SECRET, SECRET, TOKEN, start};
use common::{TestLedger, at};
use dawnpost::delivery::signing::Secret;
use dawnpost::domain::keys::DeliveryKey;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, JobState, LeaseParams, NewAttempt, NewDelivery};
use dawnpost::runtime::supervisor::{OnFailure, Service, SupervisorConfig, supervise};
use dawnpost::server::check_exposure;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn signed_ingestion_statuses(t: &TestLedger) {
    let s = start(t).await;
    let now = s.now();
    let body = r#"{"report": "warehouse-17", "date": "2026-11-29"}"#;

    let (status, reply) = s.ingest("msg_1", now, body, SECRET).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    assert_eq!(
        reply,
        json!({"version": 1, "job": "warehouse-17:2026-11-29", "duplicate": false})
    );
    // 202 came after the commit: the job is there.
    let job = t
        .ledger
        .jobs()
        .get(&jk("warehouse-17:2026-11-29"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(
        (job.state, job.origin.as_str()),
        (JobState::Ready, "ingest")
    );

    let (status, reply) = s.ingest("msg_1", now, body, SECRET).await;
    assert_eq!(status, StatusCode::OK, "a replayed webhook-id");
    assert_eq!(
        reply,
        json!({"version": 1, "job": "warehouse-17:2026-11-29", "duplicate": true})
    );
    let (status, reply) = s.ingest("msg_2", now, body, SECRET).await;
    assert_eq!(status, StatusCode::OK, "an existing job key");
    assert_eq!(reply["duplicate"], true);

    // Without a date: today in the report's timezone.
    let (status, reply) = s
        .ingest("msg_3", now, r#"{"report": "warehouse-17"}"#, SECRET)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(reply["job"], "warehouse-17:2026-11-30");

    let (status, reply) = s.ingest("msg_4", now, body, OTHER_SECRET).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "signed with another secret"
    );
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("signature"))
    );
    // A tampered body: signed one body, sent another.
    let sig = Secret::parse(SECRET)
        .expect("secret")
        .sign("msg_5", now, body.as_bytes());
    let resp = s
        .http
        .post(format!("{}/v1/runs", s.base))
        .header("webhook-id", "msg_5")
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", sig)
        .body(r#"{"report": "warehouse-17", "date": "2026-11-28"}"#)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "tampered body");
    let (status, reply) = s.ingest("msg_6", now - 301, body, SECRET).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "stale timestamp");
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("5 minutes"))
    );
    let (status, _) = s.ingest("msg_7", now + 301, body, SECRET).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "timestamp from the future"
    );
    let resp = s
        .http
        .post(format!("{}/v1/runs", s.base))
        .body(body)
        .send()
        .await
        .expect("request");
    assert_eq!(
        resp.status(),
        StatusCode::UNAUTHORIZED,
        "no signature headers"
    );
    let reply: Value = serde_json::from_slice(&resp.bytes().await.expect("body")).expect("json");
    assert!(reply["error"].is_string());

    let big = format!(
        r#"{{"report": "warehouse-17", "pad": "{}"}}"#,
        "x".repeat(70 * 1024)
    );
    let (status, reply) = s.ingest("msg_8", now, &big, SECRET).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply["error"].is_string());
    let (status, reply) = s
        .ingest("msg_9", now, r#"{"report": "nope"}"#, SECRET)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    let (status, _) = s.ingest("msg_10", now, r#"{"report": 17}"#, SECRET).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "malformed body");
    let (status, _) = s.ingest("msg_11", now, "not json", SECRET).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, reply) = s
        .ingest(
            "msg_12",
            now,
            r#"{"report": "warehouse-17", "date": "2026-02-30"}"#,
            SECRET,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "invalid date");
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("2026-02-30"))
    );
    // Refused requests recorded nothing.
    assert!(
        t.ledger
            .jobs()
            .get(&jk("warehouse-17:2026-11-28"))
            .await
            .expect("get")
            .is_none()
    );
    s.cancel.cancel();
    let _ = s.handle.await;
}

async fn ops_api_needs_the_token_and_redrives_with_audit(t: &TestLedger) {
    let s = start(t).await;
    let now = s.now();
    s.ingest(
        "m1",
        now,
        r#"{"report": "warehouse-17", "date": "2026-11-29"}"#,
        SECRET,
    )
    .await;
    // Make one delivery quarantined, through the ledger's own transitions.
    let l = &t.ledger;
    let params = LeaseParams {
        owner: "test".into(),
        now: at(2026, 11, 30, 9, 0),
        lease_for: chrono::Duration::minutes(5),
        limit: 10,
    };
    let job = l.leases().jobs(&params).await.expect("lease").remove(0);
    let dkey = DeliveryKey::new(
        job.job.key.clone(),
        dawnpost::delivery::webhook::KIND,
        "https://carrier.example/hooks?x=1",
    );
    let artifact = dawnpost::report::artifact::ArtifactRef {
        html_key: "a.html".into(),
        text_key: "a.txt".into(),
        csv_key: None,
        sha256: "00".into(),
        bytes: 1,
        parts: Vec::new(),
    };
    let d = NewDelivery { key: dkey.clone() };
    l.jobs()
        .rendered(&job.lease, &artifact, &[d], params.now)
        .await
        .expect("rendered");
    let dl = l
        .leases()
        .deliveries(&params)
        .await
        .expect("lease")
        .remove(0);
    let attempt = NewAttempt {
        requested_at: params.now,
        finished_at: params.now,
        class: ResponseClass::Permanent,
        code: Some(410),
        retry_after: None,
        reason: Some("HTTP 410".into()),
        diagnostics: None,
    };
    l.deliveries()
        .finish(&dl.lease, &attempt, DeliveryNext::Quarantine)
        .await
        .expect("finish");
    l.jobs()
        .settle(&job.job.key, params.now)
        .await
        .expect("settle");

    use reqwest::Method;
    let (status, reply) = s.ops(Method::GET, "/v1/jobs", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "missing token");
    assert!(reply["error"].is_string());
    let (status, _) = s
        .ops(
            Method::GET,
            "/v1/jobs",
            Some("wrong-token-0123456789"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "wrong token");
    let (status, _) = s.ops(Method::GET, "/v1/dlq", Some("x"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, jobs) = s
        .ops(
            Method::GET,
            "/v1/jobs?state=quarantined&limit=5",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(jobs.as_array().map(Vec::len), Some(1));
    assert_eq!(jobs[0]["key"], "warehouse-17:2026-11-29");
    let (status, _) = s
        .ops(Method::GET, "/v1/jobs?state=bogus", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, history) = s
        .ops(
            Method::GET,
            "/v1/jobs/warehouse-17:2026-11-29",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history["deliveries"][0]["attempt_log"][0]["code"], 410);
    let (status, _) = s
        .ops(Method::GET, "/v1/jobs/nope:2026-01-01", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Redacted as the CLI prints it (the destination's path is not shown), unless revealed.
    let (status, dlq) = s.ops(Method::GET, "/v1/dlq", Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(dlq["deliveries"][0]["key"], dkey.redacted());
    assert!(
        !dlq.to_string().contains(dkey.destination()),
        "the webhook URL in full: {dlq}"
    );
    let (status, dlq) = s
        .ops(Method::GET, "/v1/dlq?reveal=true", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(dlq["deliveries"][0]["key"], dkey.to_string());

    let redrive = json!({"by": "alice", "reason": "carrier endpoint restored"});
    let encoded: String =
        url::form_urlencoded::byte_serialize(dkey.to_string().as_bytes()).collect();
    // The ingested run nudged this node's pool; reads and refused writes nudge nothing.
    let (pool, clock_now) = (s.pipeline.nudge(), at(2026, 11, 30, 9, 0));
    assert!(pool.due_by(clock_now), "an ingested run is due at once");
    pool.looked(clock_now);
    let (status, _) = s
        .ops(
            Method::POST,
            &format!("/v1/deliveries/{encoded}/redrive"),
            Some(TOKEN),
            Some(json!({"by": "alice"})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "reason is required"
    );
    let (status, reply) = s
        .ops(
            Method::POST,
            &format!("/v1/deliveries/{encoded}/redrive"),
            Some(TOKEN),
            Some(json!({"by": "alice", "reason": "  "})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a blank reason");
    assert_eq!(
        reply["error"], "by and reason must not be empty: the action is audited",
        "{reply}"
    );
    assert!(!pool.due_by(clock_now), "a refused write made nothing due");
    let (status, reply) = s
        .ops(
            Method::POST,
            &format!("/v1/deliveries/{encoded}/redrive"),
            Some(TOKEN),
            Some(redrive.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["job"], "warehouse-17:2026-11-29");
    assert!(
        pool.due_by(clock_now),
        "the redrive nudged the pool: it goes out at once"
    );
    let audit = l
        .deliveries()
        .redrives(&jk("warehouse-17:2026-11-29"))
        .await
        .expect("audit");
    assert_eq!(
        (audit[0].by.as_str(), audit[0].delivery_key.as_ref()),
        ("alice", Some(&dkey))
    );
    let (status, reply) = s
        .ops(
            Method::POST,
            &format!("/v1/deliveries/{encoded}/redrive"),
            Some(TOKEN),
            Some(redrive.clone()),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "pending work is not redriven: {reply}"
    );
    let (status, _) = s
        .ops(
            Method::POST,
            "/v1/jobs/warehouse-17:2026-11-30/redrive",
            Some(TOKEN),
            Some(redrive.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.cancel.cancel();
    let _ = s.handle.await;
}

async fn metrics_and_health(t: &TestLedger) {
    let s = start(t).await;
    s.ingest("m1", s.now(), r#"{"report": "warehouse-17"}"#, SECRET)
        .await;
    s.clock.advance(chrono::Duration::seconds(90));
    let resp = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("metrics");
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.expect("text");
    assert!(text.contains("dawnpost_jobs{state=\"ready\"} 1"), "{text}");
    assert!(
        text.contains("dawnpost_oldest_ready_job_age_seconds 90"),
        "{text}"
    );
    assert!(
        text.contains("dawnpost_ingested_runs_total{result=\"created\"} 1"),
        "{text}"
    );
    // A run recorded into the same metrics: the counters move.
    let opts = dawnpost::node::runner::RunOnceOptions {
        date: chrono::NaiveDate::from_ymd_opt(2026, 11, 30),
        max_wait: Duration::from_secs(30),
        progress: false,
        metrics: Some(s.metrics.clone()),
    };
    let config = s.project.load();
    let summary = dawnpost::node::runner::run_once(
        &config,
        t.ledger.clone(),
        Arc::new(s.clock.clone()),
        &opts,
        CancellationToken::new(),
    )
    .await
    .expect("run");
    assert_eq!(summary.exit_code, 0);
    let text = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for name in dawnpost::runtime::metrics::NAMES {
        assert!(text.contains(name), "{name} missing from /metrics");
    }
    assert!(
        text.contains("dawnpost_delivery_attempts_total{kind=\"email\",class=\"accepted\"} 1"),
        "{text}"
    );
    assert!(text.contains("dawnpost_jobs{state=\"done\"} 1"), "{text}");
    let last = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "dawnpost_report_last_accepted_timestamp_seconds{report=\"warehouse-17\"} ",
            )
        })
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("the report's last accepted delivery: {text}"));
    let sent_at = dawnpost::domain::clock::Clock::now(&s.clock).timestamp() as f64;
    assert!(
        (sent_at..sent_at + 60.0).contains(&last),
        "{last} vs {sent_at}"
    );
    assert!(
        text.contains("dawnpost_render_duration_seconds_count 1"),
        "{text}"
    );
    assert!(
        !text.contains("dawnpost_artifact_bytes_written_total 0\n"),
        "{text}"
    );
    let health = s
        .http
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    let ready = s
        .http
        .get(format!("{}/readyz", s.base))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::OK);

    // A service that failed and waits for its restart: not ready, and the body says which.
    let stop = CancellationToken::new();
    let failing = Service::new("pool", OnFailure::Restart, |_| {
        Box::pin(async { Err("the completer stopped".into()) })
    });
    let config = SupervisorConfig {
        backoff_base: Duration::from_secs(3600),
        ..SupervisorConfig::default()
    };
    let running = Service::new("tick", OnFailure::Restart, |cancel| {
        Box::pin(async move {
            cancel.cancelled().await;
            Ok(())
        })
    });
    let supervisor = tokio::spawn(supervise(
        vec![failing, running],
        s.health.clone(),
        s.metrics.clone(),
        config,
        stop.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(10), async {
        while s.health.down().is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the failure is recorded");
    let ready = s
        .http
        .get(format!("{}/readyz", s.base))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = serde_json::from_str(&ready.text().await.expect("body")).expect("json");
    let why = body["error"].as_str().expect("an error");
    assert!(
        why.contains("pool is down") && why.contains("the completer stopped"),
        "{why}"
    );
    assert_eq!(body["services"]["pool"]["state"], "down");
    let metrics = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("dawnpost_service_failures_total{service=\"pool\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dawnpost_service_up{service=\"pool\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dawnpost_service_up{service=\"tick\"} 1"),
        "{metrics}"
    );
    stop.cancel();
    supervisor.await.expect("join").expect("stopped cleanly");

    t.ledger.close().await;
    let ready = s
        .http
        .get(format!("{}/readyz", s.base))
        .send()
        .await
        .expect("readyz");
    assert_eq!(
        ready.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a closed ledger is not ready"
    );
    let started = std::time::Instant::now();
    s.cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), s.handle)
        .await
        .expect("stops")
        .expect("join")
        .expect("serve");
    assert!(started.elapsed() < Duration::from_secs(5));
}

on_both_backends!(
    signed_ingestion_statuses,
    ops_api_needs_the_token_and_redrives_with_audit,
    metrics_and_health
);

#[test]
fn exposed_binds_need_both_credentials() {
    let public = "0.0.0.0:8080".parse().expect("addr");
    let local = "127.0.0.1:8080".parse().expect("addr");
    assert!(check_exposure(local, false, false).is_ok());
    assert!(check_exposure(public, true, true).is_ok());
    assert!(check_exposure(public, true, false).is_err());
    assert!(check_exposure(public, false, true).is_err());
    assert!(check_exposure("[::1]:8080".parse().expect("addr"), false, false).is_ok());
}
