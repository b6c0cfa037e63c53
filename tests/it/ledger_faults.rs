//! The ledger under faults, on both backends: a redrive racing retention, leases lost again and
//! again, sends cut at shutdown, and the render instant that makes renders repeatable.

use crate::common;
use common::jk;

use chrono::Duration;
use common::TestLedger;
use common::fixtures::*;
use dawnpost::domain::keys::DeliveryKey;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::domain::window::rfc3339;
use dawnpost::ledger::{Audit, Via};
use dawnpost::ledger::{
    DeliveryNext, DeliveryState, GroupCommit, JobState, LeaseTo, LedgerError, Render, RescueBudget,
};

/// A quarantined job whose artifact retention already deleted: all retention has left to do
/// is delete its rows.
async fn quarantined_job(t: &TestLedger, key: &str) -> DeliveryKey {
    let l = &t.ledger;
    let leases = rendered_job(t, key, &["ops@example.com"]).await;
    l.deliveries()
        .finish(
            &leases[0],
            &attempt(ResponseClass::Permanent, t0()),
            DeliveryNext::Quarantine,
        )
        .await
        .expect("finish");
    assert_eq!(
        l.jobs().settle(&jk(key), t0()).await.expect("settle"),
        JobState::Quarantined
    );
    assert!(
        l.retention()
            .mark_artifact_deleted(&jk(key), t0())
            .await
            .expect("mark")
    );
    leases[0].key().clone()
}

