//! The chaos suite: the chaos and pressure scenarios of the public PostgreSQL job-queue
//! benchmark (hardbyte/postgresql-job-queue-benchmarking), run against two `dawnpost run` nodes
//! on one PostgreSQL, on loopback. Each scenario: a steady phase (before), the fault (during),
//! the fault lifted (after), then the backlog drained. During each fault one node is stopped
//! with SIGTERM and started again: it must end within `drain_timeout` + 5 s, exit 0, and lose
//! nothing. Prints one JSON line per scenario and, at the end, a table in the benchmark's shape.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::faults;
use crate::rig::{DRAIN_TIMEOUT_S, Node, Offer, PER_JOB, Rig};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scenario {
    BackendKill,
    IdleInTx,
    Readers,
    SlotsHeld,
    RepeatedKills,
    HighLoad,
}

impl Scenario {
    pub const ALL: [Scenario; 6] = [
        Scenario::BackendKill,
        Scenario::IdleInTx,
        Scenario::Readers,
        Scenario::SlotsHeld,
        Scenario::RepeatedKills,
        Scenario::HighLoad,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::BackendKill => "pg_backend_kill",
            Scenario::IdleInTx => "idle_in_tx",
            Scenario::Readers => "active_readers",
            Scenario::SlotsHeld => "pool_exhaustion",
            Scenario::RepeatedKills => "repeated_kills",
            Scenario::HighLoad => "sustained_high_load",
        }
    }

    /// The scenario as the table names it.
    fn words(self) -> &'static str {
        match self {
            Scenario::BackendKill => {
                "`pg_terminate_backend` of the nodes' busy backends, 20 rounds/s (10 at full speed)"
            }
            Scenario::IdleInTx => "idle-in-transaction XID holder",
            Scenario::Readers => "4 REPEATABLE READ readers",
            Scenario::SlotsHeld => "all connection slots but 3 held",
            Scenario::RepeatedKills => "node A SIGKILLed every 10 s, 5 times",
            Scenario::HighLoad => "1.5× the offered rate",
        }
    }
}

/// How load is offered: `Some(jobs a second)`, or full speed (a backlog kept).
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    pub rate: Option<f64>,
    pub phase_s: f64,
}

impl Mode {
    fn name(&self) -> String {
        match self.rate {
            Some(r) => format!("capped {} deliveries/s", r * PER_JOB as f64),
            None => "full speed".into(),
        }
    }

    fn steady(&self) -> Offer {
        match self.rate {
            Some(r) => Offer::Rate(r),
            None => Offer::Depth(600),
        }
    }
}

#[derive(serde::Serialize)]
pub struct Line {
    pub scenario: &'static str,
    pub mode: String,
    pub before: f64,
    pub during: f64,
    pub after: f64,
    /// After / before, as the public benchmark's recovery ratio.
    pub recovery: f64,
    /// The longest stretch without a delivery before the fault and during it, in seconds.
    pub longest_gap_before: f64,
    pub longest_gap_during: f64,
    pub back_to_pace_s: Option<f64>,
    pub drained_s: Option<f64>,
    pub jobs: u64,
    pub deliveries: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub extra_keys: u64,
    pub sigterm_s: f64,
    pub sigterm_exit: Option<i32>,
    pub fault: String,
    pub warnings: BTreeMap<&'static str, usize>,
    pub verdict: &'static str,
}

/// Lines of the nodes' logs an operator would act on, counted by what they say.
const WATCHED: [(&str, &str); 5] = [
    ("clock off", "clock is off the ledger's"),
    ("settled late", "settled jobs left delivering"),
    ("pool timed out", "pool timed out"),
    ("too many clients", "53300"),
    ("panic", "panicked"),
];

