//! `dawnpost redrive --report R --class C …`: a group of dead letters redriven as a runbook
//! ([`crate::services::runbook`]): the dry run printed, then the canary and the batches followed step by
//! step until the runbook is done, stops by itself, or `--wait` runs out (the daemon's
//! `runbooks` service carries it on).

use std::process::ExitCode;

use anyhow::{Context, bail};

use super::{EXIT_ERROR, LedgerSlot, RedriveArgs, parse_instant};
use crate::domain::clock::SharedClock;
use crate::domain::duration::Span;
use crate::domain::outcome::ResponseClass;
use crate::ledger::{RunbookSpec, RunbookState, Via};
use crate::node::runner::{EXIT_PENDING, EXIT_QUARANTINED};
use crate::services::runbook::{self, Advance};

/// How often the command looks at a runbook it follows.
const POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The classes a group may have (a delivery is never quarantined `accepted`).
fn class(s: &str) -> anyhow::Result<ResponseClass> {
    let Some(c) = ResponseClass::of_dead_letter(s) else {
        bail!(
            "--class: {s:?} is not a dead-letter class (permanent, transient, ambiguous, rate_limited, unknown)"
        );
    };
    Ok(c)
}

fn spec(args: &RedriveArgs) -> anyhow::Result<RunbookSpec> {
    let report = args.report.clone().unwrap_or_default();
    let class = class(args.class.as_deref().unwrap_or_default())?;
    let since = args
        .since
        .as_deref()
        .map(parse_instant)
        .transpose()
        .context("--since")?;
    Ok(RunbookSpec {
        report,
        host: args.host.clone().unwrap_or_default().to_ascii_lowercase(),
        class,
        since,
        canary: args.canary,
        batch: args.batch,
        by: args.by.trim().to_string(),
        reason: args.reason.trim().to_string(),
        via: Via::Cli,
    })
}

pub(super) async fn redrive(
    ledger: &mut LedgerSlot<'_>,
    args: &RedriveArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let spec = spec(args)?;
    let wait: Span = args
        .wait
        .parse()
        .map_err(|e| anyhow::anyhow!("--wait: {e}"))?;
    let l = &ledger.get().await?;
    let (rb, found) = match runbook::plan(l, &spec, clock.now()).await {
        Ok(planned) => planned,
        Err(runbook::RunbookError::Invalid(why)) => {
            errln!("refused: {why}");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
        Err(e) => return Err(e.into()),
    };
    out!(
        "runbook #{}: {} quarantined deliver(ies) of {} with class {}{}",
        rb.id,
        found.len(),
        spec.report,
        spec.class.as_str(),
        if spec.host.is_empty() {
            String::new()
        } else {
            format!(" at {}", spec.host)
        }
    );
    for d in &found {
        out!("  {}", d.key.redacted());
    }
    if args.dry_run || found.is_empty() {
        out!("dry run: nothing redriven");
        return Ok(ExitCode::SUCCESS);
    }
    let mut step = runbook::start(l, rb.id, &spec.by, clock.now()).await?;
    let started = clock.now();
    let mut shown = 0;
    loop {
        // Every step taken, from the audit trail: the daemon drives the runbook too, and may
        // take a step before this command does.
        for s in runbook::redrives_after(l, rb.id, shown).await? {
            out!(
                "step {} ({}): redrove {}; waiting for the daemon to send",
                s.step,
                s.action,
                s.count
            );
            shown = s.step;
        }
        if let Advance::Stopped(why) | Advance::Done(why) = &step {
            out!("{why}");
        }
        match step {
            Advance::Done(_) => return Ok(ExitCode::SUCCESS),
            Advance::Stopped(_) => return Ok(ExitCode::from(EXIT_QUARANTINED)),
            Advance::Finished => {
                if let Some(code) = finished(l, rb.id).await? {
                    return Ok(code);
                }
            }
            _ => {}
        }
        if clock.now().signed_duration_since(started) >= wait.as_chrono() {
            out!(
                "still running after {}: the daemon carries runbook #{} on",
                args.wait,
                rb.id
            );
            return Ok(ExitCode::from(EXIT_PENDING));
        }
        tokio::time::sleep(POLL).await;
        step = runbook::advance(l, rb.id, clock.now()).await?;
    }
}

/// The runbook was finished by another driver (the daemon): its outcome decides the exit.
/// `None` while it still runs: the other driver only took a step before this one (both
/// drive it), and this one goes on waiting for it.
async fn finished(l: &crate::ledger::Ledger, id: i64) -> anyhow::Result<Option<ExitCode>> {
    let rb = l.runbooks().get(id).await?;
    if rb.as_ref().is_some_and(|r| !r.is_finished()) {
        return Ok(None);
    }
    let outcome = rb
        .as_ref()
        .and_then(|r| r.outcome.clone())
        .unwrap_or_default();
    out!("{outcome}");
    Ok(Some(match rb.map(|r| r.state) {
        Some(RunbookState::Done) => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_QUARANTINED),
    }))
}
