//! The recipients' store, both backends: bounces recorded on the deliveries they match (the
//! delivery stays `sent`), suppressions by hard bounce, complaint and soft bounces in a
//! window, an unmatched bounce kept and never suppressing, an operator's suppress and lift
//! audited in the row, and a leased delivery to a suppressed recipient ended `suppressed` —
//! or `quarantined` while a live node does not read that state.

use crate::common;

use chrono::Duration;
use common::fixtures::{rendered_job, sent_email, t0};
use common::{TestLedger, dk, jk};
use dawnpost::domain::bounce::{Bounce, BounceKind};
use dawnpost::ledger::{
    Audit, Cause, DeliveryState, JobState, NewSuppression, Node, SUPPRESSED_FORMAT, SoftPolicy, Via,
};

const SOFT: SoftPolicy = SoftPolicy {
    limit: 3,
    window: Duration::days(7),
};

fn bounce(kind: BounceKind, address: &str, status: Option<&str>) -> Bounce {
    let mut b = Bounce::new("dsn", kind);
    b.address = Some(address.to_string());
    b.status = status.map(str::to_string);
    b
}

async fn a_hard_bounce_is_a_later_event_that_suppresses_for_every_report(t: &TestLedger) {
    let l = &t.ledger;
    let key = sent_email(t, "w:2026-11-29", "bob@carrier-y.example").await;
    let at = t0() + Duration::hours(1);
    let b = bounce(BounceKind::Hard, "bob@carrier-y.example", Some("5.1.1"));
    let r = (l.recipients().record(&b, Some(&key), SOFT, at))
        .await
        .expect("record");
    assert_eq!(r.delivery.as_ref(), Some(&key));
    let s = r.suppressed.expect("suppressed");
    assert_eq!((s.cause, s.report.as_deref()), (Cause::Bounce, None));
    assert!(
        s.why.contains("5.1.1") && s.why.contains("dsn"),
        "{}",
        s.why
    );
    // The delivery stays sent; the bounce is on it.
    let d = l.deliveries().get(&key).await.expect("get").expect("row");
    assert_eq!(d.state, DeliveryState::Sent);
    let bounces = l.recipients().bounces_of(&key).await.expect("bounces");
    assert_eq!(bounces.len(), 1);
    assert_eq!(bounces[0].status.as_deref(), Some("5.1.1"));
    // In force for any report; a second bounce puts in force nothing new.
    let found = (l.recipients().suppressed("bob@carrier-y.example", "other"))
        .await
        .expect("read");
    assert_eq!(found.map(|f| f.id), Some(s.id));
    let again = (l.recipients().record(&b, Some(&key), SOFT, at))
        .await
        .expect("record");
    assert!(again.suppressed.is_none());
    assert_eq!(l.recipients().bounces_of(&key).await.expect("b").len(), 2);
}

async fn an_unmatched_bounce_is_kept_and_never_suppresses(t: &TestLedger) {
    let l = &t.ledger;
    let b = bounce(
        BounceKind::Hard,
        "stranger@elsewhere.example",
        Some("5.1.1"),
    );
    let r = (l.recipients().record(&b, None, SOFT, t0()))
        .await
        .expect("record");
    assert!(r.delivery.is_none() && r.suppressed.is_none());
    assert_eq!(l.recipients().unmatched().await.expect("count"), 1);
    let found = (l.recipients().suppressed("stranger@elsewhere.example", "w"))
        .await
        .expect("read");
    assert!(found.is_none());
}

async fn soft_bounces_suppress_only_when_enough_fall_in_the_window(t: &TestLedger) {
    let l = &t.ledger;
    let key = sent_email(t, "w:2026-11-29", "ann@carrier-y.example").await;
    let b = bounce(BounceKind::Soft, "ann@carrier-y.example", Some("4.2.2"));
    // Two long ago, outside the window; then two within it: not yet.
    for days in [30, 20, 2, 1] {
        let at = t0() - Duration::days(days);
        let r = (l.recipients().record(&b, Some(&key), SOFT, at))
            .await
            .expect("record");
        assert!(
            r.suppressed.is_none(),
            "after the bounce of {days} days ago"
        );
    }
    // The third within seven days does.
    let r = (l.recipients().record(&b, Some(&key), SOFT, t0()))
        .await
        .expect("record");
    let s = r.suppressed.expect("suppressed");
    assert_eq!(s.cause, Cause::SoftBounces);
    assert!(s.why.starts_with("3 soft bounces within 7d"), "{}", s.why);
}