pub async fn run(admin_url: &str, scenario: Scenario, mode: Mode, label: &str) -> Line {
    let rig = Rig::new(admin_url, &format!("{}_{label}", scenario.name())).await;
    let mut a = rig.start_node("a");
    let mut b = rig.start_node("b");
    rig.set_offer(mode.steady());
    rig.start_load();
    // Warm up until deliveries flow.
    for _ in 0..120 {
        if rig.received() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // and settle into their pace.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let p = mode.phase_s;
    let t0 = rig.now();
    tokio::time::sleep(Duration::from_secs_f64(p)).await;
    let t1 = rig.now();
    let before = rig.rate(t0, t1);
    let during_s = match scenario {
        Scenario::RepeatedKills => 50.0,
        _ => 2.0 * p,
    };
    let stop = CancellationToken::new();
    let fault = start_fault(&rig, scenario, mode, before, stop.clone());
    let (sigterm_s, sigterm_exit) = during(&rig, scenario, during_s, (&mut a, &mut b)).await;
    stop.cancel();
    rig.set_offer(mode.steady());
    let fault = fault
        .await
        .unwrap_or_else(|e| format!("fault task failed: {e}"));
    let t2 = rig.now();
    tokio::time::sleep(Duration::from_secs_f64(p)).await;
    let t3 = rig.now();
    rig.set_offer(Offer::Off);
    let drained_s = drain(&rig).await;
    a.terminate().await;
    b.terminate().await;
    let line = line(
        &rig,
        scenario,
        mode,
        [t0, t1, t2, t3],
        (sigterm_s, sigterm_exit),
        fault,
        drained_s,
    );
    rig.finish().await;
    line
}

/// The fault, as a task that runs until `stop` and says what it did.
fn start_fault(
    rig: &Rig,
    scenario: Scenario,
    mode: Mode,
    before: f64,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<String> {
    let (url, app, schema) = (
        rig.admin_url.clone(),
        rig.application_name.clone(),
        rig.schema.clone(),
    );
    match scenario {
        // 20 rounds a second at the capped rate, 10 at full speed (as the public runs did): at
        // full speed a group commit takes longer than 50 ms, and one killed at every round
        // never lands.
        Scenario::BackendKill => tokio::spawn(faults::terminate_backends(
            url,
            app,
            Duration::from_millis(if mode.rate.is_some() { 50 } else { 100 }),
            stop,
        )),
        Scenario::IdleInTx => tokio::spawn(faults::hold_xmin(url, schema, stop)),
        Scenario::Readers => tokio::spawn(faults::readers(url, schema, 4, stop)),
        Scenario::SlotsHeld => tokio::spawn(faults::hold_slots(url, app, 3, stop)),
        Scenario::RepeatedKills => tokio::spawn(async { "5 kills of node A".to_string() }),
        Scenario::HighLoad => {
            let jobs_per_s = mode.rate.unwrap_or(before / PER_JOB as f64) * 1.5;
            rig.set_offer(Offer::Rate(jobs_per_s));
            tokio::spawn(async move {
                stop.cancelled().await;
                format!("{:.0} deliveries/s offered", jobs_per_s * PER_JOB as f64)
            })
        }
    }
}

/// The fault's phase: node B is stopped with SIGTERM two thirds in and started again; under
/// repeated kills node A is SIGKILLed and restarted every 10 s besides.
async fn during(
    rig: &Rig,
    scenario: Scenario,
    seconds: f64,
    (a, b): (&mut Node, &mut Node),
) -> (f64, Option<i32>) {
    let started = rig.now();
    let term_at = started + seconds * 2.0 / 3.0;
    let mut term = None;
    let mut next_kill = started + 5.0;
    let mut kills = 0;
    while rig.now() < started + seconds {
        if scenario == Scenario::RepeatedKills && kills < 5 && rig.now() >= next_kill {
            a.kill().await;
            rig.restart(a);
            kills += 1;
            next_kill += 10.0;
        }
        if term.is_none() && rig.now() >= term_at {
            term = Some(b.terminate().await);
            rig.restart(b);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    term.unwrap_or((0.0, None))
}

/// Waits until every job offered is delivered everywhere; seconds taken, `None` past 180 s.
async fn drain(rig: &Rig) -> Option<f64> {
    let from = rig.now();
    let expected = rig.inserted.load(std::sync::atomic::Ordering::Relaxed) * PER_JOB as u64;
    while rig.now() - from < 180.0 {
        if rig.distinct() as u64 >= expected {
            return Some(rig.now() - from);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

fn line(
    rig: &Rig,
    scenario: Scenario,
    mode: Mode,
    [t0, t1, t2, t3]: [f64; 4],
    (sigterm_s, sigterm_exit): (f64, Option<i32>),
    fault: String,
    drained_s: Option<f64>,
) -> Line {
    let before = rig.rate(t0, t1);
    let jobs = rig.inserted.load(std::sync::atomic::Ordering::Relaxed);
    let deliveries = jobs * PER_JOB as u64;
    let distinct = rig.distinct() as u64;
    let logged = rig.logged();
    let warnings: BTreeMap<&'static str, usize> = WATCHED
        .iter()
        .map(|(name, text)| (*name, logged.matches(text).count()))
        .collect();
    let lost = deliveries.saturating_sub(distinct);
    let extra_keys = distinct.saturating_sub(deliveries);
    let stopped_in_time = sigterm_exit == Some(0) && sigterm_s <= (DRAIN_TIMEOUT_S + 5) as f64;
    let false_warnings = warnings["clock off"] + warnings["panic"];
    let after = rig.rate(t2, t3);
    let verdict = match lost == 0
        && extra_keys == 0
        && drained_s.is_some()
        && stopped_in_time
        && after > 0.0
        && false_warnings == 0
    {
        true => "pass",
        false => "FAIL",
    };
    Line {
        scenario: scenario.name(),
        mode: mode.name(),
        before: round(before),
        during: round(rig.rate(t1, t2)),
        after: round(after),
        recovery: round(after / before.max(f64::MIN_POSITIVE) * 100.0) / 100.0,
        longest_gap_before: round(rig.longest_gap(t0, t1)),
        longest_gap_during: round(rig.longest_gap(t1, t2)),
        back_to_pace_s: rig.back_to_pace(t2, before * 0.5).map(round),
        drained_s: drained_s.map(round),
        jobs,
        deliveries,
        lost,
        duplicates: rig.web.duplicates() + rig.mail.duplicates(),
        extra_keys,
        sigterm_s: (sigterm_s * 100.0).round() / 100.0,
        sigterm_exit,
        fault,
        warnings,
        verdict,
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The lines as one Markdown table, in the shape of the public benchmark's.
pub fn table(lines: &[Line]) -> String {
    let mut out = String::from(
        "| scenario | mode | before → during → after (deliveries/s) | recovery | lost | duplicates (same key) | SIGTERM during it | notes | verdict |\n|---|---|---|---:|---:|---:|---|---|---|\n",
    );
    for l in lines {
        let words = Scenario::ALL
            .iter()
            .find(|s| s.name() == l.scenario)
            .map_or(l.scenario, |s| s.words());
        let pace = l
            .back_to_pace_s
            .map_or("never".to_string(), |s| format!("{s} s"));
        let drained = l.drained_s.map_or("not drained in 180 s".to_string(), |s| {
            format!("backlog drained in {s} s")
        });
        out.push_str(&format!(
            "| {words} | {} | {} → {} → {} | {:.2} | {} | {} | exit {}, {:.2} s | {}; longest stretch without a delivery {} s before, {} s during; at half the pace before {pace} after the fault; {drained} | {} |\n",
            l.mode,
            l.before,
            l.during,
            l.after,
            l.recovery,
            l.lost,
            l.duplicates,
            l.sigterm_exit.map_or("none".to_string(), |c| c.to_string()),
            l.sigterm_s,
            l.fault,
            l.longest_gap_before,
            l.longest_gap_during,
            l.verdict,
        ));
    }
    out
}
