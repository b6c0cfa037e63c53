//! The command line (README.md, "Command line"). `main.rs` only calls [`main`]; everything
//! here is testable.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};

use std::io::IsTerminal;

use crate::config::Config;
use crate::domain::clock::{LedgerClock, SharedClock, SystemClock};
use crate::ledger::{Ledger, Opening};
use crate::report::schedule::{Fire, plan_all};

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
        crate::runtime::logging::eprint_line(&format!($($t)*))
    };
}

mod args;
mod commands;
mod deploy;
mod print;
mod recipients;
mod runbook;

pub use args::*;

/// Exit code for invalid configuration or input.
pub(crate) const EXIT_ERROR: u8 = 1;

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
    /// Apply the ledger's pending migrations (on PostgreSQL a deploy step: no other command
    /// migrates unless `database.migrate = "auto"`); `--dry-run` lists them, each expand or
    /// contract; a contract migration waits (`--wait`) or refuses while live nodes or leases
    /// still need the old shape.
    Migrate(MigrateArgs),
    /// Print the fires (and job keys) in [--from, --to) without touching the ledger.
    Plan(RangeArgs),
    /// Insert the jobs of every fire in [--from, --to); existing keys are left alone.
    Backfill(RangeArgs),
    /// Insert one job for REPORT and a local date, ready at once.
    Enqueue(EnqueueArgs),
    /// List jobs, newest date first.
    Jobs(JobsArgs),
    /// The daemon (scheduler, pool, rescuer) until SIGTERM/SIGINT; or, with --once, one date's
    /// reports: enqueue, work until finished, summarise, exit 0 (delivered), 3 (quarantined) or
    /// 4 (still pending).
    Run(RunArgs),
    /// The whole history of a job: states, artifact, every delivery and attempt, every redrive.
    Show(ShowArgs),
    /// Quarantined work: jobs and deliveries waiting for an operator.
    Dlq(DlqArgs),
    /// The live nodes on this ledger: id, version, the schema version and work formats each
    /// knows, when it started, its last heartbeat.
    Nodes(NodesArgs),
    /// Delete finished work past its retention (config/retention.toml).
    Sweep(SweepArgs),
    /// Return quarantined work to the queue, with the same keys and an audit row.
    Redrive(Box<RedriveArgs>),
    /// A new revision of a finished job, rendered from fresh source data and delivered to
    /// every destination again as a correction (emails threaded to the first revision's,
    /// webhooks naming the revision they supersede); the earlier revisions are kept. Audited.
    Reissue(ReissueArgs),
    /// Render what REPORT would send for a date (source fetched, CSS inlined, attachments) into
    /// files: HTML, text, CSV and the first recipient's .eml. Writes nothing to the ledger or
    /// the artifact store and sends nothing.
    Preview(PreviewArgs),
    /// Record the bounces or complaint of a delivery status notification (RFC 3464) or an
    /// abuse report (RFC 5965) read from stdin, as a mailbox's filter pipes it: each matched
    /// to its delivery, and its address suppressed as `[recipients]` says.
    Bounce(BounceArgs),
    /// The suppressed recipients: who, for which reports, since when and why.
    Suppressions(SuppressionsArgs),
    /// Suppress ADDRESS (for every report, or --report): no report is sent to it. Audited.
    Suppress(SuppressArgs),
    /// Lift the suppression of ADDRESS (for every report, or --report). Audited.
    Unsuppress(SuppressArgs),
    /// Render REPORT for a date as its job would and email it to one address (--to), its
    /// subject led by "[test]". Audited; no job, recipient list, suppression or send_when
    /// decision counts it, and an address suppressed for the report is refused.
    SendTest(SendTestArgs),
}

impl Command {
    /// Commands that need nothing of the configuration but the ledger.
    fn reads_ledger_only(&self) -> bool {
        matches!(
            self,
            Command::Jobs(_)
                | Command::Show(_)
                | Command::Dlq(_)
                | Command::Redrive(_)
                | Command::Reissue(_)
                | Command::Nodes(_)
                | Command::Bounce(_)
                | Command::Suppressions(_)
                | Command::Suppress(_)
                | Command::Unsuppress(_)
        )
    }
}

/// What `run` would refuse in opening a cloud artifact store (a bad setting in the `AWS_*`
/// variables, say), found without a request. Local stores are left alone: opening one creates
/// its folder.
fn artifact_store_problem(config: &Config) -> Option<crate::config::ConfigError> {
    let settings = &config.settings.artifacts;
    if settings.url.starts_with("file://") || settings.url.starts_with("memory://") {
        return None;
    }
    let e = crate::report::artifact::ArtifactStore::from_settings(settings, &config.root).err()?;
    Some(crate::config::ConfigError {
        file: config.dir.join("dawnpost.toml"),
        row: None,
        report: None,
        field: "artifacts.url".into(),
        message: e.to_string(),
    })
}

