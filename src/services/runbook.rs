//! Bulk redrive as a runbook (README.md, "HTTP", the console), one engine for the console and
//! `dawnpost redrive`: a group of quarantined deliveries (report, destination host, error class, quarantined
//! since) is planned first (a dry run: how many, which), then started: one canary, then
//! batches of a chosen size. Each step waits until the deliveries it redrove are sent or back
//! in quarantine; it stops by itself when the canary comes back quarantined with the group's
//! class, or more than half a batch does. Every step is audited (`runbook_steps`), and every
//! redrive writes its own audit row. Time comes in as `now`; the drivers (the daemon's
//! `runbooks` service, the CLI) call [`advance`] until the runbook is finished.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::keys::DeliveryKey;
use crate::ledger::{
    Audit, Delivery, DeliveryState, Ledger, LedgerError, Runbook, RunbookSpec, RunbookState,
    RunbookStep, StepRecord, Transition,
};

/// Quarantined deliveries read at most, for a group or for the DLQ page.
pub(crate) const SCAN_LIMIT: u32 = 10_000;
/// Keys a plan's or a step's audit lists by name (redacted); the count covers the rest.
const NAMED: usize = 20;

/// What went wrong driving a runbook.
#[derive(Debug, thiserror::Error)]
pub enum RunbookError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("no runbook #{0}")]
    NotFound(i64),
    #[error("invalid runbook: {0}")]
    Invalid(String),
}

/// Quarantined deliveries sharing a report, a destination host and a last error class.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Group {
    pub report: String,
    pub host: String,
    pub class: String,
    pub count: usize,
    pub oldest: Option<DateTime<Utc>>,
    pub newest: Option<DateTime<Utc>>,
}

/// The dead letters grouped (most first); `truncated` when more than [`SCAN_LIMIT`] exist.
pub async fn groups(ledger: &Ledger) -> Result<(Vec<Group>, bool), RunbookError> {
    let all = ledger.deliveries().quarantined(SCAN_LIMIT + 1).await?;
    let truncated = all.len() > SCAN_LIMIT as usize;
    let mut by: BTreeMap<(String, String, String), Group> = BTreeMap::new();
    for d in all.iter().take(SCAN_LIMIT as usize) {
        let class = d.last_class.map_or("unknown", |c| c.as_str()).to_string();
        let report = d.key.job().report().to_string();
        let host = crate::domain::keys::receiver(d.key.destination());
        let g = by
            .entry((report.clone(), host.clone(), class.clone()))
            .or_insert(Group {
                report,
                host,
                class,
                count: 0,
                oldest: None,
                newest: None,
            });
        g.count += 1;
        let at = d.terminal_at.unwrap_or(d.updated_at);
        g.oldest = Some(g.oldest.map_or(at, |o| o.min(at)));
        g.newest = Some(g.newest.map_or(at, |n| n.max(at)));
    }
    let mut out: Vec<Group> = by.into_values().collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.count));
    Ok((out, truncated))
}

/// The group's deliveries now, oldest first (at most [`SCAN_LIMIT`]).
pub(crate) async fn members(
    ledger: &Ledger,
    spec: &RunbookSpec,
) -> Result<Vec<Delivery>, RunbookError> {
    let found = ledger
        .runbooks()
        .members(&spec.report, spec.class, spec.since, SCAN_LIMIT)
        .await?;
    Ok(found
        .into_iter()
        .filter(|d| {
            // A host as written, in any case: a domain, or a chat destination's variable.
            spec.host.is_empty()
                || (crate::domain::keys::receiver(d.key.destination()))
                    .eq_ignore_ascii_case(&spec.host)
        })
        .collect())
}

/// Up to [`NAMED`] keys, redacted, and how many more.
fn named(keys: &[&DeliveryKey]) -> String {
    let mut s: Vec<String> = keys.iter().take(NAMED).map(|k| k.redacted()).collect();
    if keys.len() > NAMED {
        s.push(format!("and {} more", keys.len() - NAMED));
    }
    s.join(", ")
}

