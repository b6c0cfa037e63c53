//! The scheduler tick with an injected clock: catch-up after an outage, bounded by `catch_up`,
//! and several schedulers on one ledger inserting each key once. Runs on both backends.

use crate::common;
use common::jk;

use std::sync::Arc;

use chrono::Duration;
use common::{Project, TestLedger, at, report};
use dawnpost::ledger::{JobFilter, JobState};
use dawnpost::services::tick::SchedulerTick;
use dawnpost::{Clock, ManualClock, Span};

async fn job_keys(t: &TestLedger) -> Vec<String> {
    let mut keys: Vec<String> = t
        .ledger
        .jobs()
        .list(&JobFilter::default())
        .await
        .expect("list")
        .into_iter()
        .map(|j| j.key.to_string())
        .collect();
    keys.sort();
    keys
}

/// A tick over `config`'s reports on `t`'s ledger at `clock`, catching up `catch_up`.
fn tick_for(
    t: &TestLedger,
    config: &dawnpost::Config,
    clock: &ManualClock,
    catch_up: Span,
) -> SchedulerTick {
    SchedulerTick::new(
        t.ledger.clone(),
        dawnpost::report::catalog::Catalog::of_reports(config.reports.clone()),
        Arc::new(clock.clone()),
        catch_up,
    )
}