async fn a_redrive_between_the_check_and_the_delete_is_not_deleted(t: &TestLedger) {
    let l = &t.ledger;
    let key = "r:2026-10-25";
    quarantined_job(t, key).await;
    let later = t0() + Duration::days(60);
    // The sweeper's check: the job is a candidate...
    let page = l
        .retention()
        .terminal_before(later, 10)
        .await
        .expect("page");
    assert_eq!(page.len(), 1);
    // ...then an operator redrives it before the delete...
    l.jobs()
        .redrive(
            &jk(key),
            &Audit::new("ops", "carrier fixed their inbox", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("redrive");
    // ...and every retention write now refuses it.
    assert_eq!(l.retention().delete(&jk(key)).await.expect("delete"), None);
    assert_eq!(
        l.retention()
            .clear_diagnostics(&jk(key), later)
            .await
            .expect("clear"),
        None
    );
    let retired = l
        .retention()
        .retire_artifact(&jk(key), later, || async {
            panic!("the artifact of live work must not be deleted");
            #[allow(unreachable_code)]
            Ok::<(), ()>(())
        })
        .await
        .expect("retire");
    assert!(retired.is_none());
    let job = l
        .jobs()
        .get(&jk(key))
        .await
        .expect("get")
        .expect("still there");
    assert_eq!(job.state, JobState::Ready, "redriven to render again");
    assert_eq!(
        l.deliveries()
            .redrives(&jk(key))
            .await
            .expect("redrives")
            .len(),
        1
    );
}

async fn redrives_racing_deletes_are_never_lost(t: &TestLedger) {
    let other = t.reopen().await;
    for i in 0..24 {
        let text = format!("race-{i}:2026-10-25");
        let delivery = quarantined_job(t, &text).await;
        let key = jk(&text);
        let later = t0() + Duration::days(60);
        let audit = Audit::new("ops", "retry", Via::Cli).expect("audited");
        let (deleted, redriven) = if i % 2 == 0 {
            tokio::join!(
                t.ledger.retention().delete(&key),
                other.jobs().redrive(&key, &audit, later)
            )
        } else {
            let (d, r) = tokio::join!(
                t.ledger.retention().delete(&key),
                other.deliveries().redrive(&delivery, &audit, later)
            );
            (d, r)
        };
        // A deadlock victim (PostgreSQL) or a busy error is a refusal, never a half-done step.
        let deleted = deleted.ok().flatten();
        let job = t.ledger.jobs().get(&key).await.expect("get");
        match redriven {
            Ok(_) => {
                assert!(deleted.is_none(), "{key}: deleted although redriven");
                assert!(job.is_some(), "{key}: a redriven job was deleted");
                assert_eq!(
                    t.ledger
                        .deliveries()
                        .redrives(&key)
                        .await
                        .expect("audit")
                        .len(),
                    1
                );
            }
            Err(_) => {
                let gone = deleted.is_some();
                assert_eq!(gone, job.is_none(), "{key}: rows and answer agree");
            }
        }
    }
    other.close().await;
}

fn budget(max_attempts: u32, max_age: Duration) -> RescueBudget {
    RescueBudget {
        max_attempts,
        max_age,
    }
}

async fn lost_leases_spend_the_budget_and_quarantine_with_a_reason(t: &TestLedger) {
    let l = &t.ledger;
    let key = "poison:2026-10-25";
    let leases = rendered_job(t, key, &["ops@example.com"]).await;
    let b = budget(2, Duration::hours(6));
    // The first loss: back to pending, the attempt counted and recorded as unknown.
    let first = t0() + Duration::minutes(6);
    let rescued = l.leases().rescue(first, &b).await.expect("rescue");
    assert_eq!((rescued.deliveries, rescued.quarantined), (1, 0));
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("d");
    assert_eq!(
        (d.state, d.attempts, d.lease_losses),
        (DeliveryState::Pending, 1, 1)
    );
    // The second lease is lost too: the budget of 2 is spent.
    let again = l
        .leases()
        .deliveries(&params("w2", first, 10))
        .await
        .expect("lease");
    assert_eq!(again.len(), 1);
    let second = first + Duration::minutes(6);
    let rescued = l.leases().rescue(second, &b).await.expect("rescue");
    assert_eq!((rescued.deliveries, rescued.quarantined), (0, 1));
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("d");
    assert_eq!(
        (d.state, d.attempts, d.lease_losses),
        (DeliveryState::Quarantined, 2, 2)
    );
    let why = d.last_error.unwrap_or_default();
    assert!(
        why.contains(&format!("worker lost 2 times, last at {}", rfc3339(second))),
        "{why}"
    );
    let attempts = l
        .deliveries()
        .attempts(leases[0].key())
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 2, "each loss is an attempt row");
    assert!(attempts.iter().all(|a| a.class == ResponseClass::Unknown));
    assert_eq!(rescued.settled, 1, "its job is settled");
    let job = l.jobs().get(&jk(key)).await.expect("get").expect("job");
    assert_eq!(job.state, JobState::Quarantined);
    assert_eq!(
        l.leases()
            .rescue(second, &b)
            .await
            .expect("rescue")
            .quarantined,
        0
    );
}

async fn a_lost_lease_past_max_age_quarantines(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "old:2026-10-25", &["ops@example.com"]).await;
    let rescued = l
        .leases()
        .rescue(
            t0() + Duration::minutes(11),
            &budget(8, Duration::minutes(10)),
        )
        .await
        .expect("rescue");
    assert_eq!(rescued.quarantined, 1);
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("d");
    assert_eq!(d.state, DeliveryState::Quarantined);
}

async fn a_render_that_loses_every_lease_is_quarantined(t: &TestLedger) {
    let l = &t.ledger;
    let key = "crashy:2026-10-25";
    ready_jobs(t, &["crashy:2026-10-25"]).await;
    let b = budget(3, Duration::hours(6));
    let mut now = t0();
    for round in 1..=3 {
        let leased = l.leases().jobs(&params("w", now, 10)).await.expect("lease");
        assert_eq!(leased.len(), 1, "round {round}");
        now += Duration::minutes(6);
        let rescued = l.leases().rescue(now, &b).await.expect("rescue");
        let job = l.jobs().get(&jk(key)).await.expect("get").expect("job");
        assert_eq!(job.lease_losses, round);
        if round < 3 {
            assert_eq!((rescued.jobs, job.state), (1, JobState::Ready));
        } else {
            assert_eq!((rescued.quarantined, job.state), (1, JobState::Quarantined));
            let why = job.last_error.unwrap_or_default();
            assert!(why.contains("worker lost 3 times"), "{why}");
            assert!(job.terminal_at.is_some());
        }
    }
}

