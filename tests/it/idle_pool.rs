//! An idle pool asks the ledger for work when work falls due, not at every poll: a claim that
//! takes nothing says when the earliest claimable work falls due (both backends), the pool
//! waits until then within `idle_poll` and `idle_max`, and whatever makes work due in the
//! process (the tick, a redrive, the rescuer) nudges it to look at once.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Duration as Span;
use common::fixtures::{attempt, new_job, params, ready_jobs, rendered_job, t0};
use common::peers::Receiver;
use common::{Project, TestLedger, jk};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, Finish, GroupCommit, JobState, LeaseTo, WORK_FORMAT};
use dawnpost::pool::{Pipeline, PoolConfig};
use dawnpost::services::rescuer::Rescuer;
use dawnpost::{Clock, ManualClock, SystemClock};
use tokio_util::sync::CancellationToken;

/// A claim for node `w1` riding an empty commit at `now`.
fn claim_at(now: chrono::DateTime<chrono::Utc>) -> GroupCommit<'static> {
    GroupCommit {
        renders: &[],
        finishes: &[],
        settle: &[],
        lease_to: Some(LeaseTo {
            owner: "w1",
            lease_for: Span::minutes(5),
        }),
        claim: Some(5),
        now,
    }
}

async fn an_empty_claim_says_when_work_falls_due(t: &TestLedger) {
    let l = &t.ledger;
    let next_due = |now| async move {
        let claimed = l.commit_group(claim_at(now)).await.expect("claim").claimed;
        assert!(claimed.is_empty(), "nothing due at {now}");
        claimed.next_due
    };
    assert_eq!(
        next_due(t0()).await,
        None,
        "an empty ledger: nothing queued"
    );

    // A job rendered and delivering, its one delivery retried in three minutes; a job due in
    // ten.
    let leases = rendered_job(t, "r:2026-10-25", &["a@example.com"]).await;
    let retry_at = t0() + Span::minutes(3);
    let finish = [Finish {
        lease: leases[0].clone(),
        attempt: attempt(ResponseClass::Transient, t0()),
        next: DeliveryNext::Retry { ready_at: retry_at },
    }];
    let recorded = l
        .commit_group(GroupCommit {
            finishes: &finish,
            lease_to: None,
            claim: None,
            ..claim_at(t0())
        })
        .await
        .expect("retry");
    assert!(recorded.finishes.iter().all(Result::is_ok));
    let later = t0() + Span::minutes(10);
    let job = new_job("later", "2026-10-25", later);
    l.jobs().insert_many(&[job], t0()).await.expect("insert");
    assert_eq!(
        next_due(t0()).await,
        Some(retry_at),
        "the retry comes first"
    );

    // Work in a format this binary does not read is not waited for.
    crate::work_format::set_format(t, "deliveries", "r:", WORK_FORMAT + 1).await;
    assert_eq!(next_due(t0()).await, Some(later), "then the later job");

    // Once it is due it is claimed, and a claim that took something says nothing more.
    let claimed = l.commit_group(claim_at(later)).await.expect("claim");
    let keys: Vec<String> = (claimed.claimed.jobs.iter())
        .map(|j| j.job.key.to_string())
        .collect();
    assert_eq!(keys, ["later:2026-10-25"]);
    assert_eq!(claimed.claimed.next_due, None);
}

/// The rescuer nudges the pool when it returned anything: rescued work goes out at once.
async fn the_rescuer_nudges_the_pool_when_it_rescued(t: &TestLedger) {
    ready_jobs(t, &["r:2026-10-25"]).await;
    let leased = t.ledger.leases().jobs(&params("w1", t0(), 1)).await;
    assert_eq!(leased.expect("lease").len(), 1);
    let clock = ManualClock::new(t0() + Span::minutes(1));
    let pool = dawnpost::runtime::periodic::Nudge::default();
    let rescuer = Rescuer::new(
        t.ledger.clone(),
        Arc::new(clock.clone()),
        Default::default(),
    )
    .with_nudge(pool.clone());
    let counts = rescuer.run_once().await.expect("rescue");
    assert_eq!(counts.jobs, 0, "the lease still runs");
    assert!(!pool.due_by(clock.now()), "nothing rescued, no nudge");
    clock.advance(Span::minutes(10));
    let counts = rescuer.run_once().await.expect("rescue");
    assert_eq!(counts.jobs, 1, "the lease ran out");
    assert!(pool.due_by(clock.now()), "the pool is told at once");
}