async fn catch_up_after_three_day_outage_is_bounded(t: &TestLedger) {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let config = p.load();
    let clock = ManualClock::new(at(2026, 10, 20, 12, 0));
    let tick = tick_for(t, &config, &clock, Span::from_secs(24 * 3600));
    let pool = dawnpost::runtime::periodic::Nudge::default();
    let tick = tick.with_nudge(pool.clone());
    // First tick ever: catches up 24 h, so today's 06:30 (04:30Z) job is enqueued.
    let first = tick.run_once().await.expect("tick");
    assert_eq!((first.due, first.inserted, first.missed), (1, 1, 0));
    assert_eq!(job_keys(t).await, ["warehouse-17:2026-10-20"]);
    assert!(
        pool.due_by(clock.now()),
        "the pool is nudged to take the new job at once"
    );
    pool.looked(clock.now());
    // Quiet ticks insert nothing, and nudge nothing.
    clock.advance(Duration::hours(3));
    assert_eq!(tick.run_once().await.expect("tick").inserted, 0);
    assert!(!pool.due_by(clock.now()));

    // Down from 10-20 15:00Z until 10-23 12:00Z: the fires of 10-21 and 10-22 are older than
    // catch_up and are skipped; 10-23 06:30 CEST (04:30Z) is newer and is enqueued.
    clock.set(at(2026, 10, 23, 12, 0));
    let after = tick.run_once().await.expect("tick");
    assert_eq!((after.due, after.inserted, after.missed), (1, 1, 2));
    assert_eq!(
        job_keys(t).await,
        ["warehouse-17:2026-10-20", "warehouse-17:2026-10-23"]
    );
    let job = t
        .ledger
        .jobs()
        .get(&jk("warehouse-17:2026-10-23"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.fire_at, at(2026, 10, 23, 4, 30));
    assert_eq!(job.ready_at, job.fire_at);
    assert_eq!(job.state, JobState::Ready);
    assert_eq!(job.origin.as_str(), "schedule");
    assert_eq!(
        t.ledger.ticks().last("warehouse-17").await.expect("tick"),
        Some(at(2026, 10, 23, 12, 0))
    );

    // A fire exactly at the tick instant counts once: now, not again at the next tick.
    clock.set(at(2026, 10, 24, 4, 30));
    assert_eq!(tick.run_once().await.expect("tick").inserted, 1);
    clock.set(at(2026, 10, 24, 4, 31));
    assert_eq!(tick.run_once().await.expect("tick").inserted, 0);
}

async fn restart_before_catch_up_runs_out_enqueues_the_missed_report(t: &TestLedger) {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let config = p.load();
    let clock = ManualClock::new(at(2026, 11, 30, 5, 0));
    let make = |clock: &ManualClock| tick_for(t, &config, clock, Span::from_secs(24 * 3600));
    make(&clock).run_once().await.expect("tick");
    let before = job_keys(t).await;
    // The process dies at 05:00Z and comes back at 09:00Z: 06:30 CET (05:30Z) was missed.
    clock.set(at(2026, 11, 30, 9, 0));
    let counts = make(&clock).run_once().await.expect("tick after restart");
    assert_eq!(counts.inserted, 1);
    let after = job_keys(t).await;
    assert!(!before.contains(&"warehouse-17:2026-11-30".to_string()));
    assert!(after.contains(&"warehouse-17:2026-11-30".to_string()));
}

async fn concurrent_schedulers_insert_each_key_once(t: &TestLedger) {
    let mut reports = String::new();
    for (id, tz) in [
        ("berlin", "Europe/Berlin"),
        ("new-york", "America/New_York"),
        ("sydney", "Australia/Sydney"),
    ] {
        reports.push_str(&report(id, "0 0 * * * *", tz));
    }
    let p = Project::new(&reports);
    let config = dawnpost::report::catalog::Catalog::of_reports(p.load().reports);
    let clock = ManualClock::new(at(2026, 11, 30, 12, 0));
    let other = t.reopen().await;
    let mut tasks = Vec::new();
    for ledger in [
        t.ledger.clone(),
        other.clone(),
        t.ledger.clone(),
        other.clone(),
    ] {
        let tick = SchedulerTick::new(
            ledger,
            config.clone(),
            Arc::new(clock.clone()),
            Span::from_secs(30 * 86_400),
        );
        tasks.push(tokio::spawn(
            async move { tick.run_once().await.expect("tick") },
        ));
    }
    let mut inserted = 0;
    for task in tasks {
        // A scheduler that reads the tick another one recorded sees fewer fires due: fine.
        inserted += task.await.expect("join").inserted;
    }
    assert_eq!(inserted, 90, "every key inserted by exactly one scheduler");
    assert_eq!(job_keys(t).await.len(), 90);
    other.close().await;
}

/// A tick's write for thousands of reports (more than one SQLite statement's worth of rows,
/// for jobs and for tick records alike): each due job inserted once, every report's tick
/// recorded, read back in one read, and never moved backwards.
async fn one_tick_writes_thousands_of_reports_at_once(t: &TestLedger) {
    use common::fixtures::new_job;
    let ids: Vec<String> = (0..5_003).map(|i| format!("r{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let now = at(2026, 11, 30, 12, 0);
    let jobs: Vec<_> = ids[..1_201]
        .iter()
        .map(|id| new_job(id, "2026-11-30", now))
        .collect();
    let inserted = t
        .ledger
        .ticks()
        .tick(&jobs, &refs, now)
        .await
        .expect("tick");
    assert_eq!(inserted.len(), 1_201);
    let all = JobFilter {
        limit: Some(5_000),
        ..JobFilter::default()
    };
    let listed = t.ledger.jobs().list(&all).await.expect("list");
    assert_eq!(listed.len(), 1_201);
    let ticks = t.ledger.ticks().last_of_all().await.expect("ticks");
    assert_eq!(ticks.len(), 5_003);
    assert!(ticks.values().all(|at| *at == now));

    // Again, a minute later, with the same jobs due: nothing new, every tick moved on.
    let later = now + Duration::minutes(1);
    let again = t
        .ledger
        .ticks()
        .tick(&jobs, &refs, later)
        .await
        .expect("tick");
    assert!(again.is_empty(), "no key inserted twice");
    // An older tick (a slow scheduler on another node) moves nothing back.
    t.ledger
        .ticks()
        .tick(&[], &refs, now)
        .await
        .expect("older tick");
    let ticks = t.ledger.ticks().last_of_all().await.expect("ticks");
    assert!(ticks.values().all(|at| *at == later));
}

/// Ticks every 10 minutes for two days: each report's fire enqueued once, and a report's
/// tick recorded only when it fired (a quiet tick writes nothing for it).
async fn ticks_record_only_reports_that_fired(t: &TestLedger) {
    let mut reports = report("morning", "0 30 6 * * *", "Europe/Berlin");
    reports.push_str(&report("evening", "0 0 18 * * *", "Europe/Berlin"));
    let p = Project::new(&reports);
    let config = p.load();
    let clock = ManualClock::new(at(2026, 11, 29, 0, 0));
    let tick = tick_for(t, &config, &clock, Span::from_secs(3600));
    for _ in 0..(2 * 24 * 6) {
        tick.run_once().await.expect("tick");
        let ticks = t.ledger.ticks().last_of_all().await.expect("ticks");
        if let Some(morning) = ticks.get("morning") {
            // 06:30 CET is 05:30Z: recorded by the tick that found it, and not again.
            assert!(
                [at(2026, 11, 29, 5, 30), at(2026, 11, 30, 5, 30)]
                    .iter()
                    .any(|fire| *morning >= *fire && *morning < *fire + Duration::minutes(10)),
                "morning recorded at {morning}"
            );
        }
        clock.advance(Duration::minutes(10));
    }
    assert_eq!(
        job_keys(t).await,
        [
            "evening:2026-11-29",
            "evening:2026-11-30",
            "morning:2026-11-29",
            "morning:2026-11-30"
        ]
    );
}

/// The daemon's tick, stepped every 10 minutes across the DST gaps outside tools found, inserts
/// exactly the jobs `plan` lists for the range, at the same instants: a gap at local midnight
/// (Azores), at the end of a day (Nuuk: the 27th's job fires at the gap's end, on the 28th,
/// and keeps its date), and a gap time in a list (Berlin `2,9`).
async fn the_tick_inserts_what_plan_lists_across_dst_gaps(t: &TestLedger) {
    let mut reports = report("azores", "0 30 0 * * *", "Atlantic/Azores");
    reports.push_str(&report("nuuk", "0 30 23 * * *", "America/Nuuk"));
    reports.push_str(&report("berlin", "0 30 2,9 * * *", "Europe/Berlin"));
    let p = Project::new(&reports);
    let config = p.load();
    let (from, to) = (at(2027, 3, 26, 0, 0), at(2027, 3, 30, 0, 0));
    let clock = ManualClock::new(from);
    let tick = tick_for(t, &config, &clock, Span::from_secs(3600));
    tick.run_once().await.expect("first tick");
    let start = clock.now();
    while clock.now() < to {
        clock.advance(Duration::minutes(10));
        tick.run_once().await.expect("tick");
    }
    let mut planned: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        dawnpost::report::schedule::plan(config.reports.iter(), start - Duration::hours(1), to)
            .into_iter()
            .map(|f| (f.key.to_string(), f.fire_at))
            .collect();
    planned.sort();
    let mut ticked = Vec::new();
    for key in job_keys(t).await {
        let job = t
            .ledger
            .jobs()
            .get(&jk(&key))
            .await
            .expect("get")
            .expect("job");
        ticked.push((key, job.fire_at));
    }
    assert_eq!(ticked, planned);
    for key in ["azores:2027-03-28", "nuuk:2027-03-27", "berlin:2027-03-28"] {
        assert!(ticked.iter().any(|(k, _)| k == key), "{key} in {ticked:?}");
    }
    let nuuk = ticked
        .iter()
        .find(|(k, _)| k == "nuuk:2027-03-27")
        .expect("nuuk");
    assert_eq!(
        nuuk.1,
        at(2027, 3, 28, 1, 0),
        "the gap's end, 00:00 -01 on the 28th"
    );
}

/// A tick that enqueues tells the other nodes on a PostgreSQL ledger (a work signal, which
/// their `wake` service hears); a quiet tick sends none. SQLite has no notices.
async fn a_tick_that_enqueues_sends_a_work_signal(t: &TestLedger) {
    let Some(mut listener) = t.ledger.work_listener().await.expect("listen") else {
        return;
    };
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let config = p.load();
    let clock = ManualClock::new(at(2026, 10, 20, 12, 0));
    let tick = tick_for(t, &config, &clock, Span::from_secs(24 * 3600));
    let limit = std::time::Duration::from_secs(10);
    assert_eq!(tick.run_once().await.expect("tick").inserted, 1);
    let heard = tokio::time::timeout(limit, listener.next()).await;
    assert!(heard.expect("a notice within 10 s").expect("listening"));
    clock.advance(Duration::hours(3));
    assert_eq!(tick.run_once().await.expect("tick").inserted, 0);
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(300), listener.next());
    assert!(quiet.await.is_err(), "a quiet tick sent a notice");
}

on_both_backends!(
    the_tick_inserts_what_plan_lists_across_dst_gaps,
    ticks_record_only_reports_that_fired,
    one_tick_writes_thousands_of_reports_at_once,
    catch_up_after_three_day_outage_is_bounded,
    restart_before_catch_up_runs_out_enqueues_the_missed_report,
    concurrent_schedulers_insert_each_key_once,
    a_tick_that_enqueues_sends_a_work_signal,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_ticks_at_start_and_stops_on_cancel() {
    // The daemon loop: it ticks once at start (catching up) and returns promptly when cancelled.
    let t = TestLedger::sqlite().await;
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    let config = p.load();
    let clock = ManualClock::new(at(2026, 11, 30, 9, 0));
    let tick = SchedulerTick::new(
        t.ledger.clone(),
        dawnpost::report::catalog::Catalog::of_reports(config.reports.clone()),
        Arc::new(clock),
        Span::from_secs(24 * 3600),
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let handle = tokio::spawn({
        let tick = tick.clone();
        let cancel = cancel.clone();
        async move { tick.run(cancel).await }
    });
    // Wait on the ledger, not on time: the start-up tick records its instant.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while tick
        .last_tick("warehouse-17")
        .await
        .expect("read")
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "start-up tick never ran"
        );
        tokio::task::yield_now().await;
    }
    cancel.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(10), handle)
        .await
        .expect("run returns after cancel")
        .expect("join")
        .expect("run ok");
    assert_eq!(job_keys(&t).await, ["warehouse-17:2026-11-30"]);
}
