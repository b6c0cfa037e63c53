//! The registry of nodes: each daemon registers and heartbeats, `dawnpost nodes` lists the live
//! ones, a clean shutdown leaves, a silent row expires. The store behaviour on both backends;
//! the daemon and the CLI for real.

use crate::common;

use chrono::Duration;
use common::daemon::{Daemon, command};
use common::{Project, TestLedger, at, report, run_in};
use dawnpost::ledger::Node;

fn node(id: &str, schema: i64, beat: chrono::DateTime<chrono::Utc>) -> Node {
    Node {
        id: id.into(),
        version: "0.1.0".into(),
        schema_version: schema,
        formats: "1".into(),
        started_at: at(2026, 12, 1, 6, 0),
        heartbeat_at: beat,
    }
}

async fn a_heartbeat_registers_a_node_and_silence_ends_it(t: &TestLedger) {
    let l = &t.ledger;
    let t0 = at(2026, 12, 1, 6, 0);
    l.nodes()
        .heartbeat(&node("a:1", 10, t0))
        .await
        .expect("beat");
    l.nodes()
        .heartbeat(&node("b:2", 10, t0))
        .await
        .expect("beat");
    // A second heartbeat updates the row; the start stays.
    let later = t0 + Duration::seconds(10);
    l.nodes()
        .heartbeat(&node("a:1", 11, later))
        .await
        .expect("beat");
    let live = l.nodes().list(t0).await.expect("list");
    assert_eq!(live.len(), 2);
    let a = live.iter().find(|n| n.id == "a:1").expect("a");
    assert_eq!(
        (a.schema_version, a.heartbeat_at, a.started_at),
        (11, later, t0)
    );
    // Live means a recent heartbeat: b is silent since t0.
    let ids: Vec<String> = l
        .nodes()
        .list(t0 + Duration::seconds(5))
        .await
        .expect("list")
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(ids, ["a:1"]);
    assert_eq!(l.nodes().expire(later).await.expect("expire"), 1, "b's row");
    l.nodes().leave("a:1").await.expect("leave");
    assert!(l.nodes().list(t0).await.expect("list").is_empty());
}

