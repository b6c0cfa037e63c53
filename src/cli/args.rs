//! The arguments of each command (`dawnpost COMMAND --help` prints them).

use std::path::PathBuf;

use clap::Args;

use crate::domain::keys::{DeliveryKey, JobKey};

#[derive(Debug, Args)]
pub struct ReissueArgs {
    /// The finished job (any of its revisions).
    pub key: JobKey,
    /// Who is reissuing.
    #[arg(long)]
    pub by: String,
    /// Why (what was wrong with what went out).
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// List the pending migrations (and what a contract one waits for) and apply nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the expand migrations only (contract ones wait): the step before
    /// the nodes are upgraded.
    #[arg(long, conflicts_with = "dry_run")]
    pub expand_only: bool,
    /// How long to wait for what keeps a contract migration from running (live nodes that do
    /// not know it, leases of the old meaning), with progress; then refuse, naming them.
    #[arg(long, default_value = "0s")]
    pub wait: String,
}

#[derive(Debug, Args)]
pub struct PreviewArgs {
    pub report: String,
    /// The report's local date, YYYY-MM-DD (default: today in its timezone).
    #[arg(long)]
    pub date: Option<String>,
    /// Where to write the files (default: `var/preview` in the project root).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// A time range, for `plan` and `backfill`.
#[derive(Debug, Args)]
pub struct RangeArgs {
    /// RFC 3339 instant or YYYY-MM-DD (midnight UTC).
    #[arg(long)]
    pub from: String,
    /// RFC 3339 instant or YYYY-MM-DD (midnight UTC); exclusive.
    #[arg(long)]
    pub to: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    pub report: String,
    /// The report's local date, YYYY-MM-DD (default: today in the report's timezone).
    #[arg(long)]
    pub date: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// ready, rendering, delivering, done, quarantined or cancelled.
    #[arg(long)]
    pub state: Option<String>,
    #[arg(long)]
    pub report: Option<String>,
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Enqueue every report for one date and work until its jobs are finished.
    #[arg(long)]
    pub once: bool,
    /// With --once: the local date (default: today in each report's timezone).
    #[arg(long, requires = "once")]
    pub date: Option<String>,
    /// With --once: how long to wait for scheduled retries.
    #[arg(long, default_value = "10m", requires = "once")]
    pub max_wait: String,
    #[arg(long)]
    pub json: bool,
    /// With --once: print recipient addresses and webhook URLs in full.
    #[arg(long, requires = "once")]
    pub reveal: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub key: JobKey,
    #[arg(long)]
    pub json: bool,
    /// Print this part of the job's artifact, read from the artifact store and checked
    /// against its sha256, instead of the history.
    #[arg(long, value_enum, conflicts_with = "json")]
    pub artifact: Option<ArtifactPart>,
    /// Print recipient addresses and webhook URLs in full.
    #[arg(long)]
    pub reveal: bool,
}

/// A part of an artifact.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ArtifactPart {
    Html,
    Text,
    /// The CSV attachment, when the report has one.
    Csv,
}

/// `nodes`' arguments.
#[derive(Debug, Args)]
pub struct NodesArgs {
    /// One JSON object per node (the contract of `crate::views::api::NodeV1`).
    #[arg(long)]
    pub json: bool,
}

/// `dlq`'s arguments.
#[derive(Debug, Args)]
pub struct DlqArgs {
    #[arg(long)]
    pub json: bool,
    /// Print recipient addresses and webhook URLs in full.
    #[arg(long)]
    pub reveal: bool,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// List what would be deleted, per class, with counts and bytes; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Evaluate the policy as if now were T (RFC 3339 or YYYY-MM-DD).
    #[arg(long)]
    pub as_of: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// `redrive KEY [--delivery D]` redrives one job or delivery; `redrive --report R --class C`
/// redrives a group of dead letters as a runbook: a dry run, a canary, then batches, stopping
/// by itself when the work comes back quarantined with the same class.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["key", "report"])))]
pub struct RedriveArgs {
    /// The job key.
    pub key: Option<JobKey>,
    /// Only this delivery of the job.
    #[arg(long, requires = "key")]
    pub delivery: Option<DeliveryKey>,
    /// Who is redriving.
    #[arg(long)]
    pub by: String,
    /// Why.
    #[arg(long)]
    pub reason: String,
    /// Bulk: the report whose quarantined deliveries to redrive.
    #[arg(long, conflicts_with = "key", requires = "class")]
    pub report: Option<String>,
    /// Bulk: their last error class (permanent, transient, ambiguous, rate_limited, unknown).
    #[arg(long, requires = "report")]
    pub class: Option<String>,
    /// Bulk: only deliveries to this host (an address's domain, a webhook's host:port, a chat
    /// destination's variable).
    #[arg(long, requires = "report")]
    pub host: Option<String>,
    /// Bulk: only deliveries quarantined at or after this instant (RFC 3339 or YYYY-MM-DD).
    #[arg(long, requires = "report")]
    pub since: Option<String>,
    /// Bulk: deliveries the canary redrives first.
    #[arg(long, default_value_t = 1, requires = "report")]
    pub canary: u32,
    /// Bulk: deliveries per batch after the canary.
    #[arg(long, default_value_t = 50, requires = "report")]
    pub batch: u32,
    /// Bulk: show what would be redriven, and stop.
    #[arg(long, requires = "report")]
    pub dry_run: bool,
    /// Bulk: how long to follow the runbook (the daemon sends its deliveries and carries it on
    /// after this command stops following).
    #[arg(long, default_value = "30m", requires = "report")]
    pub wait: String,
}

#[derive(Debug, Args)]
pub struct BounceArgs {
    /// Print what was recorded as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print recipient addresses in full.
    #[arg(long)]
    pub reveal: bool,
}

#[derive(Debug, Args)]
pub struct SuppressionsArgs {
    /// The lifted suppressions too, with who lifted each and why.
    #[arg(long)]
    pub all: bool,
    #[arg(long, default_value_t = 1000)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
    /// Print recipient addresses in full.
    #[arg(long)]
    pub reveal: bool,
}

#[derive(Debug, Args)]
pub struct SuppressArgs {
    /// The recipient's address.
    pub address: String,
    /// For this report only (default: every report).
    #[arg(long)]
    pub report: Option<String>,
    /// Who is doing it.
    #[arg(long)]
    pub by: String,
    /// Why.
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct SendTestArgs {
    /// The report.
    pub report: String,
    /// The one address the test goes to.
    #[arg(long)]
    pub to: String,
    /// The report's local date, YYYY-MM-DD (default: today in the report's timezone).
    #[arg(long)]
    pub date: Option<String>,
    /// Who is sending it.
    #[arg(long)]
    pub by: String,
}
