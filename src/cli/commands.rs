//! One function per command. Each checks its arguments before it asks for the ledger.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::print::{print_fire, print_plan, summary_text};
use super::{
    ArtifactPart, DlqArgs, EXIT_ERROR, EnqueueArgs, JobsArgs, LedgerSlot, PreviewArgs, RangeArgs,
    RedriveArgs, RunArgs, ShowArgs, SweepArgs, parse_instant, plan_range, plan_range_all,
    report_ids, shutdown_signal,
};
use crate::config::Config;
use crate::domain::clock::SharedClock;
use crate::domain::window::rfc3339;
use crate::ledger::{Audit, JobFilter, JobOrigin, JobState, LedgerError, NewJob, Via};
use crate::node::runner::RunOnceOptions;
use crate::report::artifact::{ArtifactStore, StoredArtifact};
use crate::report::render::Rendered;
use crate::report::schedule::Fire;
use crate::services::sweeper::Sweeper;
use crate::views::history::{JobHistory, Redactions, StoreCheck};

fn range(args: &RangeArgs) -> anyhow::Result<(DateTime<Utc>, DateTime<Utc>)> {
    let (from, to) = (parse_instant(&args.from)?, parse_instant(&args.to)?);
    if to <= from {
        bail!("--to must be after --from");
    }
    Ok((from, to))
}

fn local_date(date: &str) -> anyhow::Result<NaiveDate> {
    crate::domain::keys::parse_date(date)
        .with_context(|| format!("--date {date:?} is not a date (YYYY-MM-DD)"))
}

