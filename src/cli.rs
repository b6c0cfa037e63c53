//! The command line (DESIGN §8). `main.rs` only calls [`main`]; everything here is testable.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use chrono::{DateTime, NaiveDate, Utc};
use clap::{Parser, Subcommand};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use std::io::IsTerminal;

use crate::clock::{SharedClock, SystemClock};
use crate::config::Config;
use crate::ledger::{JobFilter, JobOrigin, JobState, Ledger, NewJob};
use crate::runner::{RunOnceOptions, RunOnceSummary, run_once};
use crate::schedule::{Fire, FireLine, plan, rfc3339};
use crate::sweeper::{SweepPlan, Sweeper};

/// `println!` that never panics: a closed stdout (`dawnpost jobs | head -1`) ends the output,
/// not the process.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that never panics.
macro_rules! out_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// A line on stderr, through the log queue (in order with the logs); never panics or blocks.
macro_rules! errln {
    ($($t:tt)*) => {
        crate::logging::eprint_line(&format!($($t)*))
    };
}

/// Exit code for invalid configuration or input.
pub const EXIT_ERROR: u8 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "dawnpost",
    version,
    about = "Nightly scheduled reports: rendered once, delivered to every destination, every attempt explained."
)]
pub struct Cli {
    /// The configuration directory (dawnpost.toml, reports.toml, retention.toml).
    #[arg(long, global = true, default_value = "config", env = "DAWNPOST_CONFIG")]
    pub config: PathBuf,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate all configuration, templates and the retention policy; print each report's next fires.
    Check,
    /// Create or upgrade the ledger's tables.
    Migrate,
    /// Print the fires (and job keys) in [--from, --to) without touching the ledger.
    Plan {
        /// RFC 3339 instant or YYYY-MM-DD (midnight UTC).
        #[arg(long)]
        from: String,
        /// RFC 3339 instant or YYYY-MM-DD (midnight UTC); exclusive.
        #[arg(long)]
        to: String,
        #[arg(long)]
        json: bool,
    },
    /// Insert the jobs of every fire in [--from, --to); existing keys are left alone.
    Backfill {
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        #[arg(long)]
        json: bool,
    },
    /// Insert one job for REPORT and a local date, ready at once.
    Enqueue {
        report: String,
        /// The report's local date, YYYY-MM-DD.
        #[arg(long)]
        date: String,
        #[arg(long)]
        json: bool,
    },
    /// List jobs, newest date first.
    Jobs {
        /// ready, rendering, delivering, done, quarantined or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        report: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// The daemon (scheduler, pool, rescuer) until SIGTERM/SIGINT; or, with --once, one date's
    /// reports: enqueue, work until finished, summarise, exit 0 (delivered), 3 (quarantined) or
    /// 4 (still pending).
    Run {
        /// Enqueue every report for one date and work until its jobs are finished.
        #[arg(long)]
        once: bool,
        /// With --once: the local date (default: today in each report's timezone).
        #[arg(long, requires = "once")]
        date: Option<String>,
        /// With --once: how long to wait for scheduled retries.
        #[arg(long, default_value = "10m", requires = "once")]
        max_wait: String,
        #[arg(long)]
        json: bool,
    },
    /// The whole history of a job: states, artifact, every delivery and attempt, every redrive.
    Show {
        key: String,
        #[arg(long)]
        json: bool,
    },
    /// Quarantined work: jobs and deliveries waiting for an operator.
    Dlq {
        #[arg(long)]
        json: bool,
    },
    /// Delete finished work past its retention (config/retention.toml).
    Sweep {
        /// List what would be deleted, per class, with counts and bytes; delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Evaluate the policy as if now were T (RFC 3339 or YYYY-MM-DD).
        #[arg(long)]
        as_of: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Return quarantined work to the queue, with the same keys and an audit row.
    Redrive {
        /// The job key.
        key: String,
        /// Only this delivery of the job.
        #[arg(long)]
        delivery: Option<String>,
        /// Who is redriving.
        #[arg(long)]
        by: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
}

/// Parses arguments, runs the command, and maps the outcome to an exit code.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli);
    match run(cli, Arc::new(SystemClock)).await {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn init_tracing(cli: &Cli) {
    let default = match &cli.command {
        Command::Run { once: false, .. } => "info",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::logging::NonBlocking)
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal());
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Runs one parsed command against `clock`.
pub async fn run(cli: Cli, clock: SharedClock) -> anyhow::Result<ExitCode> {
    let config = match Config::load(&cli.config) {
        Ok(c) => c,
        Err(errors) => {
            errln!("{errors}");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    for w in &config.warnings {
        if matches!(cli.command, Command::Check) {
            out!("warning: {w}");
        } else {
            tracing::warn!("{w}");
        }
    }
    match cli.command {
        Command::Check => check(&config, clock.now()),
        Command::Plan { from, to, json } => {
            let (from, to) = (parse_instant(&from)?, parse_instant(&to)?);
            if to <= from {
                bail!("--to must be after --from");
            }
            for fire in plan_range(&config, from, to) {
                print_fire(&fire, json, None)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Migrate => {
            let ledger = open_ledger(&config).await?;
            out!("ledger migrated ({})", ledger.backend_name());
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill { from, to, json } => {
            let (from, to) = (parse_instant(&from)?, parse_instant(&to)?);
            if to <= from {
                bail!("--to must be after --from");
            }
            let ledger = open_ledger(&config).await?;
            let fires = plan_range(&config, from, to);
            let jobs: Vec<NewJob> = fires
                .iter()
                .map(|f| NewJob {
                    key: f.key.clone(),
                    fire_at: f.fire_at,
                    window: f.window,
                    ready_at: f.fire_at,
                    origin: JobOrigin::Backfill,
                })
                .collect();
            let inserted = ledger.job_insert_many(&jobs, clock.now()).await?;
            for fire in &fires {
                print_fire(fire, json, Some(inserted.contains(&fire.key.to_string())))?;
            }
            if !json {
                out!("{} of {} jobs inserted", inserted.len(), fires.len());
            }
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Enqueue { report, date, json } => {
            let Some(r) = config.report(&report) else {
                bail!(
                    "no report {report:?} in {} (known: {})",
                    config.dir.display(),
                    report_ids(&config)
                );
            };
            let date = NaiveDate::parse_from_str(&date, "%Y-%m-%d")
                .with_context(|| format!("--date {date:?} is not a date (YYYY-MM-DD)"))?;
            let fire = Fire::for_date(r, date)
                .context("that date has no window in the report's timezone")?;
            let ledger = open_ledger(&config).await?;
            let now = clock.now();
            let job = NewJob {
                key: fire.key.clone(),
                fire_at: fire.fire_at,
                window: fire.window,
                ready_at: now,
                origin: JobOrigin::Enqueue,
            };
            let inserted = !ledger.job_insert_many(&[job], now).await?.is_empty();
            let state = ledger
                .job_get(&fire.key.to_string())
                .await?
                .map(|j| j.state);
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
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Jobs {
            state,
            report,
            limit,
            json,
        } => {
            let state = state
                .map(|s| {
                    JobState::parse(&s).map_err(|_| {
                        anyhow::anyhow!("--state {s:?} is not a job state (ready, rendering, delivering, done, quarantined, cancelled)")
                    })
                })
                .transpose()?;
            let ledger = open_ledger(&config).await?;
            let jobs = ledger
                .job_list(&JobFilter {
                    state,
                    report,
                    limit: Some(limit),
                })
                .await?;
            if json {
                for job in &jobs {
                    out!("{}", serde_json::to_string(job)?);
                }
            } else {
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
            }
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            once: true,
            date,
            max_wait,
            json,
        } => {
            let date = date
                .map(|d| {
                    NaiveDate::parse_from_str(&d, "%Y-%m-%d")
                        .with_context(|| format!("--date {d:?} is not a date (YYYY-MM-DD)"))
                })
                .transpose()?;
            let max_wait: crate::Span = max_wait.parse().context("--max-wait")?;
            let ledger = open_ledger(&config).await?;
            let cancel = CancellationToken::new();
            let on_signal = cancel.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                on_signal.cancel();
            });
            let opts = RunOnceOptions {
                date,
                max_wait: max_wait.as_std(),
                progress: !json && std::io::stderr().is_terminal(),
                metrics: None,
            };
            let summary = run_once(&config, ledger.clone(), clock, &opts, cancel).await?;
            if json {
                out!("{}", serde_json::to_string(&summary)?);
            } else {
                print_summary(&summary);
            }
            ledger.close().await;
            Ok(ExitCode::from(summary.exit_code))
        }
        Command::Run {
            once: false,
            json: _,
            ..
        } => {
            let ledger = open_ledger(&config).await?;
            let cancel = CancellationToken::new();
            let on_signal = cancel.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                // Cancel first: nothing, not even a log line, may stand between a signal and
                // the drain.
                on_signal.cancel();
                tracing::info!("shutdown requested: draining");
            });
            crate::daemon::run(&config, ledger.clone(), clock, cancel).await?;
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { key, json } => {
            let ledger = open_ledger(&config).await?;
            let Some(history) = crate::history::JobHistory::load(&ledger, &key).await? else {
                errln!("no job {key:?}");
                return Ok(ExitCode::from(EXIT_ERROR));
            };
            if json {
                out!("{}", serde_json::to_string(&history)?);
            } else {
                out_raw!("{}", history.render_text());
            }
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dlq { json } => {
            let ledger = open_ledger(&config).await?;
            let dlq = crate::history::Dlq::load(&ledger).await?;
            if json {
                out!("{}", serde_json::to_string(&dlq)?);
            } else {
                out_raw!("{}", dlq.render_text());
            }
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep {
            dry_run,
            as_of,
            json,
        } => {
            let as_of = as_of.map(|t| parse_instant(&t)).transpose()?;
            let ledger = open_ledger(&config).await?;
            let at = as_of.unwrap_or_else(|| clock.now());
            let sweeper = Sweeper::from_config(
                &config,
                ledger.clone(),
                Arc::new(crate::ManualClock::new(at)),
            )?;
            if dry_run {
                let plan = sweeper.plan(at).await?;
                if json {
                    out!("{}", serde_json::to_string(&plan)?);
                } else {
                    print_plan(&plan);
                }
            } else {
                let counts = sweeper.run_once().await?;
                if json {
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
            }
            ledger.close().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Redrive {
            key,
            delivery,
            by,
            reason,
        } => {
            if by.trim().is_empty() || reason.trim().is_empty() {
                bail!("--by and --reason must not be empty: the redrive is audited");
            }
            let ledger = open_ledger(&config).await?;
            let now = clock.now();
            let result = match &delivery {
                Some(d) => {
                    match ledger.delivery_get(d).await? {
                        Some(dl) if dl.job_key != key => {
                            bail!("delivery {d:?} belongs to job {}, not {key}", dl.job_key)
                        }
                        _ => {}
                    }
                    ledger.delivery_redrive(d, &by, &reason, now).await
                }
                None => ledger.job_redrive(&key, &by, &reason, now).await,
            };
            ledger.close().await;
            match result {
                Ok(out) => {
                    out!(
                        "redriven {} ({} deliver{} back to pending) by {by}: {reason}",
                        delivery.as_deref().unwrap_or(&out.job_key),
                        out.deliveries,
                        if out.deliveries == 1 { "y" } else { "ies" }
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(crate::ledger::LedgerError::WrongState {
                    what, key, actual, ..
                }) => {
                    errln!(
                        "refused: {what} {key} is {actual}; only quarantined work can be redriven"
                    );
                    Ok(ExitCode::from(EXIT_ERROR))
                }
                Err(crate::ledger::LedgerError::NotFound { what, key }) => {
                    errln!("refused: no {what} {key}");
                    Ok(ExitCode::from(EXIT_ERROR))
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

fn print_plan(plan: &SweepPlan) {
    let c = &plan.counts;
    out!("dry run as of {} — nothing deleted", plan.as_of);
    out!(
        "  artifact:    {} job(s), {} bytes",
        plan.artifact.len(),
        c.artifact_bytes
    );
    out!(
        "  diagnostics: {} job(s), {} attempt rows, {} bytes",
        plan.diagnostics.len(),
        c.diagnostics_rows,
        c.diagnostics_bytes
    );
    out!(
        "  ledger:      {} job(s), {} rows",
        plan.ledger.len(),
        c.ledger_rows
    );
    for (class, items) in [
        ("artifact", &plan.artifact),
        ("diagnostics", &plan.diagnostics),
        ("ledger", &plan.ledger),
    ] {
        for i in items {
            let size = match class {
                "artifact" => format!("{} bytes in {} objects", i.bytes, i.rows),
                "diagnostics" => format!("{} bytes in {} attempt rows", i.bytes, i.rows),
                _ => format!("{} rows", i.rows),
            };
            out!(
                "  {class:<12} {:<40} finished {}  {size}",
                i.job,
                i.terminal_at
            );
        }
    }
}

fn print_summary(s: &RunOnceSummary) {
    for job in &s.jobs {
        out!(
            "{:<40} {:<12}{}{}",
            job.key,
            job.state.as_str(),
            if job.enqueued {
                ""
            } else {
                " (already in the ledger)"
            },
            job.last_error
                .as_deref()
                .map(|e| format!("  {e}"))
                .unwrap_or_default()
        );
        for d in &job.deliveries {
            out!(
                "  {:<60} {:<12} attempts {}{}",
                d.key,
                d.state.as_str(),
                d.attempts,
                d.last_error
                    .as_deref()
                    .map(|e| format!("  {e}"))
                    .unwrap_or_default()
            );
        }
    }
    let st = &s.stats;
    out!(
        "{}: {} job(s); rendered {}, sent {}, retried {}, quarantined {}",
        s.outcome,
        s.jobs.len(),
        st.rendered,
        st.sent,
        st.retrying,
        st.quarantined
    );
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Opens the ledger named by `DAWNPOST_DATABASE_URL` or `database.url`.
pub async fn open_ledger(config: &Config) -> anyhow::Result<Ledger> {
    let url = std::env::var("DAWNPOST_DATABASE_URL")
        .unwrap_or_else(|_| config.settings.database.url.clone());
    Ok(Ledger::connect(&url, &config.root).await?)
}

fn report_ids(config: &Config) -> String {
    config
        .reports
        .iter()
        .map(|r| r.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fires in `[from, to)`.
fn plan_range(config: &Config, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Fire> {
    let ms = chrono::Duration::milliseconds(1);
    plan(&config.reports, from - ms, to - ms)
}

fn print_fire(fire: &Fire, json: bool, inserted: Option<bool>) -> anyhow::Result<()> {
    if json {
        let line = FireLine {
            inserted,
            ..FireLine::from(fire)
        };
        out!("{}", serde_json::to_string(&line)?);
    } else {
        out!(
            "{:<40} fire {}  window {} .. {} ({}h){}",
            fire.key.to_string(),
            rfc3339(fire.fire_at),
            rfc3339(fire.window.start),
            rfc3339(fire.window.end),
            fire.window.hours(),
            match inserted {
                Some(true) => "  inserted",
                Some(false) => "  exists",
                None => "",
            }
        );
    }
    Ok(())
}

/// `2026-10-25T05:30:00Z`, `2026-10-25T07:30:00+02:00`, or `2026-10-25` (midnight UTC).
pub fn parse_instant(s: &str) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc());
    }
    bail!(
        "{s:?} is not an instant: use RFC 3339 (2026-10-25T05:30:00Z) or a date (2026-10-25, midnight UTC)"
    )
}

fn check(config: &Config, now: DateTime<Utc>) -> anyhow::Result<ExitCode> {
    let r = &config.retention.defaults;
    out!(
        "{}: configuration valid — {} report(s); ledger {}; retention artifact {}, diagnostics {}, ledger {} ({} override(s))",
        config.dir.display(),
        config.reports.len(),
        crate::redact::redact_url(&config.settings.database.url),
        r.artifact,
        r.diagnostics,
        r.ledger,
        config.retention.overrides.len()
    );
    for report in &config.reports {
        let tz = report.timezone();
        out!(
            "\n{}  \"{}\"  schedule \"{}\" in {}  template {}  destinations: {} email, {} webhook",
            report.id,
            report.title,
            report.schedule.expr(),
            tz.name(),
            report.template,
            report.email.len(),
            report.webhooks.len()
        );
        for fire in report.schedule.next_fires(now, 3) {
            let local = fire.with_timezone(&tz);
            out!(
                "  next {}:{}  {}  = {}",
                report.id,
                local.format("%Y-%m-%d"),
                local.format("%a %Y-%m-%d %H:%M:%S %Z (UTC%:z)"),
                rfc3339(fire)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