/// Hands memory freed after loading back to the OS. Parsing a large reports.toml goes through
/// a token list and a document tree several times the file's size (~55 MB for 10,000
/// reports), which glibc would otherwise keep for the daemon's whole life.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it has no preconditions
    // and touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// At most two malloc arenas, unless `MALLOC_ARENA_MAX` says otherwise: glibc makes one per
/// thread that contends for the heap (up to eight a core), and memory freed in one stays
/// there. The daemon's threads (tokio's workers, a thread per SQLite connection, blocking
/// I/O) held ~8 MB more through a 10,000-job drain with the default (`benches/scale.rs`:
/// peak RSS 94 → 86 MB). Called before any thread starts.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only changes the allocator's tuning; called before other threads
        // exist, it races with no allocation.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Parses arguments, runs the command, and maps the outcome to an exit code.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(&cli);
    // The wall clock, until the ledger opens: on a shared ledger, the ledger's time from then on.
    let clock = Arc::new(LedgerClock::new(Arc::new(SystemClock)));
    match run(cli, clock).await {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {}", crate::domain::words::error_chain(e.as_ref()));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn init_tracing(cli: &Cli) {
    let default = match &cli.command {
        Command::Run(RunArgs { once: false, .. }) => "info",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::runtime::logging::NonBlocking)
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal());
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Runs one parsed command against `clock`. Each command checks its arguments first, then
/// asks for the ledger; the ledger is opened at most once and closed here, whatever the
/// command returned.
pub async fn run(cli: Cli, clock: SharedClock) -> anyhow::Result<ExitCode> {
    let mut config =
        match Config::load(&cli.config, &crate::delivery::readers()) {
            Ok(c) => c,
            Err(errors) if cli.command.reads_ledger_only() => {
                // An operator answering "why did X not get its report?" must not be locked out
                // by a broken sample, template or retention policy.
                let Ok(mut c) = Config::load_ledger_settings(&cli.config) else {
                    errln!("{errors}");
                    return Ok(ExitCode::from(EXIT_ERROR));
                };
                c.warnings.extend(errors.0.iter().map(|e| {
                    format!("{e} (ignored: this command only reads or redrives the ledger)")
                }));
                c
            }
            Err(errors) => {
                errln!("{errors}");
                return Ok(ExitCode::from(EXIT_ERROR));
            }
        };
    release_freed_memory();
    // What `check` says of its renders after the configuration (each chart drawn).
    let mut notes = Vec::new();
    if matches!(cli.command, Command::Check) {
        // Only `check` renders every template against its sample: the others load what they use.
        let (mut errors, warnings, drawn) = crate::report::render::check_templates(
            &config,
            &crate::delivery::checked,
            &crate::delivery::default_parts,
        );
        errors.extend(artifact_store_problem(&config));
        if !errors.is_empty() {
            errln!("{}", crate::config::ConfigErrors(errors));
            return Ok(ExitCode::from(EXIT_ERROR));
        }
        config.warnings.extend(warnings);
        notes = drawn;
    }
    for w in &config.warnings {
        if matches!(cli.command, Command::Check) {
            out!("warning: {w}");
        } else {
            tracing::warn!("{w}");
        }
    }
    let mut ledger = LedgerSlot::new(&config, clock.clone());
    let c = &config;
    // What these write may be due at once: the nodes listening on the ledger look now.
    let makes_work = matches!(
        cli.command,
        Command::Backfill(_) | Command::Enqueue(_) | Command::Redrive(_) | Command::Reissue(_)
    );
    let result = match cli.command {
        Command::Check => print::check(c, clock.now()).inspect(|_| {
            for note in &notes {
                out!("{note}");
            }
        }),
        Command::Plan(args) => commands::plan(c, &args),
        Command::Migrate(args) => deploy::migrate(c, &args, clock).await,
        Command::Backfill(args) => commands::backfill(c, &mut ledger, &args, clock).await,
        Command::Enqueue(args) => commands::enqueue(c, &mut ledger, &args, clock).await,
        Command::Jobs(args) => commands::jobs(&mut ledger, args).await,
        Command::Run(args) if args.once => commands::run_once(c, &mut ledger, &args, clock).await,
        Command::Run(_) => commands::daemon(c, &mut ledger, clock).await,
        Command::Show(args) => commands::show(c, &mut ledger, &args).await,
        Command::Dlq(args) => commands::dlq(&mut ledger, &args).await,
        Command::Nodes(args) => deploy::nodes(c, &mut ledger, &args, clock).await,
        Command::Preview(args) => commands::preview(c, &args, clock).await,
        Command::Sweep(args) => commands::sweep(c, &mut ledger, &args, clock).await,
        Command::Redrive(args) if args.report.is_some() => {
            runbook::redrive(&mut ledger, &args, clock).await
        }
        Command::Redrive(args) => commands::redrive(&mut ledger, &args, clock).await,
        Command::Reissue(args) => commands::reissue(&mut ledger, &args, clock).await,
        Command::Bounce(args) => recipients::bounce(c, &mut ledger, &args, clock).await,
        Command::Suppressions(args) => recipients::suppressions(&mut ledger, &args).await,
        Command::Suppress(args) => recipients::suppress(&mut ledger, &args, clock).await,
        Command::Unsuppress(args) => recipients::unsuppress(&mut ledger, &args, clock).await,
        Command::SendTest(args) => recipients::send_test(c, &mut ledger, &args, clock).await,
    };
    if makes_work {
        ledger.signal_work().await;
    }
    ledger.close().await;
    result
}

