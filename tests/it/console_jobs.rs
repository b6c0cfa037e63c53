//! The console's jobs and job pages and the operator's actions over real HTTP, both backends:
//! filters and keyset pages, the job's timeline and artifact preview, redrive and cancel with
//! their CSRF and role refusals and the audit rows they write.

use crate::common;

use common::console::{get, hidden, location, page, post_form, sign_in};
use common::fixtures::*;
use common::ops_server::{Server, TOKEN, VIEWER_TOKEN, start};
use common::{TestLedger, jk};
use dawnpost::ledger::{DeliveryLease, DeliveryState, JobState};
use dawnpost::report::render::Rendered;
use reqwest::StatusCode;
use reqwest::header::CONTENT_SECURITY_POLICY;

const JOB: &str = "warehouse-17:2026-11-29";

/// A job rendered into the server's artifact store, one delivery sent and one quarantined
/// (permanent), settled as quarantined.
async fn quarantined_job(s: &Server, t: &TestLedger) -> Vec<DeliveryLease> {
    let l = &t.ledger;
    ready_jobs(t, &[JOB]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let rendered = Rendered {
        html: "<html><body><h1>Stock at warehouse 17</h1></body></html>".into(),
        text: "Stock at warehouse 17".into(),
        csv: Some("shift,picked\nEarly,6210\n".into()),
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    };
    let (artifact, _) = s
        .artifacts
        .write("warehouse-17", "2026-11-29", &std::sync::Arc::new(rendered))
        .await
        .expect("write artifact");
    let emails = ["ops@carrier-x.example", "bad@carrier-y.example"];
    l.jobs()
        .rendered(
            &leased[0].lease,
            &artifact,
            &destinations(JOB, &emails),
            t0(),
        )
        .await
        .expect("rendered");
    let leases: Vec<DeliveryLease> = l
        .leases()
        .deliveries(&params("w1", t0(), 10))
        .await
        .expect("lease deliveries")
        .into_iter()
        .map(|d| d.lease)
        .collect();
    sent_and_quarantined(t, &leases).await;
    assert_eq!(
        l.jobs().settle(&jk(JOB), t0()).await.expect("settle"),
        JobState::Quarantined
    );
    leases
}

async fn jobs_filter_and_page_without_offsets(t: &TestLedger) {
    let s = start(t).await;
    quarantined_job(&s, t).await;
    let many: Vec<String> = (0..60).map(|i| format!("r{i:02}:2026-11-28")).collect();
    ready_jobs(t, &many.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let cookie = sign_in(&s, VIEWER_TOKEN).await;

    let html = page(&s, "/ui/jobs?state=quarantined", &cookie).await;
    assert!(html.contains(&format!("href=\"/ui/jobs/{JOB}\"")), "{html}");
    assert!(
        !html.contains("r00:2026-11-28"),
        "only quarantined jobs: {html}"
    );
    assert!(!html.contains("Next page"));

    let html = page(&s, "/ui/jobs?class=permanent", &cookie).await;
    assert!(html.contains(JOB) && !html.contains("r00:"), "{html}");
    let html = page(
        &s,
        "/ui/jobs?report=r07&from=2026-11-28&to=2026-11-28",
        &cookie,
    )
    .await;
    assert!(
        html.contains("r07:2026-11-28") && !html.contains("r08:"),
        "{html}"
    );

    // 61 jobs: a first page of 50 (newest date first), then the rest after its last key.
    let first = page(&s, "/ui/jobs", &cookie).await;
    assert!(
        first.contains(JOB) && first.contains("r48:2026-11-28"),
        "{first}"
    );
    assert!(!first.contains("r49:2026-11-28"), "{first}");
    let next = first
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a next link")
        .replace("&amp;", "&");
    assert_eq!(next, "/ui/jobs?after=r48%3A2026-11-28");
    let second = page(&s, &next, &cookie).await;
    assert!(second.contains("r49:2026-11-28") && second.contains("r59:2026-11-28"));
    assert!(!second.contains("r48:2026-11-28") && !second.contains("Next page"));

    let r = get(&s, "/ui/jobs?from=yesterday", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .expect("body")
            .contains("from: &quot;yesterday&quot; is not a date")
    );
    s.cancel.cancel();
}

async fn the_job_page_tells_the_whole_story_redacted(t: &TestLedger) {
    let s = start(t).await;
    quarantined_job(&s, t).await;
    let cookie = sign_in(&s, TOKEN).await;
    let html = page(&s, &format!("/ui/jobs/{JOB}"), &cookie).await;
    for fact in [
        "Fired",
        "Window",
        "Timeline",
        "permanent",
        "250",
        "bytes",
        "sha256",
    ] {
        assert!(html.contains(fact), "{fact} shown: {html}");
    }
    for full in ["ops@carrier-x.example", "bad@carrier-y.example"] {
        assert!(!html.contains(full), "{full} redacted: {html}");
    }
    // Times in the report's zone (Europe/Berlin) with the offset, UTC beside them: the
    // fixture fires at 05:30 UTC on 2026-10-25, 06:30 CET, the night summer time ends; its
    // window starts before the change, in CEST, on the previous UTC date.
    assert!(
        html.contains(
            "<time datetime=\"2026-10-25T05:30:00Z\">2026-10-25 06:30:00 CET (UTC+01:00) · 05:30:00 UTC</time>"
        ),
        "{html}"
    );
    assert!(
        html.contains("2026-10-24 01:30:00 CEST (UTC+02:00) · 2026-10-23 23:30:00 UTC"),
        "{html}"
    );
    assert!(
        html.contains("carrier-y.example"),
        "the domain stays: {html}"
    );
    assert!(
        html.contains("<iframe") && html.contains("sandbox=\"\""),
        "{html}"
    );
    assert!(html.contains("Redrive the job") && html.contains("Redrive this delivery"));

    let r = get(&s, &format!("/ui/jobs/{JOB}/artifact"), Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let csp = r.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("csp")
        .to_string();
    assert!(
        csp.contains("sandbox") && csp.contains("frame-ancestors 'self'"),
        "{csp}"
    );
    assert!(
        r.text()
            .await
            .expect("body")
            .contains("Stock at warehouse 17")
    );

    // The CSV attachment, linked from the page and served as a download.
    let link = format!("href=\"/ui/jobs/{JOB}/artifact.csv\">warehouse-17-2026-11-29.csv</a>");
    assert!(html.contains(&link), "{html}");
    let r = get(&s, &format!("/ui/jobs/{JOB}/artifact.csv"), Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"warehouse-17-2026-11-29.csv\""
    );
    assert_eq!(r.text().await.expect("body"), "shift,picked\nEarly,6210\n");
    let r = get(&s, "/ui/jobs/warehouse-17:2026-11-28/artifact.csv", None).await;
    assert_ne!(r.status(), StatusCode::OK, "signed in only");

    let r = get(&s, "/ui/jobs/nope:2026-11-29", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = get(&s, "/ui/jobs/nope:2026-11-29/artifact.csv", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    s.cancel.cancel();
}

async fn a_delivery_redrive_is_checked_then_audited(t: &TestLedger) {
    let s = start(t).await;
    let leases = quarantined_job(&s, t).await;
    let path = format!("/ui/jobs/{JOB}");
    let action = format!("{path}/redrive");

    // The viewer sees no action and is refused one even with its own CSRF token.
    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, &path, &viewer).await;
    assert!(
        !html.contains("Redrive the job") && !html.contains("Redrive this"),
        "{html}"
    );
    assert!(!html.contains("name=\"reason\""), "no action form: {html}");
    let csrf = hidden(&html, "csrf");
    let form = [("csrf", csrf.as_str()), ("by", "vic"), ("reason", "try")];
    let r = post_form(&s, &action, Some(&viewer), &form).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, &path, &operator).await;
    let csrf = hidden(&html, "csrf");
    let delivery = hidden(&html, "delivery");
    let forged = [
        ("csrf", "x"),
        ("by", "ann"),
        ("reason", "fixed"),
        ("delivery", &delivery),
    ];
    let r = post_form(&s, &action, Some(&operator), &forged).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let unnamed = [
        ("csrf", csrf.as_str()),
        ("by", " "),
        ("reason", "fixed"),
        ("delivery", &delivery),
    ];
    let r = post_form(&s, &action, Some(&operator), &unnamed).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        t.ledger
            .deliveries()
            .redrives(&jk(JOB))
            .await
            .expect("audit")
            .is_empty()
    );

    let form = [
        ("csrf", csrf.as_str()),
        ("by", "ann"),
        ("reason", "carrier fixed the inbox"),
        ("delivery", &delivery),
    ];
    let r = post_form(&s, &action, Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), path);
    let d = t
        .ledger
        .deliveries()
        .get(leases[1].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Pending);
    let audit = t
        .ledger
        .deliveries()
        .redrives(&jk(JOB))
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].by.as_str(), audit[0].via.as_deref()),
        ("ann", Some("console:operator"))
    );
    assert_eq!(audit[0].delivery_key.as_ref(), Some(leases[1].key()));
    let html = page(&s, &path, &operator).await;
    assert!(html.contains("carrier fixed the inbox"), "{html}");

    // Again: the delivery is no longer quarantined.
    let r = post_form(&s, &action, Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(
        !r.text()
            .await
            .expect("body")
            .contains("bad@carrier-y.example")
    );
    s.cancel.cancel();
}