/// The dry run: records a planned runbook with how many deliveries it would redrive and which.
/// Returns the runbook and the deliveries.
pub async fn plan(
    ledger: &Ledger,
    spec: &RunbookSpec,
    now: DateTime<Utc>,
) -> Result<(Runbook, Vec<Delivery>), RunbookError> {
    if spec.report.trim().is_empty() {
        return Err(RunbookError::Invalid("report is required".into()));
    }
    if spec.canary == 0 || spec.batch == 0 {
        return Err(RunbookError::Invalid(
            "canary and batch must be at least 1".into(),
        ));
    }
    Audit::new(&spec.by, &spec.reason, spec.via)
        .map_err(|e| RunbookError::Invalid(e.to_string()))?;
    let found = members(ledger, spec).await?;
    let keys: Vec<&DeliveryKey> = found.iter().map(|d| &d.key).collect();
    let detail = format!("dry run: {} deliver(ies): {}", keys.len(), named(&keys));
    let count = i64::try_from(found.len()).unwrap_or(i64::MAX);
    let id = ledger.runbooks().create(spec, count, &detail, now).await?;
    let rb = ledger
        .runbooks()
        .get(id)
        .await?
        .ok_or(RunbookError::NotFound(id))?;
    Ok((rb, found))
}

/// Starts a planned runbook (audited as `by`) and takes its first step (the canary).
pub async fn start(
    ledger: &Ledger,
    id: i64,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Advance, RunbookError> {
    let t = Transition {
        from: RunbookState::Planned,
        to: RunbookState::Running,
        step: 0,
        next_step: false,
        outcome: None,
    };
    let record = StepRecord {
        action: "start",
        count: 0,
        detail: "started",
        by,
    };
    if !ledger.runbooks().transition(id, t, record, now).await? {
        return Ok(Advance::Finished);
    }
    advance(ledger, id, now).await
}

/// The redrive steps (canary, batches) a runbook took after step `after`, whoever took them:
/// a follower (the CLI) reports every step from the audit trail, also those another driver
/// (the daemon) took before it could.
pub async fn redrives_after(
    ledger: &Ledger,
    id: i64,
    after: i64,
) -> Result<Vec<RunbookStep>, RunbookError> {
    Ok(ledger
        .runbooks()
        .steps(id)
        .await?
        .into_iter()
        .filter(|s| s.step > after && matches!(s.action.as_str(), "canary" | "batch"))
        .collect())
}

/// Stops a planned or running runbook by hand (audited as `by`).
pub async fn stop(
    ledger: &Ledger,
    id: i64,
    by: &str,
    now: DateTime<Utc>,
) -> Result<bool, RunbookError> {
    let rb = get(ledger, id).await?;
    if rb.is_finished() {
        return Ok(false);
    }
    let outcome = format!("stopped by {by}");
    let t = Transition {
        from: rb.state,
        to: RunbookState::Stopped,
        step: rb.step,
        next_step: false,
        outcome: Some(&outcome),
    };
    let record = StepRecord {
        action: "stopped",
        count: 0,
        detail: &outcome,
        by,
    };
    Ok(ledger.runbooks().transition(id, t, record, now).await?)
}

async fn get(ledger: &Ledger, id: i64) -> Result<Runbook, RunbookError> {
    ledger
        .runbooks()
        .get(id)
        .await?
        .ok_or(RunbookError::NotFound(id))
}

/// What one [`advance`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// Not started: the dry run awaits a start.
    Planned,
    /// The last step's deliveries are still being sent (`n` not yet sent or quarantined).
    Waiting(usize),
    /// Took step `step` (1: the canary), redriving `count` deliveries.
    Redrove { step: i64, count: usize },
    /// Stopped by itself; why.
    Stopped(String),
    /// Every delivery of the group redriven and judged.
    Done(String),
    /// Already stopped or done (or another driver moved it first).
    Finished,
}

