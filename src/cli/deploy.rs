//! The commands of a deploy: `migrate` (the ledger's pending migrations, a contract one once
//! nothing of the old shape is in the way) and `nodes` (who runs on the ledger, in which
//! version).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

use super::{LedgerSlot, MigrateArgs, NodesArgs};
use crate::config::Config;
use crate::domain::clock::SharedClock;
use crate::domain::window::rfc3339;
use crate::ledger::{Blockers, Ledger, MigrationInfo, Opening};

/// How often `migrate --wait` looks again, and how often it says what it waits for.
const RECHECK: Duration = Duration::from_secs(1);
const PROGRESS: Duration = Duration::from_secs(10);

fn line(verb: &str, m: &MigrationInfo) {
    out!(
        "{verb}: {} {} ({})",
        m.version,
        m.description,
        m.kind.as_str()
    );
}

/// `migrate [--dry-run] [--expand-only] [--wait D]`: what is pending (each expand or
/// contract), then, unless a dry run, applies it in order; a contract migration waits up to
/// `--wait` for the nodes and leases in its way, then refuses naming them.
pub(super) async fn migrate(
    config: &Config,
    args: &MigrateArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let wait: crate::domain::duration::Span = args.wait.parse().context("--wait")?;
    let l = super::open_ledger_as(config, Opening::AsIs).await?;
    let done = migrate_on(&l, config, args, wait.as_std(), &clock).await;
    l.close().await;
    done
}

async fn migrate_on(
    l: &Ledger,
    config: &Config,
    args: &MigrateArgs,
    wait: Duration,
    clock: &SharedClock,
) -> anyhow::Result<ExitCode> {
    let fit = l.schema().fit().await?;
    for m in &fit.unknown {
        line("applied by a newer version", m);
    }
    let live_since = |now| crate::services::registry::live_since(config, now);
    if args.dry_run {
        fit.pending.iter().for_each(|m| line("pending", m));
        let now = clock.now();
        let plan = l.schema().plan(now, live_since(now), false).await?;
        if let Some(b) = &plan.blocked {
            out!("would wait: {}", b.describe());
        }
        return finish(l, None).await;
    }
    let deadline = tokio::time::Instant::now() + wait;
    let mut said: Option<(Blockers, tokio::time::Instant)> = None;
    let mut applied = 0;
    loop {
        let now = clock.now();
        let done = l
            .schema()
            .migrate(now, live_since(now), args.expand_only)
            .await?;
        done.applied.iter().for_each(|m| line("applied", m));
        applied += done.applied.len();
        let Some(b) = done.blocked else { break };
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "{}; the expand migrations are applied. Run `dawnpost migrate` again once \
                 they are gone (or with --wait)",
                b.describe()
            );
        }
        let stale = said
            .as_ref()
            .is_none_or(|(last, at)| *last != b || at.elapsed() >= PROGRESS);
        if stale {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            out!(
                "waiting (up to {} s more): {}",
                left.as_secs(),
                b.describe()
            );
            said = Some((b, tokio::time::Instant::now()));
        }
        tokio::time::sleep(RECHECK).await;
    }
    finish(l, Some(applied)).await
}

/// The closing line: the schema version, how many migrations were `applied` (none: a dry
/// run) and what is still pending.
async fn finish(l: &Ledger, applied: Option<usize>) -> anyhow::Result<ExitCode> {
    let fit = l.schema().fit().await?;
    let pending = fit.pending.len();
    let state = match (applied, pending) {
        (None | Some(0), 0) => "up to date".to_string(),
        (None, n) => format!("{n} migration(s) pending"),
        (Some(a), 0) => format!("{a} migration(s) applied, up to date"),
        (Some(a), n) => format!(
            "{a} migration(s) applied, {n} still pending (run `dawnpost migrate` once every \
             node runs this version)"
        ),
    };
    out!(
        "ledger ({}) at schema version {}: {state}",
        l.backend_name(),
        fit.applied
    );
    Ok(ExitCode::SUCCESS)
}

/// `nodes [--json]`: the nodes whose last heartbeat is recent (see [`crate::services::registry`]).
pub(super) async fn nodes(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &NodesArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let now = clock.now();
    let live = ledger
        .get()
        .await?
        .nodes()
        .list(crate::services::registry::live_since(config, now))
        .await?;
    if args.json {
        for n in &live {
            out!(
                "{}",
                serde_json::to_string(&crate::views::api::NodeV1::of(n, &live))?
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{:<32} {:<10} {:>6} {:<8} {:<24} {:<24} LEADS",
        "NODE",
        "VERSION",
        "SCHEMA",
        "FORMATS",
        "STARTED",
        "LAST HEARTBEAT"
    );
    let leader = crate::ledger::leader(&live).map(|l| l.id.as_str());
    for n in &live {
        out!(
            "{:<32} {:<10} {:>6} {:<8} {:<24} {:<24} {}",
            n.id,
            n.version,
            n.schema_version,
            n.formats,
            rfc3339(n.started_at),
            rfc3339(n.heartbeat_at),
            if leader == Some(n.id.as_str()) {
                "yes"
            } else {
                ""
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