async fn a_send_cut_at_shutdown_is_an_unknown_attempt(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "cut:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let at = t0() + Duration::seconds(40);
    l.leases().abandon(&leases[0], at).await.expect("abandon");
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("d");
    assert_eq!(
        (d.state, d.attempts),
        (DeliveryState::Pending, 1),
        "it counts"
    );
    assert_eq!(d.ready_at, at, "retried at once, with the same key");
    let attempts = l.deliveries().attempts(&d.key).await.expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].class, ResponseClass::Unknown);
    assert_eq!(attempts[0].requested_at, t0(), "from its lease");
    assert!(
        attempts[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("shutdown"))
    );
    // Fenced: a second abandon of the same lease, or of a lease already finished, changes nothing.
    assert!(matches!(
        l.leases().abandon(&leases[0], at).await,
        Err(LedgerError::LeaseLost { .. })
    ));
    l.deliveries()
        .finish(
            &leases[1],
            &attempt(ResponseClass::Accepted, at),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    assert!(matches!(
        l.leases().abandon(&leases[1], at).await,
        Err(LedgerError::LeaseLost { .. })
    ));
    assert_eq!(
        l.deliveries()
            .attempts(leases[1].key())
            .await
            .expect("a")
            .len(),
        1
    );
}

async fn the_first_render_lease_fixes_generated_at(t: &TestLedger) {
    let l = &t.ledger;
    let key = "gen:2026-10-25";
    ready_jobs(t, &["gen:2026-10-25"]).await;
    let first = t0() + Duration::seconds(3);
    let leased = l
        .leases()
        .jobs(&params("w", first, 1))
        .await
        .expect("lease");
    assert_eq!(leased[0].job.generated_at, Some(first));
    let later = first + Duration::minutes(6);
    l.leases()
        .rescue(later, &RescueBudget::default())
        .await
        .expect("rescue");
    let again = l
        .leases()
        .jobs(&params("w", later, 1))
        .await
        .expect("lease");
    assert_eq!(
        again[0].job.generated_at,
        Some(first),
        "a later render prints the same instant"
    );
    assert_eq!(
        l.jobs()
            .get(&jk(key))
            .await
            .expect("get")
            .expect("job")
            .generated_at,
        Some(first)
    );
}