/// Takes the runbook's next step if its last one is judged: stops when the work came back
/// quarantined with the group's class, finishes when nothing is left, else redrives the next
/// batch (the canary first).
pub async fn advance(
    ledger: &Ledger,
    id: i64,
    now: DateTime<Utc>,
) -> Result<Advance, RunbookError> {
    let rb = get(ledger, id).await?;
    match rb.state {
        RunbookState::Planned => return Ok(Advance::Planned),
        RunbookState::Running => {}
        RunbookState::Stopped | RunbookState::Done => return Ok(Advance::Finished),
    }
    if rb.step > 0 {
        let items = ledger.runbooks().items(id, Some(rb.step)).await?;
        let last = ledger.deliveries().get_many(&items).await?;
        let open = last
            .iter()
            .filter(|d| DeliveryState::UNFINISHED.contains(&d.state))
            .count();
        if open > 0 {
            return Ok(Advance::Waiting(open));
        }
        if let Some(why) = repeated(&rb, &last) {
            return end(
                ledger,
                &rb,
                (RunbookState::Stopped, why),
                now,
                Advance::Stopped,
            )
            .await;
        }
    }
    let taken = ledger.runbooks().items(id, None).await?;
    let size = if rb.step == 0 {
        rb.spec.canary
    } else {
        rb.spec.batch
    };
    let next: Vec<Delivery> = members(ledger, &rb.spec)
        .await?
        .into_iter()
        .filter(|d| !taken.contains(&d.key.to_string()))
        .take(size as usize)
        .collect();
    if next.is_empty() {
        let why = format!("done: {} deliver(ies) redriven", taken.len());
        return end(ledger, &rb, (RunbookState::Done, why), now, Advance::Done).await;
    }
    let step = rb.step + 1;
    let action = if step == 1 { "canary" } else { "batch" };
    let keys: Vec<&DeliveryKey> = next.iter().map(|d| &d.key).collect();
    let detail = format!("{action}: {}", named(&keys));
    let reason = format!("runbook #{id} {action}: {}", rb.spec.reason);
    let audit = Audit::new(&rb.spec.by, &reason, rb.spec.via)
        .map_err(|e| RunbookError::Invalid(e.to_string()))?;
    let record = StepRecord {
        action,
        count: 0,
        detail: &detail,
        by: &rb.spec.by,
    };
    match ledger
        .runbooks()
        .redrive_step(id, rb.step, &keys, &audit, record, now)
        .await?
    {
        Some(redriven) => Ok(Advance::Redrove {
            step,
            count: redriven.len(),
        }),
        None => Ok(Advance::Finished),
    }
}

/// Ends `rb` in a state, saying why: `then(why)` when this call moved it, else `Finished`
/// (another driver or an operator moved it first).
async fn end(
    ledger: &Ledger,
    rb: &Runbook,
    (state, why): (RunbookState, String),
    now: DateTime<Utc>,
    then: fn(String) -> Advance,
) -> Result<Advance, RunbookError> {
    let moved = finish(ledger, rb, state, &why, now).await?;
    Ok(if moved { then(why) } else { Advance::Finished })
}

/// Why the last step's deliveries say stop: the canary back in quarantine with the group's
/// class, or more than half of a batch.
fn repeated(rb: &Runbook, last: &[Delivery]) -> Option<String> {
    let class = rb.spec.class;
    let back = last
        .iter()
        .filter(|d| d.state == DeliveryState::Quarantined && d.last_class == Some(class))
        .count();
    let canary = rb.step == 1;
    let stop = back > 0 && (canary || back * 2 > last.len());
    stop.then(|| {
        let what = if canary { "the canary" } else { "a batch" };
        format!(
            "stopped: {back} of {} deliver(ies) of {what} came back quarantined {}",
            last.len(),
            class.as_str()
        )
    })
}

async fn finish(
    ledger: &Ledger,
    rb: &Runbook,
    to: RunbookState,
    why: &str,
    now: DateTime<Utc>,
) -> Result<bool, RunbookError> {
    let t = Transition {
        from: RunbookState::Running,
        to,
        step: rb.step,
        next_step: false,
        outcome: Some(why),
    };
    let record = StepRecord {
        action: to.as_str(),
        count: 0,
        detail: why,
        by: &rb.spec.by,
    };
    Ok(ledger.runbooks().transition(rb.id, t, record, now).await?)
}

/// The daemon's `runbooks` service: advances every running runbook every `every`, so a bulk
/// redrive started from the console (or a CLI that stopped following) carries on. Several
/// nodes may run it: each step is claimed in the ledger, so one driver takes it; the node that
/// leads looks at the pace below, the others [`crate::runtime::leadership::FOLLOWER_ROUNDS`] times as
/// seldom ([`Driver::with_leadership`]). While none is
/// running it looks only every [`IDLE_ROUNDS`] intervals (each look is a read, a commit on a
/// shared ledger), or at once when woken ([`Driver::with_waker`]: this node's server started one).
/// A start takes its first step itself (the canary), so a runbook started elsewhere (the CLI,
/// another node) waits at most that longer pause for its second.
#[derive(Debug, Clone)]
pub struct Driver {
    ledger: Ledger,
    clock: crate::domain::clock::SharedClock,
    every: std::time::Duration,
    /// This node's pool, nudged when a step redrives deliveries.
    nudge: Option<crate::runtime::periodic::Nudge>,
    /// Wakes the driver: a runbook was started on this node.
    wake: crate::runtime::periodic::Nudge,
    /// Whether this node leads: else its pauses are [`crate::runtime::leadership::FOLLOWER_ROUNDS`]
    /// times as long.
    leadership: crate::runtime::leadership::Leadership,
}