async fn an_operator_cancels_a_ready_job_with_a_reason(t: &TestLedger) {
    let s = start(t).await;
    ready_jobs(t, &["warehouse-17:2026-11-30"]).await;
    let path = "/ui/jobs/warehouse-17:2026-11-30";
    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, path, &operator).await;
    assert!(html.contains("Cancel the job") && !html.contains("Redrive the job"));
    let csrf = hidden(&html, "csrf");
    let form = [
        ("csrf", csrf.as_str()),
        ("by", "ann"),
        ("reason", "duplicate"),
    ];
    let r = post_form(&s, &format!("{path}/cancel"), Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let job = t
        .ledger
        .jobs()
        .get(&jk("warehouse-17:2026-11-30"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Cancelled);
    let audit = t
        .ledger
        .deliveries()
        .redrives(&job.key)
        .await
        .expect("audit");
    assert_eq!(
        (audit[0].action.as_str(), audit[0].reason.as_str()),
        ("cancel", "duplicate")
    );
    s.cancel.cancel();
}

/// Also: only the redrive, which made work due, tells the other nodes (a work signal on
/// PostgreSQL); the sign-ins and the refused cancel make nothing due and tell nobody.
async fn an_operator_redrives_the_whole_job_and_a_viewer_cannot_cancel(t: &TestLedger) {
    let s = start(t).await;
    let leases = quarantined_job(&s, t).await;
    let path = format!("/ui/jobs/{JOB}");
    let mut listener = t.ledger.work_listener().await.expect("listen");

    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let csrf = hidden(&page(&s, &path, &viewer).await, "csrf");
    let form = [("csrf", csrf.as_str()), ("by", "vic"), ("reason", "stale")];
    let r = post_form(&s, &format!("{path}/cancel"), Some(&viewer), &form).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let operator = sign_in(&s, TOKEN).await;
    let csrf = hidden(&page(&s, &path, &operator).await, "csrf");
    let form = [
        ("csrf", csrf.as_str()),
        ("by", "ann"),
        ("reason", "all receivers fixed"),
    ];
    if let Some(listener) = &mut listener {
        let quiet =
            tokio::time::timeout(std::time::Duration::from_millis(300), listener.next()).await;
        assert!(quiet.is_err(), "a sign-in or a refusal sent a work signal");
    }
    let r = post_form(&s, &format!("{path}/redrive"), Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    if let Some(listener) = &mut listener {
        let heard = tokio::time::timeout(std::time::Duration::from_secs(10), listener.next()).await;
        assert!(
            heard
                .expect("the redrive's notice within 10 s")
                .expect("listening")
        );
    }
    let job = t
        .ledger
        .jobs()
        .get(&jk(JOB))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Delivering);
    let d = t
        .ledger
        .deliveries()
        .get(leases[1].key())
        .await
        .expect("get")
        .expect("delivery");
    assert_eq!(d.state, DeliveryState::Pending);
    let audit = t
        .ledger
        .deliveries()
        .redrives(&jk(JOB))
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert!(audit[0].delivery_key.is_none(), "the whole job");
    assert_eq!(
        (audit[0].action.as_str(), audit[0].via.as_deref()),
        ("redrive", Some("console:operator"))
    );
    s.cancel.cancel();
}

/// The job page names every part of the artifact and marks the delivery that got a link
/// instead of the whole report.
async fn the_job_page_names_the_parts_and_a_link_sent_instead(t: &TestLedger) {
    let s = start(t).await;
    let leases = quarantined_job(&s, t).await;
    assert_eq!(leases.len(), 2);
    let cookie = sign_in(&s, TOKEN).await;
    let html = page(&s, &format!("/ui/jobs/{JOB}"), &cookie).await;
    assert!(html.contains(".html, .txt, .csv"), "{html}");
    assert!(!html.contains("got a link instead"), "{html}");

    // A second job with a chart, whose one email was too large and went as a bounded copy
    // with a link.
    let key = "warehouse-17:2026-11-30";
    let leases = charted_job(&s, t, key).await;
    let mut linked = attempt(dawnpost::domain::outcome::ResponseClass::Accepted, t0());
    linked.reason = Some(format!("250 ok; {}", dawnpost::delivery::SENT_LINKED));
    (t.ledger.deliveries())
        .finish(&leases[0], &linked, dawnpost::ledger::DeliveryNext::Sent)
        .await
        .expect("sent");
    let html = page(&s, &format!("/ui/jobs/{key}"), &cookie).await;
    assert!(
        html.contains("got a link instead of the whole report"),
        "{html}"
    );
    assert!(html.contains(".html, .txt, .by_hour.png"), "{html}");
    // The preview frame shows the chart: its `cid:` is the picture itself there.
    let r = get(&s, &format!("/ui/jobs/{key}/artifact"), Some(&cookie)).await;
    let frame = r.text().await.expect("body");
    assert!(!frame.contains("cid:"), "{frame}");
    let src = frame
        .split("src=\"data:image/png;base64,")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the chart inline");
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(src)
        .expect("base64");
    assert_eq!(png, PNG, "the stored picture");
    s.cancel.cancel();
}

/// The smallest PNG there is: one transparent pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// Job `key` rendered into the server's store with a chart `by_hour` placed by its `cid:`,
/// one email destination; its delivery lease.
async fn charted_job(s: &Server, t: &TestLedger, key: &str) -> Vec<DeliveryLease> {
    let l = &t.ledger;
    ready_jobs(t, &[key]).await;
    let leased = (l.leases().jobs(&params("w1", t0(), 10)))
        .await
        .expect("lease");
    let cid = dawnpost::report::render::content_id("by_hour");
    let rendered = Rendered {
        html: format!("<html><body><img src=\"cid:{cid}\" alt=\"Orders by hour\"></body></html>"),
        text: "Orders by hour".into(),
        csv: None,
        parts: Default::default(),
        images: [("by_hour".to_string(), PNG.to_vec())].into(),
        xlsx: None,
    };
    let (report, date) = key.split_once(':').expect("key");
    let (artifact, _) = (s.artifacts)
        .write(report, date, &std::sync::Arc::new(rendered))
        .await
        .expect("write artifact");
    let dests = destinations(key, &["ops@carrier-x.example"]);
    (l.jobs().rendered(&leased[0].lease, &artifact, &dests, t0()))
        .await
        .expect("rendered");
    (l.leases().deliveries(&params("w1", t0(), 10)))
        .await
        .expect("lease deliveries")
        .into_iter()
        .map(|d| d.lease)
        .collect()
}

on_both_backends!(
    the_job_page_names_the_parts_and_a_link_sent_instead,
    an_operator_redrives_the_whole_job_and_a_viewer_cannot_cancel,
    jobs_filter_and_page_without_offsets,
    the_job_page_tells_the_whole_story_redacted,
    a_delivery_redrive_is_checked_then_audited,
    an_operator_cancels_a_ready_job_with_a_reason,
);