async fn cancelling_a_job_closes_its_waiting_deliveries(t: &TestLedger) {
    let l = &t.ledger;
    let key = "cancel:2026-10-25";
    let delivery = quarantined_job(t, key).await;
    let later = t0() + Duration::days(9);
    // Redriven after retention deleted its artifact: the job renders again, the delivery waits.
    l.jobs()
        .redrive(
            &jk(key),
            &Audit::new("ops", "again", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("redrive");
    let d = l
        .deliveries()
        .get(&delivery)
        .await
        .expect("get")
        .expect("d");
    assert_eq!(d.state, DeliveryState::Pending);
    l.jobs()
        .cancel(
            &jk(key),
            &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
            later,
        )
        .await
        .expect("cancel");
    let d = l
        .deliveries()
        .get(&delivery)
        .await
        .expect("get")
        .expect("d");
    assert_eq!(d.state, DeliveryState::Quarantined);
    assert_eq!(d.last_error.as_deref(), Some("the job was cancelled"));
    let page = l
        .retention()
        .terminal_before(later + Duration::days(1), 10)
        .await
        .expect("page");
    assert_eq!(page.len(), 1, "retention can consider it");
    // A refused cancel touches no delivery.
    let leases = rendered_job(t, "busy:2026-10-25", &["ops@example.com"]).await;
    l.deliveries()
        .release(&leases[0], t0())
        .await
        .expect("release");
    assert!(matches!(
        l.jobs()
            .cancel(
                &jk("busy:2026-10-25"),
                &Audit::new("ops", "not needed", Via::Cli).expect("audited"),
                later
            )
            .await,
        Err(LedgerError::WrongState { .. })
    ));
    let d = l
        .deliveries()
        .get(leases[0].key())
        .await
        .expect("get")
        .expect("d");
    assert_eq!(d.state, DeliveryState::Pending);
}

/// A ledger that answers and takes a write is ready; its write probe changes nothing.
async fn a_writable_ledger_is_ready(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["probe:2026-10-25"]).await;
    l.ready().await.expect("ready");
    l.ready()
        .await
        .expect("twice: the probe leaves no transaction open");
    let job = l
        .jobs()
        .get(&jk("probe:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Ready);
}

/// A job rendered again (redriven after retention deleted its artifact) keeps the deliveries
/// its first render created, whatever they went through, and only a destination added since is
/// created, leased to the node; in the same commit a job's first render creates all of its own.
async fn a_render_again_keeps_the_deliveries_an_earlier_render_created(t: &TestLedger) {
    let l = &t.ledger;
    let key = "again:2026-10-25";
    let kept = quarantined_job(t, key).await;
    let later = t0() + Duration::days(9);
    let audit = Audit::new("ops", "again", Via::Cli).expect("audited");
    l.jobs()
        .redrive(&jk(key), &audit, later)
        .await
        .expect("redrive");
    ready_jobs(t, &["fresh:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("w2", later, 10))
        .await
        .expect("lease");
    let (again, fresh) = (
        lease_of(&leased, key),
        lease_of(&leased, "fresh:2026-10-25"),
    );
    assert!(!again.is_first() && fresh.is_first());
    let emails = ["ops@example.com", "new@example.com"];
    let renders = [
        Render {
            lease: again,
            artifact: artifact(),
            deliveries: destinations(key, &emails),
        },
        Render {
            lease: fresh,
            artifact: artifact(),
            deliveries: destinations("fresh:2026-10-25", &emails),
        },
    ];
    let recorded = l
        .commit_group(GroupCommit {
            renders: &renders,
            finishes: &[],
            settle: &[],
            lease_to: Some(LeaseTo {
                owner: "w2",
                lease_for: Duration::minutes(5),
            }),
            claim: None,
            now: later,
        })
        .await
        .expect("recorded")
        .renders;
    let born = |i: usize| -> Vec<String> {
        let mut keys: Vec<String> = match &recorded[i] {
            Ok(born) => born.iter().map(|d| d.delivery.key.to_string()).collect(),
            Err(e) => panic!("render {i} recorded: {e}"),
        };
        keys.sort();
        keys
    };
    assert_eq!(born(0), [format!("{key}/email:new@example.com")]);
    assert_eq!(
        born(1),
        [
            "fresh:2026-10-25/email:new@example.com",
            "fresh:2026-10-25/email:ops@example.com"
        ]
    );
    let d = l.deliveries().get(&kept).await.expect("get").expect("kept");
    assert_eq!(
        (d.state, d.attempts, d.redrive_count),
        (DeliveryState::Pending, 1, 1),
        "the first render's delivery keeps its row: redriven, waiting, its attempt counted"
    );
    assert_eq!(
        l.deliveries()
            .attempts(&kept)
            .await
            .expect("attempts")
            .len(),
        1
    );
    assert_eq!(l.deliveries().list(&jk(key)).await.expect("list").len(), 2);
}

on_both_backends!(
    a_render_again_keeps_the_deliveries_an_earlier_render_created,
    a_writable_ledger_is_ready,
    cancelling_a_job_closes_its_waiting_deliveries,
    a_redrive_between_the_check_and_the_delete_is_not_deleted,
    redrives_racing_deletes_are_never_lost,
    lost_leases_spend_the_budget_and_quarantine_with_a_reason,
    a_lost_lease_past_max_age_quarantines,
    a_render_that_loses_every_lease_is_quarantined,
    a_send_cut_at_shutdown_is_an_unknown_attempt,
    the_first_render_lease_fixes_generated_at,
);
