//! The ledger's listing reads and the audit of operators' actions, on both backends: jobs by
//! filter a keyset page at a time, and cancels audited like redrives.

use crate::common;
use common::{TestLedger, jk};

use common::fixtures::*;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Audit, JobFilter, JobState, Via};

fn keys(jobs: &[dawnpost::ledger::Job]) -> Vec<String> {
    jobs.iter().map(|j| j.key.to_string()).collect()
}

async fn job_pages_walk_every_job_once_newest_date_first(t: &TestLedger) {
    let mut all = Vec::new();
    for date in ["2026-10-23", "2026-10-24", "2026-10-25"] {
        for report in ["a", "b", "c", "d", "e"] {
            all.push(format!("{report}:{date}"));
        }
    }
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    ready_jobs(t, &refs).await;

    let whole = t
        .ledger
        .jobs()
        .list(&JobFilter::default())
        .await
        .expect("list");
    assert_eq!(whole.len(), 15);
    assert_eq!(whole[0].key, "a:2026-10-25", "newest date first, then key");
    assert_eq!(whole[14].key, "e:2026-10-23");

    // Pages of 4, each after the last key of the one before: every job once, same order.
    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let page = t
            .ledger
            .jobs()
            .list(&JobFilter {
                after: after.clone(),
                limit: Some(4),
                ..JobFilter::default()
            })
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        after = page.last().map(|j| j.key.clone());
        walked.extend(keys(&page));
    }
    assert_eq!(walked, keys(&whole));

    let dated = t
        .ledger
        .jobs()
        .list(&JobFilter {
            from: "2026-10-24".parse().ok(),
            to: "2026-10-24".parse().ok(),
            report: Some("c".into()),
            ..JobFilter::default()
        })
        .await
        .expect("dated");
    assert_eq!(keys(&dated), ["c:2026-10-24"]);
}

async fn job_lists_filter_by_state_and_delivery_class(t: &TestLedger) {
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    sent_and_quarantined(t, &leases).await;
    t.ledger
        .jobs()
        .settle(&jk("w:2026-10-25"), t0())
        .await
        .expect("settle");
    ready_jobs(t, &["x:2026-10-25"]).await;

    let by_class = |class| JobFilter {
        class: Some(class),
        ..JobFilter::default()
    };
    let permanent = t
        .ledger
        .jobs()
        .list(&by_class(ResponseClass::Permanent))
        .await
        .expect("permanent");
    assert_eq!(keys(&permanent), ["w:2026-10-25"]);
    let transient = t
        .ledger
        .jobs()
        .list(&by_class(ResponseClass::Transient))
        .await
        .expect("transient");
    assert!(transient.is_empty());
    let quarantined = t
        .ledger
        .jobs()
        .list(&JobFilter {
            state: Some(JobState::Quarantined),
            ..JobFilter::default()
        })
        .await
        .expect("quarantined");
    assert_eq!(keys(&quarantined), ["w:2026-10-25"]);
}

async fn cancels_and_redrives_are_audited_with_who_why_and_via(t: &TestLedger) {
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    sent_and_quarantined(t, &leases).await;
    let key = jk("w:2026-10-25");
    t.ledger.jobs().settle(&key, t0()).await.expect("settle");
    let later = t0() + chrono::Duration::hours(1);
    t.ledger
        .deliveries()
        .redrive(
            leases[1].key(),
            &Audit::new("alice", "inbox fixed", Via::Console).expect("audited"),
            later,
        )
        .await
        .expect("redrive");
    ready_jobs(t, &["x:2026-10-25"]).await;
    t.ledger
        .jobs()
        .cancel(
            &jk("x:2026-10-25"),
            &Audit::new("bob", "report retired", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("cancel");

    let redrives = t.ledger.deliveries().redrives(&key).await.expect("audit");
    assert_eq!(redrives.len(), 1);
    let r = &redrives[0];
    assert_eq!(
        (r.action.as_str(), r.by.as_str(), r.reason.as_str()),
        ("redrive", "alice", "inbox fixed")
    );
    assert_eq!(r.via.as_deref(), Some("console:operator"));
    assert_eq!(r.delivery_key.as_ref(), Some(leases[1].key()));

    let cancels = t
        .ledger
        .deliveries()
        .redrives(&jk("x:2026-10-25"))
        .await
        .expect("audit");
    assert_eq!(cancels.len(), 1);
    assert_eq!(
        (
            cancels[0].action.as_str(),
            cancels[0].by.as_str(),
            cancels[0].via.as_deref()
        ),
        ("cancel", "bob", Some("cli"))
    );
    assert!(cancels[0].delivery_key.is_none());
}

on_both_backends!(
    job_pages_walk_every_job_once_newest_date_first,
    job_lists_filter_by_state_and_delivery_class,
    cancels_and_redrives_are_audited_with_who_why_and_via,
);