/// Another process's work signal (`Ledger::signal_work`: another node's tick, the CLI) wakes
/// an idle pool that listens (`wake::run`) at once, not at its longest idle wait. On
/// PostgreSQL; SQLite has no notices (`work_listener` is `None`) and its nodes poll.
async fn an_idle_pool_hears_work_another_process_made_due(t: &TestLedger) {
    t.ledger
        .signal_work()
        .await
        .expect("a notice is sent or is nothing");
    let listener = t.ledger.work_listener().await.expect("listen");
    if listener.is_none() {
        assert_eq!(t.ledger.backend_name(), "sqlite", "PostgreSQL listens");
        return;
    }
    drop(listener);
    let rx = Receiver::start(Arc::new(|_, _, _| (200, None, Duration::ZERO))).await;
    let p = Project::new(&common::hooked_report("heard", &rx.url(""), 1, None));
    let config = p.load();
    let clock: dawnpost::SharedClock = Arc::new(SystemClock);
    let pipeline = slow_idle_pipeline(t, &config, &clock);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(pipeline.clone().run(cancel.clone()));
    let listen = tokio::spawn(dawnpost::services::wake::run(
        pipeline.clone(),
        cancel.clone(),
    ));
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while !pipeline.is_hearing() {
        assert!(
            tokio::time::Instant::now() < until,
            "the node never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Made due behind the pool's back, with no nudge in this process: only the notice.
    let now = clock.now();
    let job = new_job("heard", "2026-01-01", now);
    t.ledger
        .jobs()
        .insert_many(&[job], now)
        .await
        .expect("insert");
    t.ledger.signal_work().await.expect("notify");
    assert!(
        rx.reached(1, Duration::from_secs(30)).await,
        "the notice did not wake the idle pool"
    );
    cancel.cancel();
    run.await.expect("join").expect("pool");
    listen.await.expect("join");
}

/// A work signal reaches the listeners of its own ledger only: a ledger in another schema of
/// the same database wakes nobody here (PostgreSQL; SQLite has no notices).
async fn a_work_signal_reaches_its_own_ledgers_listeners_only(t: &TestLedger) {
    let Some(mut listener) = t.ledger.work_listener().await.expect("listen") else {
        assert_eq!(t.ledger.backend_name(), "sqlite", "PostgreSQL listens");
        return;
    };
    let other = TestLedger::postgres().await.expect("a PostgreSQL ledger");
    other.ledger.signal_work().await.expect("notify");
    let quiet = tokio::time::timeout(Duration::from_millis(300), listener.next()).await;
    assert!(
        quiet.is_err(),
        "another schema's notice woke this ledger's listener"
    );
    t.ledger.signal_work().await.expect("notify");
    let heard = tokio::time::timeout(Duration::from_secs(10), listener.next()).await;
    assert!(heard.expect("heard within 10 s").expect("listening"));
}

on_both_backends!(
    an_empty_claim_says_when_work_falls_due,
    the_rescuer_nudges_the_pool_when_it_rescued,
    an_idle_pool_looks_when_work_falls_due_or_when_nudged,
    an_idle_pool_hears_work_another_process_made_due,
    a_work_signal_reaches_its_own_ledgers_listeners_only,
);

/// Waits (polling the ledger, at most `limit`) until the job is done: its finish and
/// the claim that rode or followed it committed.
async fn settled(t: &TestLedger, key: &str, limit: Duration) {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let job = t.ledger.jobs().get(&jk(key)).await.expect("get");
        if job.is_some_and(|j| j.state == JobState::Done) {
            return;
        }
        assert!(tokio::time::Instant::now() < until, "{key} was not settled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pipeline over `config` whose longest idle wait is two minutes: what it takes sooner,
/// something told it about.
fn slow_idle_pipeline(
    t: &TestLedger,
    config: &dawnpost::Config,
    clock: &dawnpost::SharedClock,
) -> Arc<Pipeline> {
    let pool = PoolConfig {
        idle_max: Duration::from_secs(120),
        ..PoolConfig::from_config(config)
    };
    let artifacts = dawnpost::report::artifact::ArtifactStore::from_settings(
        &config.settings.artifacts,
        &config.root,
    )
    .expect("artifacts");
    let pipeline = Pipeline::new(config, t.ledger.clone(), clock.clone(), pool, artifacts);
    Arc::new(pipeline.expect("pipeline"))
}

/// A pool whose longest idle wait is two minutes still takes a job due a second after its
/// first claim at once when it falls due (the claim said when), and a job made due behind its
/// back as soon as it is nudged, not two minutes later.
async fn an_idle_pool_looks_when_work_falls_due_or_when_nudged(t: &TestLedger) {
    let rx = Receiver::start(Arc::new(|_, _, _| (200, None, Duration::ZERO))).await;
    let p = Project::new(&common::hooked_report("idle", &rx.url(""), 1, None));
    let config = p.load();
    let clock: dawnpost::SharedClock = Arc::new(SystemClock);
    let start = clock.now();
    let soon = new_job("idle", "2026-01-01", start + Span::milliseconds(1500));
    t.ledger
        .jobs()
        .insert_many(&[soon], start)
        .await
        .expect("insert");
    let pipeline = slow_idle_pipeline(t, &config, &clock);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(pipeline.clone().run(cancel.clone()));

    let limit = Duration::from_secs(30);
    assert!(
        rx.reached(1, limit).await,
        "the job due 1.5 s after the start waited for the pool's longest idle wait"
    );
    settled(t, "idle:2026-01-01", limit).await;
    // Made due by another hand in this process, which nudges.
    let now = clock.now();
    let behind = new_job("idle", "2026-01-02", now);
    t.ledger
        .jobs()
        .insert_many(&[behind], now)
        .await
        .expect("insert");
    pipeline.nudge().now();
    assert!(
        rx.reached(2, limit).await,
        "the nudge did not wake the idle pool"
    );
    assert_eq!(rx.delivered().len(), 2);
    cancel.cancel();
    run.await.expect("join").expect("pool");
}