async fn a_complaint_naming_a_report_suppresses_for_that_report(t: &TestLedger) {
    let l = &t.ledger;
    let key = sent_email(t, "w:2026-11-29", "carol@isp.example").await;
    let mut b = bounce(BounceKind::Complaint, "carol@isp.example", None);
    b.report = Some("w".into());
    let r = (l.recipients().record(&b, Some(&key), SOFT, t0()))
        .await
        .expect("record");
    let s = r.suppressed.expect("suppressed");
    assert_eq!(
        (s.cause, s.report.as_deref()),
        (Cause::Complaint, Some("w"))
    );
    let rec = l.recipients();
    assert!(
        rec.suppressed("carol@isp.example", "w")
            .await
            .expect("r")
            .is_some()
    );
    assert!(
        rec.suppressed("carol@isp.example", "other")
            .await
            .expect("r")
            .is_none()
    );
}

async fn an_operator_suppresses_and_lifts_audited_and_the_history_stays(t: &TestLedger) {
    let rec = t.ledger.recipients();
    let audit = Audit::new("ops", "asked to stop", Via::Cli).expect("audit");
    let s = NewSuppression {
        address: "dan@carrier-z.example",
        report: None,
        cause: Cause::Operator,
        why: "asked to stop",
        at: t0(),
    };
    assert!(rec.suppress(s, Some(&audit)).await.expect("suppress"));
    assert!(
        !rec.suppress(s, Some(&audit)).await.expect("again"),
        "one in force"
    );
    let lift = Audit::new("ops", "back on the team", Via::Cli).expect("audit");
    let later = t0() + Duration::days(1);
    let lifted = rec.unsuppress("dan@carrier-z.example", None, &lift, later);
    assert!(lifted.await.expect("lift"));
    let again = rec.unsuppress("dan@carrier-z.example", None, &lift, later);
    assert!(!again.await.expect("lift"), "nothing left in force");
    assert!(rec.suppressions(false, 10).await.expect("list").is_empty());
    let all = rec.suppressions(true, 10).await.expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].by.as_deref(), Some("ops"));
    let l = all[0].lifted.as_ref().expect("lifted");
    assert_eq!(
        (l.by.as_str(), l.reason.as_str(), l.at),
        ("ops", "back on the team", later)
    );
    // Suppressed again after the lift: a new row, the old one kept.
    assert!(rec.suppress(s, Some(&audit)).await.expect("suppress"));
    assert_eq!(rec.suppressions(true, 10).await.expect("list").len(), 2);
}

async fn a_message_id_is_looked_for_among_the_sent_deliveries_to_its_address(t: &TestLedger) {
    let rec = t.ledger.recipients();
    let key = sent_email(t, "w:2026-11-29", "Eve_X@Carrier-Y.example").await;
    sent_email(t, "w:2026-11-30", "evexx@carrier-y.example").await;
    let found = rec
        .sent_to("eve_x@carrier-y.example", 10)
        .await
        .expect("sent");
    assert_eq!(found, vec![key], "`_` is no wildcard; case does not matter");
}

async fn a_delivery_to_a_suppressed_recipient_ends_suppressed_and_its_job_done(t: &TestLedger) {
    let l = &t.ledger;
    // Every live node reads `suppressed` (there are none but this one).
    l.nodes().follow_formats(t0()).await.expect("formats");
    let leases = rendered_job(t, "w:2026-11-29", &["bob@carrier-y.example"]).await;
    let at = t0() + Duration::minutes(1);
    let why = "not sent: the recipient is suppressed for every report";
    let state = l.recipients().suppress_delivery(&leases[0], why, at).await;
    assert_eq!(state.expect("suppress"), DeliveryState::Suppressed);
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(d.state, DeliveryState::Suppressed);
    assert_eq!((d.attempts, d.last_error.as_deref()), (0, Some(why)));
    assert_eq!(d.terminal_at, Some(at));
    assert_eq!(
        l.jobs()
            .settle(&jk("w:2026-11-29"), at)
            .await
            .expect("settle"),
        JobState::Done
    );
    // Its lease is spent.
    let again = l.recipients().suppress_delivery(&leases[0], why, at).await;
    assert!(again.is_err());
    assert_eq!(
        l.deliveries()
            .attempts(&dk(&d.key.to_string()))
            .await
            .expect("a")
            .len(),
        0
    );
}

async fn while_an_older_node_is_live_a_suppressed_recipient_is_quarantined(t: &TestLedger) {
    let l = &t.ledger;
    // A live node of work format 4, which does not read `suppressed`.
    let old = Node {
        id: "old-node:1".into(),
        version: "0.2.0".into(),
        schema_version: 26,
        formats: (SUPPRESSED_FORMAT - 1).to_string(),
        started_at: t0(),
        heartbeat_at: t0(),
    };
    l.nodes()
        .heartbeat(&old)
        .await
        .expect("an older node's heartbeat");
    l.nodes()
        .follow_formats(t0() - Duration::minutes(1))
        .await
        .expect("formats");
    let leases = rendered_job(t, "w:2026-11-29", &["bob@carrier-y.example"]).await;
    let why = "not sent: the recipient is suppressed for every report";
    let state = l
        .recipients()
        .suppress_delivery(&leases[0], why, t0())
        .await;
    assert_eq!(state.expect("suppress"), DeliveryState::Quarantined);
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("row");
    assert_eq!(d.last_error.as_deref(), Some(why));
}

