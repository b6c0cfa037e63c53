//! The pool's outcome writes, on both backends: renders recorded in a batch, each as its single
//! form would be, a lost lease refused alone; renders whose deliveries are created leased to
//! their node; a claim riding the commit of the outcomes; and batches past one statement's rows.

use crate::common;

use chrono::Duration;
use common::fixtures::*;
use common::{TestLedger, jk};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{
    DeliveryLease, DeliveryNext, DeliveryState, Finish, GroupCommit, JobState, LeaseTo,
    LeasedDelivery, LeasedJob, LedgerError, Render,
};

/// The renders of the leased jobs a (two destinations) and b (none, so done at once).
fn renders_of_a_and_b(leased: &[LeasedJob]) -> [Render; 2] {
    let a = Render {
        lease: lease_of(leased, "a:2026-10-25"),
        artifact: artifact(),
        deliveries: destinations("a:2026-10-25", &["x@example.com", "y@example.com"]),
    };
    let b = Render {
        lease: lease_of(leased, "b:2026-10-25"),
        artifact: artifact(),
        deliveries: Vec::new(),
    };
    [a, b]
}

/// A batch of renders records each as `ledger.jobs().rendered` would, in one transaction: a lost lease
/// in it is refused alone and creates no deliveries.
async fn rendered_many_records_each_and_refuses_lost_leases(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25", "c:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    assert_eq!(leased.len(), 3);
    // A lease no longer held: c released, then leased again by another worker.
    let stale = lease_of(&leased, "c:2026-10-25");
    l.jobs().release(&stale, t0()).await.expect("release");
    let relet = l
        .leases()
        .jobs(&params("w2", t0(), 10))
        .await
        .expect("lease again");
    assert_eq!(relet.len(), 1);
    let [a, b] = renders_of_a_and_b(&leased);
    let c = Render {
        lease: stale,
        artifact: artifact(),
        deliveries: destinations("c:2026-10-25", &["x@example.com"]),
    };
    let results = l
        .jobs()
        .rendered_many(&[a, b, c], t0())
        .await
        .expect("batch");
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(matches!(results[2], Err(LedgerError::LeaseLost { .. })));
    let job =
        |key: &'static str| async move { l.jobs().get(&jk(key)).await.expect("get").expect("job") };
    let a = job("a:2026-10-25").await;
    assert_eq!(
        (a.state, a.artifact),
        (JobState::Delivering, Some(artifact()))
    );
    assert_eq!(
        l.deliveries()
            .list(&jk("a:2026-10-25"))
            .await
            .expect("list")
            .len(),
        2
    );
    assert_eq!(
        job("b:2026-10-25").await.state,
        JobState::Done,
        "no destinations: done at once"
    );
    let c = job("c:2026-10-25").await;
    assert_eq!(
        (c.state, c.artifact),
        (JobState::Rendering, None),
        "the stale lease changed nothing"
    );
    assert!(
        l.deliveries()
            .list(&jk("c:2026-10-25"))
            .await
            .expect("list")
            .is_empty()
    );
    assert!(
        l.jobs()
            .rendered_many(&[], t0())
            .await
            .expect("empty")
            .is_empty()
    );
}