/// The ledger of one command: opened on first use (after the command checked its arguments,
/// so bad input never creates a ledger), closed once by [`run`]. Once it opens, the command's
/// clock follows the ledger's (see [`crate::services::timekeeper`]).
pub(crate) struct LedgerSlot<'a> {
    config: &'a Config,
    clock: SharedClock,
    opened: Option<Ledger>,
}

impl<'a> LedgerSlot<'a> {
    fn new(config: &'a Config, clock: SharedClock) -> LedgerSlot<'a> {
        LedgerSlot {
            config,
            clock,
            opened: None,
        }
    }

    /// The ledger, opened (and migrated) now if it is not yet.
    pub(crate) async fn get(&mut self) -> anyhow::Result<Ledger> {
        if let Some(l) = &self.opened {
            return Ok(l.clone());
        }
        let l = open_ledger(self.config).await?;
        crate::services::timekeeper::follow(&*self.clock, &l).await;
        // A transition of a newer format (a skip, in `run --once`) only while every live node
        // reads it.
        let live_since = crate::services::registry::live_since(self.config, self.clock.now());
        l.nodes().follow_formats(live_since).await?;
        let bound = self.config.settings.pool.max_clock_offset;
        if let Some(why) = crate::domain::clock::refusal(&*self.clock, bound) {
            tracing::warn!("{why}");
        }
        self.opened = Some(l.clone());
        Ok(l)
    }

    /// Tells the nodes listening on the ledger, if it was opened, that work may be due (a
    /// failure only delays them to their next look).
    async fn signal_work(&self) {
        if let Some(l) = &self.opened
            && let Err(e) = l.signal_work().await
        {
            tracing::debug!(error = %e, "could not signal new work to the nodes");
        }
    }

    async fn close(self) {
        if let Some(l) = self.opened {
            l.close().await;
        }
    }
}

pub(crate) async fn shutdown_signal() {
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
/// The ledger of `config` (or `DAWNPOST_DATABASE_URL`), its schema checked as
/// `database.migrate` says (see [`crate::ledger::Opening`]).
pub(crate) async fn open_ledger(config: &Config) -> anyhow::Result<Ledger> {
    let db = &config.settings.database;
    let opening = if db.migrate_on_open {
        Opening::Migrate
    } else {
        Opening::Check
    };
    open_ledger_as(config, opening).await
}

/// The ledger of `config`, opened as `opening` says.
pub(crate) async fn open_ledger_as(config: &Config, opening: Opening) -> anyhow::Result<Ledger> {
    let url = std::env::var("DAWNPOST_DATABASE_URL")
        .unwrap_or_else(|_| config.settings.database.url.clone());
    let db = &config.settings.database;
    Ok(Ledger::open(&url, &config.root, db.max_connections, opening).await?)
}

pub(crate) fn report_ids(config: &Config) -> String {
    config
        .reports
        .iter()
        .map(|r| r.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fires in `[from, to)` that make jobs.
pub(crate) fn plan_range(config: &Config, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Fire> {
    let mut fires = plan_range_all(config, from, to);
    fires.retain(Fire::fires);
    fires
}

/// Fires in `[from, to)`, those calendars skip included (what `plan` prints).
pub(crate) fn plan_range_all(config: &Config, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Fire> {
    let ms = chrono::Duration::milliseconds(1);
    plan_all(
        &config.reports,
        crate::domain::clock::sub(from, ms),
        crate::domain::clock::sub(to, ms),
    )
}

/// `2026-10-25T05:30:00Z`, `2026-10-25T07:30:00+02:00`, or `2026-10-25` (midnight UTC).
pub(crate) fn parse_instant(s: &str) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Some(d) = crate::domain::keys::parse_date(s)
        && let Some(t) = d.and_hms_opt(0, 0, 0)
    {
        return Ok(t.and_utc());
    }
    bail!(
        "{s:?} is not an instant: use RFC 3339 (2026-10-25T05:30:00Z) or a date (2026-10-25, midnight UTC)"
    )
}