/// A driver with no runbook running looks every this many intervals (`services.runbooks_every`).
pub const IDLE_ROUNDS: u32 = 5;

impl Driver {
    /// A driver taking a round every `every` (`services.runbooks_every`).
    pub fn new(
        ledger: Ledger,
        clock: crate::domain::clock::SharedClock,
        every: std::time::Duration,
    ) -> Driver {
        Driver {
            ledger,
            clock,
            every,
            nudge: None,
            wake: crate::runtime::periodic::Nudge::default(),
            leadership: Default::default(),
        }
    }

    /// Follows `leadership`: while another node leads, this driver looks
    /// [`crate::runtime::leadership::FOLLOWER_ROUNDS`] times as seldom (a backstop should the leader
    /// stall), or when woken.
    pub(crate) fn with_leadership(
        mut self,
        leadership: crate::runtime::leadership::Leadership,
    ) -> Driver {
        self.leadership = leadership;
        self
    }

    /// Wakes this driver when given: its next round is taken at once (a runbook was started).
    pub(crate) fn with_waker(mut self, wake: crate::runtime::periodic::Nudge) -> Driver {
        self.wake = wake;
        self
    }

    /// How long the driver waits after a round: `every` while a runbook runs, else
    /// [`IDLE_ROUNDS`] times as long; [`crate::runtime::leadership::FOLLOWER_ROUNDS`] times that on a
    /// node that does not lead.
    pub fn pause(&self, running: usize) -> std::time::Duration {
        let pause = match running {
            0 => self.every.saturating_mul(IDLE_ROUNDS),
            _ => self.every,
        };
        match self.leadership.leads() {
            true => pause,
            false => pause.saturating_mul(crate::runtime::leadership::FOLLOWER_ROUNDS),
        }
    }

    /// Nudges `nudge` (this node's pool) when a step redrives deliveries: they go out at once.
    pub fn with_nudge(mut self, nudge: crate::runtime::periodic::Nudge) -> Driver {
        self.nudge = Some(nudge);
        self
    }

    /// Advances each running runbook once; returns how many took a step or finished.
    pub async fn run_once(&self) -> Result<usize, RunbookError> {
        Ok(self.round().await?.moved)
    }

    /// Advances each running runbook once: how many took a step or finished, and how many
    /// were running.
    pub async fn round(&self) -> Result<Round, RunbookError> {
        let mut round = Round::default();
        for rb in self.ledger.runbooks().list(true, 100).await? {
            if rb.state != RunbookState::Running {
                continue;
            }
            round.running += 1;
            match advance(&self.ledger, rb.id, self.clock.now()).await? {
                Advance::Redrove { step, count } => {
                    tracing::info!(runbook = rb.id, step, count, "bulk redrive step");
                    if let Some(nudge) = &self.nudge {
                        nudge.now();
                    }
                    round.moved += 1;
                }
                Advance::Stopped(why) => {
                    tracing::warn!(runbook = rb.id, outcome = %why, "bulk redrive stopped itself");
                    round.moved += 1;
                }
                Advance::Done(why) => {
                    tracing::info!(runbook = rb.id, outcome = %why, "bulk redrive done");
                    round.moved += 1;
                }
                Advance::Waiting(_) | Advance::Planned | Advance::Finished => {}
            }
        }
        Ok(round)
    }

    /// Takes rounds until `cancel`: every `every` while a runbook runs, else every
    /// [`IDLE_ROUNDS`] intervals or when woken. A failed round is retried after `every`.
    pub async fn run(&self, cancel: tokio_util::sync::CancellationToken) {
        loop {
            let pause = match self.round().await {
                Ok(round) => self.pause(round.running),
                Err(e) => {
                    tracing::error!(error = %e, "advancing bulk redrives failed; retrying");
                    self.every
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
                _ = self.wake.notified() => {}
            }
        }
    }
}

/// One round of the driver.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Runbooks that took a step or finished.
    pub moved: usize,
    /// Runbooks running when the round began.
    pub running: usize,
}