#[test]
fn a_running_daemon_is_listed_and_leaves_when_it_stops() {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    p.write("config/dawnpost.toml", "[server]\nbind = \"127.0.0.1:0\"\n");
    let daemon = Daemon::start(command(&p, &["run"]));
    let listed = run_in(p.root(), &["nodes", "--json"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let me = &lines[0];
    assert!(
        me["id"]
            .as_str()
            .is_some_and(|id| id.ends_with(&format!(":{}", daemon.pid()))),
        "{me}"
    );
    assert_eq!(me["version"], 1, "the contract's version");
    assert_eq!(me["binary"], env!("CARGO_PKG_VERSION"));
    assert_eq!(me["formats"], dawnpost::ledger::WORK_FORMAT.to_string());
    assert_eq!(me["leads"], true, "alone, it leads the housekeeping");
    assert!(
        me["schema_version"].as_i64().is_some_and(|v| v >= 10),
        "{me}"
    );
    let table = run_in(p.root(), &["nodes"]);
    let text = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(
        text.starts_with("NODE") && text.lines().count() == 2,
        "{text}"
    );
    let (head, row) = (text.lines().next().unwrap_or(""), text.lines().nth(1));
    assert!(
        head.ends_with("LEADS") && row.is_some_and(|r| r.trim_end().ends_with("yes")),
        "{text}"
    );
    let (code, log) = daemon.stop();
    assert_eq!(code, Some(0), "{log}");
    let after = run_in(p.root(), &["nodes", "--json"]);
    assert!(
        String::from_utf8_lossy(&after.stdout).trim().is_empty(),
        "left the registry"
    );
}

/// The console's overview lists the live nodes, not those silent past their heartbeat window.
async fn the_overview_lists_the_live_nodes(t: &TestLedger) {
    use common::console::{page, sign_in};
    use common::ops_server::{VIEWER_TOKEN, start};
    use dawnpost::Clock;
    let s = start(t).await;
    let now = s.clock.now();
    let l = &t.ledger;
    l.nodes()
        .heartbeat(&node("web-1:4242", 10, now - Duration::seconds(5)))
        .await
        .expect("beat");
    l.nodes()
        .heartbeat(&node("gone-2:77", 9, now - Duration::minutes(5)))
        .await
        .expect("beat");
    // Started a minute after web-1: live, and it follows.
    let later = Node {
        started_at: at(2026, 12, 1, 6, 1),
        ..node("web-3:99", 10, now - Duration::seconds(2))
    };
    l.nodes().heartbeat(&later).await.expect("beat");
    let cookie = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, "/ui/", &cookie).await;
    let nodes = html
        .split("<h2>Nodes</h2>")
        .nth(1)
        .expect("a Nodes section");
    let nodes = nodes.split("<h2>").next().unwrap_or("");
    assert!(
        nodes.contains("web-1:4242") && nodes.contains("5s ago"),
        "{nodes}"
    );
    assert!(
        !nodes.contains("gone-2:77"),
        "a silent node is not live: {nodes}"
    );
    let row = |id: &str| {
        (nodes.split("<tr>"))
            .find(|r| r.contains(id))
            .unwrap_or("")
            .to_string()
    };
    assert!(row("web-1:4242").contains("<td>leads</td>"), "{nodes}");
    assert!(row("web-3:99").contains("<td>follows</td>"), "{nodes}");
    s.cancel.cancel();
    let _ = s.handle.await;
}

/// What a contract migration waits for besides live nodes: each unexpired render and send
/// lease, with its owner and expiry; an expired or released lease is not held.
async fn held_leases_are_named_with_their_owner_until_they_expire(t: &TestLedger) {
    use common::fixtures::{artifact, destinations, params, ready_jobs, t0};
    let l = &t.ledger;
    ready_jobs(t, &["a:2026-10-25", "b:2026-10-25"]).await;
    let renders = l
        .leases()
        .jobs(&params("old:7", t0(), 1))
        .await
        .expect("lease");
    assert_eq!(renders.len(), 1);
    let held = l.leases().held(t0()).await.expect("held");
    assert_eq!(held.len(), 1);
    assert_eq!(
        (held[0].work, held[0].key.as_str(), held[0].owner.as_str()),
        ("render", renders[0].job.key.to_string().as_str(), "old:7")
    );
    assert_eq!(held[0].until, t0() + Duration::minutes(5));
    // Rendered: the render lease is released; its deliveries' send leases are held.
    let job = renders[0].job.key.to_string();
    l.jobs()
        .rendered(
            &renders[0].lease,
            &artifact(),
            &destinations(&job, &["ops@example.com"]),
            t0(),
        )
        .await
        .expect("rendered");
    l.leases()
        .deliveries(&params("new:8", t0(), 10))
        .await
        .expect("send lease");
    let held = l.leases().held(t0()).await.expect("held");
    let named: Vec<(&str, &str)> = held.iter().map(|h| (h.work, h.owner.as_str())).collect();
    assert_eq!(named, [("send", "new:8")]);
    let later = t0() + Duration::minutes(5);
    assert!(
        l.leases().held(later).await.expect("held").is_empty(),
        "expired"
    );
}

/// A registry's round (`ledger.nodes().beat`, one transaction): this node's heartbeat, a node
/// silent for longer than the forgetting span removed, and the write format every live node
/// reads followed — an older live peer holds it back, and once the peer is silent it moves on.
async fn a_registry_round_beats_forgets_and_follows_the_live_nodes(t: &TestLedger) {
    let l = &t.ledger;
    let now = at(2026, 12, 1, 6, 0);
    let forget_before = now - Duration::days(1);
    let live_since = now - Duration::seconds(30);
    l.nodes()
        .heartbeat(&node("gone:1", 10, now - Duration::days(2)))
        .await
        .expect("beat");
    l.nodes()
        .heartbeat(&node("older:2", 10, now - Duration::seconds(5)))
        .await
        .expect("beat");
    let me = Node {
        formats: dawnpost::ledger::WORK_FORMAT.to_string(),
        ..node("me:3", 11, now)
    };
    let beat = l.nodes().beat(&me, forget_before, live_since).await;
    let beat = beat.expect("beat");
    assert_eq!(beat.format, 1, "the older peer reads format 1 only");
    let live: Vec<&str> = beat.live.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(live, ["me:3", "older:2"], "the oldest start first");
    assert_eq!(l.nodes().write_format(), 1);
    let ids: Vec<String> = (l
        .nodes()
        .list(forget_before)
        .await
        .expect("list")
        .into_iter())
    .map(|n| n.id)
    .collect();
    assert_eq!(
        ids,
        ["me:3", "older:2"],
        "the node silent for two days is gone"
    );

    let later = now + Duration::minutes(1);
    let me = Node {
        heartbeat_at: later,
        ..me
    };
    let format = l.nodes().beat(
        &me,
        later - Duration::days(1),
        later - Duration::seconds(30),
    );
    assert_eq!(
        format.await.expect("beat").format,
        dawnpost::ledger::WORK_FORMAT,
        "the older peer fell silent"
    );
    assert_eq!(l.nodes().write_format(), dawnpost::ledger::WORK_FORMAT);
    let live = l
        .nodes()
        .list(later - Duration::seconds(30))
        .await
        .expect("list");
    assert_eq!(live.len(), 1);
    assert_eq!(
        (live[0].heartbeat_at, live[0].started_at),
        (later, me.started_at)
    );
}

/// Two nodes' registries on one ledger: the node that started first leads (whatever the ids'
/// order), the other follows, and each counts the live nodes; once the leader falls silent
/// past its heartbeat window, the other leads (alone) at its next heartbeat, and the old
/// leader, back, leads again while the other follows.
async fn the_node_that_started_first_leads_until_it_falls_silent(t: &TestLedger) {
    use dawnpost::ManualClock;
    use dawnpost::services::registry::Registry;
    use std::sync::Arc;
    let config = Project::new(&report("warehouse-17", "0 30 6 * * *", "UTC")).load();
    let t0 = at(2026, 12, 1, 6, 0);
    let (first_clock, second_clock) = (ManualClock::new(t0), ManualClock::new(t0));
    let registry = |clock: &ManualClock, id: &str| {
        Registry::new(
            &config,
            t.ledger.clone(),
            Arc::new(clock.clone()),
            id.into(),
        )
    };
    let first = registry(&first_clock, "zulu:1");
    first.beat().await.expect("beat");
    assert!(first.leadership().leads(), "alone, it leads");
    assert_eq!(first.leadership().live_nodes(), 1);
    second_clock.advance(Duration::seconds(10));
    let second = registry(&second_clock, "alpha:2");
    second.beat().await.expect("beat");
    assert!(!second.leadership().leads(), "started later: it follows");
    assert_eq!(
        second.leadership().live_nodes(),
        2,
        "it counts itself and the first"
    );
    first_clock.advance(Duration::seconds(10));
    first.beat().await.expect("beat");
    assert!(first.leadership().leads(), "still first");
    assert_eq!(first.leadership().live_nodes(), 2);
    // The first node stalls: silent for longer than three heartbeat intervals (30 s).
    second_clock.advance(Duration::seconds(31));
    second.beat().await.expect("beat");
    assert!(second.leadership().leads(), "the leader fell silent");
    assert_eq!(
        second.leadership().live_nodes(),
        1,
        "a silent node is not counted"
    );
    first_clock.advance(Duration::seconds(31));
    first.beat().await.expect("beat");
    assert!(
        first.leadership().leads(),
        "back, it started first and leads again"
    );
    second_clock.advance(Duration::seconds(1));
    second.beat().await.expect("beat");
    assert!(!second.leadership().leads());
}

/// A heartbeat reads the ledger's clock in its own transaction and hands the reading to the
/// timekeeper: a node whose wall clock is two hours fast learns its offset from its first
/// heartbeat (PostgreSQL; SQLite has no clock of its own, and the node follows none).
async fn a_heartbeat_reads_the_ledgers_clock_for_the_timekeeper(t: &TestLedger) {
    use dawnpost::domain::clock::LedgerClock;
    use dawnpost::services::registry::Registry;
    use dawnpost::services::timekeeper::Timekeeper;
    use std::sync::Arc;
    let config = Project::new(&report("warehouse-17", "0 30 6 * * *", "UTC")).load();
    let wall = dawnpost::ManualClock::new(chrono::Utc::now() + Duration::hours(2));
    let clock = Arc::new(LedgerClock::new(Arc::new(wall)));
    let shared: dawnpost::SharedClock = clock.clone();
    let metrics = Arc::new(dawnpost::runtime::metrics::Metrics::default());
    let keeper = Timekeeper::new(
        (t.ledger.clone(), shared.clone()),
        metrics.clone(),
        dawnpost::Span::from_secs(30),
        std::time::Duration::from_secs(10),
    );
    let node = Registry::new(&config, t.ledger.clone(), shared, "skewed:1".into())
        .with_timekeeper(Arc::new(keeper));
    assert_eq!(clock.offset(), None, "no reading yet");
    node.beat().await.expect("beat");
    match t.schema() {
        Some(_) => {
            let offset = clock.offset().expect("the heartbeat's reading");
            let off = (offset - Duration::hours(2)).num_seconds().abs();
            assert!(off < 60, "two hours fast, read as {offset}");
            let shown = metrics.clock_offset.get();
            assert!((shown - 7200.0).abs() < 60.0, "the gauge says {shown}");
        }
        None => assert_eq!(clock.offset(), None, "SQLite has no clock to follow"),
    }
}

on_both_backends!(
    a_heartbeat_registers_a_node_and_silence_ends_it,
    the_node_that_started_first_leads_until_it_falls_silent,
    a_heartbeat_reads_the_ledgers_clock_for_the_timekeeper,
    the_overview_lists_the_live_nodes,
    held_leases_are_named_with_their_owner_until_they_expire,
    a_registry_round_beats_forgets_and_follows_the_live_nodes,
);