pub(super) fn plan(config: &Config, args: &RangeArgs) -> anyhow::Result<ExitCode> {
    let (from, to) = range(args)?;
    // A month at a time: `--to 9999-12-31` streams instead of building every fire first.
    for (start, end) in months(from, to) {
        for fire in plan_range_all(config, start, end) {
            print_fire(&fire, args.json, None)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `[from, to)` in consecutive spans of 31 days.
fn months(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> {
    let step = chrono::Duration::days(31);
    std::iter::successors(Some(from), move |&start| {
        Some(crate::domain::clock::add(start, step)).filter(|next| *next < to && *next > start)
    })
    .map(move |start| (start, crate::domain::clock::add(start, step).min(to)))
    .filter(move |(start, _)| *start < to)
}

pub(super) async fn backfill(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &RangeArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let (from, to) = range(args)?;
    let l = ledger.get().await?;
    let (mut inserted_total, mut fires_total) = (0, 0);
    // A month at a time, as `plan`: memory stays bounded however long the range.
    for (start, end) in months(from, to) {
        let fires = plan_range(config, start, end);
        let jobs: Vec<NewJob> = fires
            .iter()
            .map(|f| NewJob::of(f, f.fire_at, JobOrigin::Backfill))
            .collect();
        let inserted: std::collections::HashSet<_> = l
            .jobs()
            .insert_many(&jobs, clock.now())
            .await?
            .into_iter()
            .collect();
        for fire in &fires {
            print_fire(fire, args.json, Some(inserted.contains(&fire.key)))?;
        }
        inserted_total += inserted.len();
        fires_total += fires.len();
    }
    if !args.json {
        out!("{inserted_total} of {fires_total} jobs inserted");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn enqueue(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &EnqueueArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let Some(r) = config.report(&args.report) else {
        bail!(
            "no report {:?} in {} (known: {})",
            args.report,
            config.dir.display(),
            report_ids(config)
        );
    };
    let now = clock.now();
    let date = match &args.date {
        Some(d) => local_date(d)?,
        None => now.with_timezone(&r.timezone()).date_naive(),
    };
    let fire =
        Fire::for_date(r, date).context("that date has no window in the report's timezone")?;
    let l = ledger.get().await?;
    let job = NewJob::of(&fire, now, JobOrigin::Enqueue);
    let inserted = !l.jobs().insert_many(&[job], now).await?.is_empty();
    let state = l.jobs().get(&fire.key).await?.map(|j| j.state);
    print_enqueued(&fire, inserted, state, args.json)?;
    Ok(ExitCode::SUCCESS)
}

fn print_enqueued(
    fire: &Fire,
    inserted: bool,
    state: Option<JobState>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        #[derive(Serialize)]
        struct Line<'a> {
            key: String,
            inserted: bool,
            state: Option<JobState>,
            window_start: &'a str,
            window_end: &'a str,
        }
        out!(
            "{}",
            serde_json::to_string(&Line {
                key: fire.key.to_string(),
                inserted,
                state,
                window_start: &rfc3339(fire.window.start),
                window_end: &rfc3339(fire.window.end),
            })?
        );
    } else if inserted {
        out!(
            "enqueued {} (window {} .. {})",
            fire.key,
            rfc3339(fire.window.start),
            rfc3339(fire.window.end)
        );
    } else {
        out!(
            "{} already exists ({}); nothing inserted",
            fire.key,
            state.map_or("unknown", JobState::as_str)
        );
    }
    Ok(())
}

pub(super) async fn jobs(ledger: &mut LedgerSlot<'_>, args: JobsArgs) -> anyhow::Result<ExitCode> {
    let state = args
        .state
        .map(|s| {
            JobState::parse(&s).map_err(|_| {
                anyhow::anyhow!("--state {s:?} is not a job state (ready, rendering, delivering, done, quarantined, cancelled)")
            })
        })
        .transpose()?;
    let jobs = ledger
        .get()
        .await?
        .jobs()
        .list(&JobFilter {
            state,
            report: args.report,
            limit: Some(args.limit),
            ..JobFilter::default()
        })
        .await?;
    if args.json {
        for job in &jobs {
            out!(
                "{}",
                serde_json::to_string(&crate::views::api::JobV1::from(job))?
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{:<40} {:<12} {:>8}  {:<20}  LAST ERROR",
        "KEY",
        "STATE",
        "ATTEMPTS",
        "READY AT"
    );
    for job in &jobs {
        out!(
            "{:<40} {:<12} {:>8}  {:<20}  {}",
            job.key,
            job.state.as_str(),
            job.attempts,
            rfc3339(job.ready_at),
            job.last_error.as_deref().unwrap_or("")
        );
    }
    out!("{} job(s)", jobs.len());
    Ok(ExitCode::SUCCESS)
}

/// A token cancelled by SIGTERM/SIGINT. Cancel first: nothing, not even a log line, may stand
/// between a signal and the drain.
fn cancel_on_signal(what: &'static str) -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        on_signal.cancel();
        tracing::info!("shutdown requested: {what}");
    });
    cancel
}

pub(super) async fn preview(
    config: &Config,
    args: &PreviewArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let date = args.date.as_deref().map(local_date).transpose()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| config.root.join("var/preview"));
    let files =
        crate::views::preview::preview(config, &args.report, date, &out, clock.now()).await?;
    for path in files.paths() {
        out!("{}", path.display());
    }
    if !(files.messages.iter()).any(|m| m.extension().is_some_and(|e| e == "eml")) {
        errln!("no .eml: report {} has no email recipient", args.report);
    }
    errln!("{}", files.sizes.summary());
    for w in &files.warnings {
        errln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn run_once(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &RunArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let date = args.date.as_deref().map(local_date).transpose()?;
    let max_wait: crate::domain::duration::Span = args.max_wait.parse().context("--max-wait")?;
    let l = ledger.get().await?;
    let opts = RunOnceOptions {
        date,
        max_wait: max_wait.as_std(),
        progress: !args.json && std::io::stderr().is_terminal(),
        metrics: None,
    };
    let cancel = cancel_on_signal("stopping");
    let summary = crate::node::runner::run_once(config, l, clock, &opts, cancel).await?;
    let hide = if args.reveal {
        Redactions::default()
    } else {
        summary.redactions.clone()
    };
    print_redacted(&summary, summary_text(&summary, &hide), &hide, args.json)?;
    Ok(ExitCode::from(summary.exit_code))
}

pub(super) async fn daemon(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let l = ledger.get().await?;
    let cancel = cancel_on_signal("draining");
    crate::node::daemon::run(config, l, clock, cancel).await?;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn show(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &ShowArgs,
) -> anyhow::Result<ExitCode> {
    let l = ledger.get().await?;
    let Some(mut history) = crate::views::history::JobHistory::load(&l, &args.key).await? else {
        errln!("no job {}", args.key);
        return Ok(ExitCode::from(EXIT_ERROR));
    };
    let rendered = look_in_store(config, &mut history).await;
    if let Some(part) = args.artifact {
        let Some(r) = rendered else {
            let why = history
                .store
                .as_ref()
                .map_or(history.artifact_status.to_string(), |s| {
                    format!("{} ({})", s.status, s.detail)
                });
            errln!("job {}: no artifact to print: {why}", args.key);
            return Ok(ExitCode::from(EXIT_ERROR));
        };
        let text = match part {
            ArtifactPart::Html => r.html,
            ArtifactPart::Text => r.text,
            ArtifactPart::Csv => match r.csv {
                Some(csv) => csv,
                None => {
                    errln!("job {}: its report attaches no CSV", args.key);
                    return Ok(ExitCode::from(EXIT_ERROR));
                }
            },
        };
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let hide = if args.reveal {
        Redactions::default()
    } else {
        history.redactions()
    };
    let json = crate::views::api::JobHistoryV1::from(&history);
    print_redacted(&json, history.render_text(), &hide, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads a stored artifact back from the artifact store and records what `show` found there.
async fn look_in_store(config: &Config, history: &mut JobHistory) -> Option<Rendered> {
    let (Some(artifact), None) = (&history.job.artifact, history.job.artifact_deleted_at) else {
        return None;
    };
    let settings = &config.settings.artifacts;
    let checked = match ArtifactStore::from_settings(settings, &config.root) {
        Ok(store) => store.check(artifact).await,
        Err(e) => Err(e),
    };
    let (status, detail, rendered) = match checked {
        Ok(StoredArtifact::Intact(r)) => {
            let detail = format!("sha256 verified, {} + {} bytes", r.html.len(), r.text.len());
            ("intact", detail, Some(r))
        }
        Ok(StoredArtifact::Missing) => ("missing", "a part is not in the store".into(), None),
        Ok(StoredArtifact::Altered { sha256 }) => (
            "altered",
            format!("the stored bytes hash to {sha256}"),
            None,
        ),
        Err(e) => ("unreadable", e.to_string(), None),
    };
    history.store = Some(StoreCheck {
        url: settings.url.clone(),
        status,
        detail,
    });
    rendered
}

pub(super) async fn dlq(ledger: &mut LedgerSlot<'_>, args: &DlqArgs) -> anyhow::Result<ExitCode> {
    let dlq = crate::views::history::Dlq::load(&ledger.get().await?).await?;
    let hide = if args.reveal {
        Redactions::default()
    } else {
        dlq.redactions()
    };
    let json = crate::views::api::DlqV1::from(&dlq);
    print_redacted(&json, dlq.render_text(), &hide, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints `value` as JSON or its `text`, with what `hide` names redacted.
fn print_redacted<T: serde::Serialize>(
    value: &T,
    text: String,
    hide: &Redactions,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let v = crate::views::api::redacted_json(value, hide)?;
        out!("{}", serde_json::to_string(&v)?);
    } else {
        out_raw!("{}", hide.text(&text));
    }
    Ok(())
}

pub(super) async fn sweep(
    config: &Config,
    ledger: &mut LedgerSlot<'_>,
    args: &SweepArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let as_of = args.as_of.as_deref().map(parse_instant).transpose()?;
    let at = as_of.unwrap_or_else(|| clock.now());
    let artifacts = ArtifactStore::from_settings(&config.settings.artifacts, &config.root)?;
    let sweeper = Sweeper::from_config(
        config,
        ledger.get().await?,
        Arc::new(crate::domain::clock::ManualClock::new(at)),
        artifacts,
    )?;
    if args.dry_run {
        let plan = sweeper.plan(at).await?;
        if args.json {
            out!("{}", serde_json::to_string(&plan)?);
        } else {
            print_plan(&plan);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let counts = sweeper.run_once().await?;
    if args.json {
        out!("{}", serde_json::to_string(&counts)?);
    } else {
        out!(
            "swept as of {}: {} artifact(s) ({} bytes), diagnostics of {} job(s) ({} rows, {} bytes), {} job(s) with {} ledger rows",
            rfc3339(at),
            counts.artifacts_deleted,
            counts.artifact_bytes,
            counts.diagnostics_cleared,
            counts.diagnostics_rows,
            counts.diagnostics_bytes,
            counts.jobs_deleted,
            counts.ledger_rows
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn redrive(
    ledger: &mut LedgerSlot<'_>,
    args: &RedriveArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let (by, reason) = (&args.by, &args.reason);
    let Some(key) = &args.key else {
        bail!("a job key or --report is required");
    };
    let audit = Audit::new(by, reason, Via::Cli).map_err(|_| {
        anyhow::anyhow!("--by and --reason must not be empty: the redrive is audited")
    })?;
    let l = ledger.get().await?;
    let now = clock.now();
    let result = match &args.delivery {
        Some(d) => {
            match l.deliveries().get(d).await? {
                Some(dl) if dl.key.job() != key => {
                    bail!(
                        "delivery {} belongs to job {}, not {key}",
                        d.redacted(),
                        dl.key.job()
                    )
                }
                _ => {}
            }
            l.deliveries().redrive(d, &audit, now).await
        }
        None => l.jobs().redrive(key, &audit, now).await,
    };
    match result {
        Ok(out) => {
            out!(
                "redriven {} ({} deliver{} back to pending) by {by}: {reason}",
                args.delivery
                    .as_ref()
                    .map_or_else(|| out.job_key.to_string(), |d| d.redacted()),
                out.deliveries,
                if out.deliveries == 1 { "y" } else { "ies" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(LedgerError::WrongState {
            what, key, actual, ..
        }) => {
            errln!("refused: {what} {key} is {actual}; only quarantined work can be redriven");
            Ok(ExitCode::from(EXIT_ERROR))
        }
        Err(LedgerError::NotFound { what, key }) => {
            errln!("refused: no {what} {key}");
            Ok(ExitCode::from(EXIT_ERROR))
        }
        Err(e) => Err(e.into()),
    }
}

/// `reissue KEY --by --reason`: the next revision of a finished job.
pub(super) async fn reissue(
    ledger: &mut LedgerSlot<'_>,
    args: &super::ReissueArgs,
    clock: SharedClock,
) -> anyhow::Result<ExitCode> {
    let (by, reason) = (&args.by, &args.reason);
    let audit = Audit::new(by, reason, Via::Cli).map_err(|_| {
        anyhow::anyhow!("--by and --reason must not be empty: the reissue is audited")
    })?;
    let l = ledger.get().await?;
    let next = l.jobs().reissue(&args.key, &audit, clock.now()).await?;
    out!(
        "reissued {} as {next} by {by}: {reason}; it renders from fresh data and goes to every destination again, as a correction",
        args.key
    );
    Ok(ExitCode::SUCCESS)
}