/// Records `renders` alone at `now`, their deliveries created leased to `w1` for five minutes:
/// each render's result with the deliveries it created.
async fn renders_leased_to_w1(
    t: &TestLedger,
    renders: &[Render],
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<Result<Vec<LeasedDelivery>, LedgerError>> {
    t.ledger
        .commit_group(GroupCommit {
            renders,
            finishes: &[],
            settle: &[],
            lease_to: Some(LeaseTo {
                owner: "w1",
                lease_for: Duration::minutes(5),
            }),
            claim: None,
            now,
        })
        .await
        .expect("recorded")
        .renders
}

/// A render recorded with `lease_to` creates its deliveries leased to that node, as if it had
/// claimed them in the same commit: `sending`, the lease counted as their first attempt, no
/// other node's claim takes them, and they finish or go back (uncounted) as claimed ones do.
async fn a_render_creates_its_deliveries_leased_to_its_node(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let now = t0() + Duration::seconds(7);
    let recorded = renders_leased_to_w1(t, &renders_of_a_and_b(&leased), now).await;
    let mut born = match &recorded[..] {
        [Ok(a), Ok(b)] => {
            assert!(b.is_empty(), "a job without destinations creates none");
            a.clone()
        }
        other => panic!("both renders recorded: {other:?}"),
    };
    born.sort_by(|x, y| x.delivery.key.cmp(&y.delivery.key));
    assert_eq!(born.len(), 2);
    for d in &born {
        assert_eq!(d.delivery.state, DeliveryState::Sending);
        assert_eq!(
            d.delivery.attempts, 1,
            "the lease counts as the first attempt"
        );
        assert_eq!(d.delivery.lease_owner.as_deref(), Some("w1"));
        assert_eq!(d.lease.expires_at(), now + Duration::minutes(5));
        let job = d.job.as_deref().expect("its job");
        assert_eq!(
            (job.state, job.artifact.clone()),
            (JobState::Delivering, Some(artifact())),
            "the job as the render left it, to send from"
        );
    }
    assert!(
        l.leases()
            .deliveries(&params("w2", now, 10))
            .await
            .expect("claim")
            .is_empty(),
        "another node claims none of them while the lease holds"
    );
    l.deliveries()
        .finish(
            &born[0].lease,
            &attempt(ResponseClass::Accepted, now),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent under the lease it was born with");
    l.deliveries()
        .release(&born[1].lease, now)
        .await
        .expect("given back");
    let ds = l
        .deliveries()
        .list(&jk("a:2026-10-25"))
        .await
        .expect("list");
    let states: Vec<(DeliveryState, i64)> = ds.iter().map(|d| (d.state, d.attempts)).collect();
    assert_eq!(
        states,
        [(DeliveryState::Sent, 1), (DeliveryState::Pending, 0)],
        "sent once; the one given back unstarted counts no attempt"
    );
    let attempts = l
        .deliveries()
        .attempts(&born[0].delivery.key)
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 1);
    let relet = l
        .leases()
        .deliveries(&params("w2", now, 10))
        .await
        .expect("claim");
    assert_eq!(relet.len(), 1, "what went back is any node's to claim");
}

/// A node's claim rides the commit of its outcomes: one call records a finish and claims due
/// work leased to the node, as a claim round does (due deliveries first, then jobs, up to the
/// limit). Without a node to lease to, it claims nothing.
async fn a_claim_rides_the_commit_of_the_outcomes(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    // b goes back unstarted: due again, for any node's claim.
    l.deliveries()
        .release(&leases[1], t0())
        .await
        .expect("release");
    ready_jobs(t, &["x:2026-10-25", "y:2026-10-25", "z:2026-10-25"]).await;
    let now = t0() + Duration::seconds(1);
    let finish = [Finish {
        lease: leases[0].clone(),
        attempt: attempt(ResponseClass::Accepted, now),
        next: DeliveryNext::Sent,
    }];
    let to = LeaseTo {
        owner: "w2",
        lease_for: Duration::minutes(5),
    };
    let outcomes = |finishes, lease_to, claim| GroupCommit {
        renders: &[],
        finishes,
        settle: &[],
        lease_to,
        claim,
        now,
    };
    let recorded = l
        .commit_group(outcomes(&finish, Some(to), Some(3)))
        .await
        .expect("record and claim");
    assert!(recorded.finishes.iter().all(Result::is_ok));
    let claimed = recorded.claimed;
    let sends: Vec<String> = (claimed.deliveries.iter())
        .map(|d| d.delivery.key.to_string())
        .collect();
    let renders: Vec<String> = claimed.jobs.iter().map(|j| j.job.key.to_string()).collect();
    assert_eq!(sends, ["w:2026-10-25/email:b@example.com"]);
    assert_eq!(
        renders,
        ["x:2026-10-25", "y:2026-10-25"],
        "jobs fill the rest"
    );
    let expires = now + Duration::minutes(5);
    let owned = |owner: &str, at| owner == "w2" && at == expires;
    assert!(
        claimed
            .jobs
            .iter()
            .all(|j| owned(j.lease.owner(), j.lease.expires_at()))
    );
    assert!((claimed.deliveries.iter()).all(|d| owned(d.lease.owner(), d.lease.expires_at())));
    let ds = l
        .deliveries()
        .list(&jk("w:2026-10-25"))
        .await
        .expect("list");
    let states: Vec<DeliveryState> = ds.iter().map(|d| d.state).collect();
    assert_eq!(states, [DeliveryState::Sent, DeliveryState::Sending]);
    let x = l
        .jobs()
        .get(&jk("x:2026-10-25"))
        .await
        .expect("get")
        .expect("x");
    assert_eq!(x.state, JobState::Rendering);

    let none = l
        .commit_group(outcomes(&[], None, Some(5)))
        .await
        .expect("no node");
    assert!(
        none.claimed.is_empty(),
        "no node to lease to: nothing claimed"
    );
    let rest = l
        .leases()
        .jobs(&params("w3", now, 10))
        .await
        .expect("claim");
    let rest: Vec<String> = rest.iter().map(|j| j.job.key.to_string()).collect();
    assert_eq!(rest, ["z:2026-10-25"], "what w2 took is not another node's");
}

/// A render and a batch of finishes larger than one statement's rows (SQLite takes 128 a
/// statement; PostgreSQL binds them as arrays): every delivery is created, and every finish is
/// recorded with its attempt row as it was given, nulls and all.
async fn a_batch_past_a_statements_rows_records_each_as_given(t: &TestLedger) {
    let l = &t.ledger;
    let emails: Vec<String> = (0..300).map(|i| format!("a{i}@example.com")).collect();
    let emails: Vec<&str> = emails.iter().map(String::as_str).collect();
    let key = "big:2026-10-25";
    ready_jobs(t, &[key]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let render = Render {
        lease: leased[0].lease.clone(),
        artifact: artifact(),
        deliveries: destinations(key, &emails),
    };
    let recorded = renders_leased_to_w1(t, &[render], t0()).await;
    let born = match &recorded[..] {
        [Ok(born)] => born,
        other => panic!("the render recorded: {other:?}"),
    };
    let leases: Vec<DeliveryLease> = born.iter().map(|d| d.lease.clone()).collect();
    assert_eq!(leases.len(), 300);
    assert!(
        born.iter()
            .all(|d| d.delivery.state == DeliveryState::Sending)
    );
    let retry_at = t0() + Duration::minutes(5);
    let finishes: Vec<Finish> = leases
        .iter()
        .enumerate()
        .map(|(i, lease)| {
            let mut a = attempt(ResponseClass::Accepted, t0());
            let next = match i % 3 {
                0 => DeliveryNext::Sent,
                1 => {
                    a.class = ResponseClass::RateLimited;
                    a.code = Some(429);
                    a.retry_after = Some(Duration::seconds(30));
                    a.reason = Some(format!("slow down {i}"));
                    a.diagnostics = None;
                    DeliveryNext::Retry { ready_at: retry_at }
                }
                _ => {
                    a.class = ResponseClass::Permanent;
                    a.code = None;
                    a.reason = None;
                    DeliveryNext::Quarantine
                }
            };
            Finish {
                lease: lease.clone(),
                attempt: a,
                next,
            }
        })
        .collect();
    let results = l.deliveries().finish_many(&finishes).await.expect("batch");
    assert_eq!(results.len(), 300);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    for (i, f) in finishes.iter().enumerate() {
        let key = f.lease.key();
        let d = l
            .deliveries()
            .get(key)
            .await
            .expect("get")
            .expect("delivery");
        let attempts = l.deliveries().attempts(key).await.expect("attempts");
        assert_eq!(attempts.len(), 1, "{key}");
        let a = &attempts[0];
        let got = (
            a.attempt,
            a.class,
            a.code,
            a.retry_after_ms,
            a.reason.clone(),
        );
        let want = &f.attempt;
        let want_retry = want.retry_after.map(|d| d.num_milliseconds());
        let expected = (1, want.class, want.code, want_retry, want.reason.clone());
        assert_eq!(got, expected, "{key}");
        assert_eq!(a.diagnostics, want.diagnostics, "{key}");
        assert_eq!(
            (a.requested_at, a.finished_at),
            (want.requested_at, want.finished_at)
        );
        match i % 3 {
            0 => assert_eq!((d.state, a.next_ready_at), (DeliveryState::Sent, None)),
            1 => {
                assert_eq!((d.state, d.ready_at), (DeliveryState::Pending, retry_at));
                assert_eq!(a.next_ready_at, Some(retry_at));
                assert_eq!(d.last_error.as_deref(), want.reason.as_deref());
            }
            _ => assert_eq!(d.state, DeliveryState::Quarantined),
        }
    }
}

/// An artifact's named parts (a chat message beside the HTML and text) are recorded with its
/// render and read back with the job, in order; an artifact without any reads as before.
async fn a_renders_named_parts_are_recorded_with_its_artifact(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let [mut a, b] = renders_of_a_and_b(&leased);
    a.artifact.parts = vec!["probe".into(), "teams".into()];
    let results = l.jobs().rendered_many(&[a, b], t0()).await.expect("batch");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let parts = |key: &'static str| async move {
        let job = l.jobs().get(&jk(key)).await.expect("get").expect("job");
        job.artifact.expect("an artifact").parts
    };
    assert_eq!(parts("a:2026-10-25").await, ["probe", "teams"]);
    assert!(parts("b:2026-10-25").await.is_empty());
    // The JSON API names each part's key; an artifact without parts reads as before.
    let json = |key: &'static str| async move {
        let job = l.jobs().get(&jk(key)).await.expect("get").expect("job");
        serde_json::to_value(dawnpost::views::api::JobV1::from(&job)).expect("json")
    };
    assert_eq!(
        json("a:2026-10-25").await["artifact"]["parts"],
        serde_json::json!({
            "probe": "artifacts/r/2026-10-25/abc.probe.json",
            "teams": "artifacts/r/2026-10-25/abc.teams.json",
        })
    );
    let b = json("b:2026-10-25").await;
    assert!(b["artifact"].get("parts").is_none(), "{b}");
}

on_both_backends!(
    a_renders_named_parts_are_recorded_with_its_artifact,
    a_batch_past_a_statements_rows_records_each_as_given,
    a_render_creates_its_deliveries_leased_to_its_node,
    a_claim_rides_the_commit_of_the_outcomes,
    rendered_many_records_each_and_refuses_lost_leases,
);