/// A DSN: `to` failed 5.1.1; the returned headers name `delivery`.
fn dsn_of(to: &str, delivery: &str) -> String {
    format!(
        "MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=R\r\n\r\n\
         --R\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; relay.example\r\n\r\n\
         Final-Recipient: rfc822; {to}\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n\
         --R\r\nContent-Type: text/rfc822-headers\r\n\r\nX-Dawnpost-Delivery: {delivery}\r\n--R--\r\n"
    )
}

/// `POST /v1/bounces/dsn` and `GET /v1/suppressions` over real HTTP, behind the ops token:
/// a DSN recorded and its address suppressed, masked unless revealed; what is not a report
/// and a missing token refused with their statuses, nothing suppressed (the bad-input table
/// of `hostile_http.rs` has the rest).
async fn the_ops_api_takes_a_dsn_and_lists_the_suppressions(t: &TestLedger) {
    use common::ops_server::{TOKEN, start};
    let s = start(t).await;
    let key = sent_email(t, "w:2026-11-29", "bob@carrier-y.example").await;
    let dsn = dsn_of("bob@carrier-y.example", &key.to_string());
    let post = |body: Vec<u8>, token: Option<&'static str>| {
        let mut req = (s.http.post(format!("{}/v1/bounces/dsn", s.base)))
            .header("content-type", "message/rfc822")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let r = post(dsn.clone().into_bytes(), None).await.expect("post");
    assert_eq!(r.status(), reqwest::StatusCode::UNAUTHORIZED);
    assert!(
        (t.ledger
            .recipients()
            .suppressions(true, 10)
            .await
            .expect("l"))
        .is_empty()
    );

    let r = post(dsn.into_bytes(), Some(TOKEN)).await.expect("post");
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let reply: serde_json::Value =
        serde_json::from_slice(&r.bytes().await.expect("body")).expect("json");
    assert_eq!(reply["version"], 1);
    let taken = &reply["bounces"][0];
    assert_eq!(
        taken["delivery"], "w:2026-11-29/email:b***@carrier-y.example",
        "{reply}"
    );
    assert_eq!(
        taken["suppressed"]["address"], "b***@carrier-y.example",
        "{reply}"
    );

    let (status, list) = (s.ops(reqwest::Method::GET, "/v1/suppressions", Some(TOKEN), None)).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    assert_eq!(list["suppressions"][0]["cause"], "bounce", "{list}");
    assert_eq!(list["suppressions"][0]["address"], "b***@carrier-y.example");
    let path = "/v1/suppressions?reveal=true";
    let (_, list) = s.ops(reqwest::Method::GET, path, Some(TOKEN), None).await;
    assert_eq!(list["suppressions"][0]["address"], "bob@carrier-y.example");

    // Counted by provider and kind; a DSN that matches no delivery is counted as unmatched.
    let stranger = dsn_of(
        "stranger@elsewhere.example",
        "w:2026-01-01/email:stranger@elsewhere.example",
    );
    let r = post(stranger.into_bytes(), Some(TOKEN))
        .await
        .expect("post");
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let metrics = (s.http.get(format!("{}/metrics", s.base)).send().await)
        .expect("scrape")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("dawnpost_bounces_total{provider=\"dsn\",kind=\"hard\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dawnpost_bounces_unmatched_total 1"),
        "{metrics}"
    );

    let r = post(b"Subject: hi\r\n\r\nhello\r\n".to_vec(), Some(TOKEN))
        .await
        .expect("post");
    assert_eq!(r.status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        t.ledger
            .recipients()
            .suppressions(true, 10)
            .await
            .expect("l")
            .len(),
        1
    );
    s.cancel.cancel();
}

on_both_backends!(
    a_hard_bounce_is_a_later_event_that_suppresses_for_every_report,
    an_unmatched_bounce_is_kept_and_never_suppresses,
    soft_bounces_suppress_only_when_enough_fall_in_the_window,
    a_complaint_naming_a_report_suppresses_for_that_report,
    an_operator_suppresses_and_lifts_audited_and_the_history_stays,
    a_message_id_is_looked_for_among_the_sent_deliveries_to_its_address,
    a_delivery_to_a_suppressed_recipient_ends_suppressed_and_its_job_done,
    while_an_older_node_is_live_a_suppressed_recipient_is_quarantined,
    the_ops_api_takes_a_dsn_and_lists_the_suppressions,
);
