//! The ledger's rows and the values its transitions take.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::states::{DeliveryState, JobState};
use super::{DeliveryLease, JobLease, LedgerError};
use crate::domain::clock::from_millis;
use crate::domain::keys::{DeliveryKey, JobKey};
use crate::domain::outcome::ResponseClass;
use crate::domain::window::Window;
use crate::report::artifact::ArtifactRef;

/// Where a job came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobOrigin {
    Schedule,
    Backfill,
    Enqueue,
    Run,
    Ingest,
    /// A revision of a finished job, made by an operator's reissue.
    Reissue,
}

impl JobOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            JobOrigin::Schedule => "schedule",
            JobOrigin::Backfill => "backfill",
            JobOrigin::Enqueue => "enqueue",
            JobOrigin::Run => "run",
            JobOrigin::Ingest => "ingest",
            JobOrigin::Reissue => "reissue",
        }
    }

    pub fn parse(s: &str) -> Result<JobOrigin, LedgerError> {
        [
            JobOrigin::Schedule,
            JobOrigin::Backfill,
            JobOrigin::Enqueue,
            JobOrigin::Run,
            JobOrigin::Ingest,
            JobOrigin::Reissue,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| LedgerError::Corrupt(format!("unknown job origin {s:?}")))
    }
}

impl std::fmt::Display for JobOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A job to insert.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub key: JobKey,
    pub fire_at: DateTime<Utc>,
    pub window: Window,
    pub ready_at: DateTime<Utc>,
    pub origin: JobOrigin,
}

impl NewJob {
    /// The job a fire makes, ready at `ready_at`, made by `origin`.
    pub fn of(
        fire: &crate::report::schedule::Fire,
        ready_at: DateTime<Utc>,
        origin: JobOrigin,
    ) -> NewJob {
        NewJob {
            key: fire.key.clone(),
            fire_at: fire.fire_at,
            window: fire.window,
            ready_at,
            origin,
        }
    }
}

/// One job as the ledger holds it (what readers see of it is `crate::views::api::JobV1`).
#[derive(Debug, Clone)]
pub struct Job {
    pub key: JobKey,
    pub state: JobState,
    pub origin: JobOrigin,
    pub fire_at: DateTime<Utc>,
    pub window: Window,
    pub ready_at: DateTime<Utc>,
    pub attempts: i64,
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub artifact: Option<ArtifactRef>,
    pub artifact_deleted_at: Option<DateTime<Utc>>,
    /// When retention cleared the attempts' transport diagnostics.
    pub diagnostics_cleared_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub redrive_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub terminal_at: Option<DateTime<Utc>>,
    /// The instant of the first render lease: what every render of this job prints as its
    /// generation time, so repeated renders write the same bytes.
    pub generated_at: Option<DateTime<Utc>>,
    /// Leases that expired and were rescued; they count against the budget.
    pub lease_losses: i64,
    /// The deadline of its wait for the data (`wait_until`), once it waited.
    pub wait_until: Option<DateTime<Utc>>,
    /// When its deadline passed without the data (`on_late` then applied): a render after it
    /// says the data may be stale, and a redrive renders without waiting again.
    pub late_at: Option<DateTime<Utc>>,
    /// The revision a reissue of this one corrects (`None` for revision 1).
    pub supersedes: Option<JobKey>,
    /// Its number, the integer its deliveries name it by (`None` for a job made before the
    /// ledger numbered jobs, until one of its deliveries is created).
    pub number: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct JobRecord {
    key: String,
    state: String,
    origin: String,
    fire_at: i64,
    window_start: i64,
    window_end: i64,
    ready_at: i64,
    attempts: i64,
    lease_owner: Option<String>,
    lease_token: i64,
    lease_expires_at: Option<i64>,
    artifact_key: Option<String>,
    artifact_text_key: Option<String>,
    artifact_csv_key: Option<String>,
    /// The names of the artifact's named parts, comma-separated (none: no such part).
    #[sqlx(default)]
    artifact_parts: Option<String>,
    artifact_sha256: Option<String>,
    artifact_bytes: Option<i64>,
    artifact_deleted_at: Option<i64>,
    last_error: Option<String>,
    redrive_count: i64,
    created_at: i64,
    updated_at: i64,
    terminal_at: Option<i64>,
    diagnostics_cleared_at: Option<i64>,
    generated_at: Option<i64>,
    lease_losses: i64,
    wait_until: Option<i64>,
    late_at: Option<i64>,
    supersedes: Option<String>,
    #[sqlx(default)]
    number: Option<i64>,
}

/// How an artifact's named parts are stored: their names, comma-separated; none without any.
pub(super) fn parts_column(a: &ArtifactRef) -> Option<String> {
    (!a.parts.is_empty()).then(|| a.parts.join(","))
}

impl TryFrom<JobRecord> for Job {
    type Error = LedgerError;

    fn try_from(r: JobRecord) -> Result<Job, LedgerError> {
        let artifact = match (
            r.artifact_key,
            r.artifact_text_key,
            r.artifact_sha256,
            r.artifact_bytes,
        ) {
            (Some(html_key), Some(text_key), Some(sha256), Some(bytes)) => Some(ArtifactRef {
                html_key,
                text_key,
                csv_key: r.artifact_csv_key,
                sha256,
                bytes,
                parts: (r.artifact_parts.iter())
                    .flat_map(|p| p.split(','))
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect(),
            }),
            _ => None,
        };
        Ok(Job {
            state: JobState::parse(&r.state)?,
            key: parse_key(&r.key)?,
            origin: JobOrigin::parse(&r.origin)?,
            fire_at: from_millis(r.fire_at),
            window: Window {
                start: from_millis(r.window_start),
                end: from_millis(r.window_end),
            },
            ready_at: from_millis(r.ready_at),
            attempts: r.attempts,
            lease_owner: r.lease_owner,
            lease_token: r.lease_token,
            lease_expires_at: r.lease_expires_at.map(from_millis),
            artifact,
            artifact_deleted_at: r.artifact_deleted_at.map(from_millis),
            diagnostics_cleared_at: r.diagnostics_cleared_at.map(from_millis),
            last_error: r.last_error,
            redrive_count: r.redrive_count,
            created_at: from_millis(r.created_at),
            updated_at: from_millis(r.updated_at),
            terminal_at: r.terminal_at.map(from_millis),
            generated_at: r.generated_at.map(from_millis),
            lease_losses: r.lease_losses,
            wait_until: r.wait_until.map(from_millis),
            late_at: r.late_at.map(from_millis),
            supersedes: r.supersedes.as_deref().map(parse_key).transpose()?,
            number: r.number,
        })
    }
}

/// A delivery to create when a job is rendered.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub key: DeliveryKey,
}

/// A delivery's integer key: its job's number and its place among the job's deliveries (0,
/// 1, 2 … in the order they were created). The ledger's indexes and leases go by it; people and
/// the API by the text key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub job_number: i64,
    pub ordinal: i32,
}

/// One delivery as the ledger holds it (its kind and destination are its key's).
#[derive(Debug, Clone)]
pub struct Delivery {
    pub key: DeliveryKey,
    /// Where the ledger keeps it: its job's number and its place among the job's deliveries.
    pub place: Place,
    pub state: DeliveryState,
    pub ready_at: DateTime<Utc>,
    pub attempts: i64,
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub last_class: Option<ResponseClass>,
    pub last_error: Option<String>,
    pub redrive_count: i64,
    /// Attempts made before the last redrive; the retry budget counts the ones after.
    pub budget_attempts: i64,
    /// When the current retry budget started: creation, or the last redrive.
    pub budget_since: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub terminal_at: Option<DateTime<Utc>>,
    /// Leases that expired and were rescued; they count against the budget.
    pub lease_losses: i64,
}

impl Delivery {
    /// Attempts counted against the retry budget (those since the last redrive).
    pub fn budget_attempts_used(&self) -> i64 {
        self.attempts - self.budget_attempts
    }
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct DeliveryRecord {
    key: String,
    state: String,
    ready_at: i64,
    attempts: i64,
    lease_owner: Option<String>,
    lease_token: i64,
    lease_expires_at: Option<i64>,
    last_class: Option<String>,
    last_error: Option<String>,
    redrive_count: i64,
    created_at: i64,
    updated_at: i64,
    terminal_at: Option<i64>,
    budget_attempts: i64,
    budget_since: Option<i64>,
    lease_losses: i64,
    job_number: Option<i64>,
    ordinal: Option<i32>,
}

impl TryFrom<DeliveryRecord> for Delivery {
    type Error = LedgerError;

    fn try_from(r: DeliveryRecord) -> Result<Delivery, LedgerError> {
        let Some((job_number, ordinal)) = r.job_number.zip(r.ordinal) else {
            return Err(LedgerError::Corrupt(format!(
                "delivery {} has no number",
                r.key
            )));
        };
        Ok(Delivery {
            place: Place {
                job_number,
                ordinal,
            },
            state: DeliveryState::parse(&r.state)?,
            key: parse_key(&r.key)?,
            ready_at: from_millis(r.ready_at),
            attempts: r.attempts,
            lease_owner: r.lease_owner,
            lease_token: r.lease_token,
            lease_expires_at: r.lease_expires_at.map(from_millis),
            last_class: r.last_class.as_deref().map(ResponseClass::parse),
            last_error: r.last_error,
            redrive_count: r.redrive_count,
            budget_attempts: r.budget_attempts,
            budget_since: from_millis(r.budget_since.unwrap_or(r.created_at)),
            created_at: from_millis(r.created_at),
            updated_at: from_millis(r.updated_at),
            terminal_at: r.terminal_at.map(from_millis),
            lease_losses: r.lease_losses,
        })
    }
}

/// One attempt to record.
#[derive(Debug, Clone)]
pub struct NewAttempt {
    pub requested_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub class: ResponseClass,
    /// HTTP status or SMTP reply code.
    pub code: Option<i64>,
    pub retry_after: Option<Duration>,
    /// Redacted: never a full recipient address.
    pub reason: Option<String>,
    /// Bounded transport detail; retention clears it first.
    pub diagnostics: Option<String>,
}

/// What happens to a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryNext {
    Sent,
    Retry { ready_at: DateTime<Utc> },
    Quarantine,
}

/// One recorded attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub delivery_key: DeliveryKey,
    pub attempt: i64,
    pub requested_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub class: ResponseClass,
    pub code: Option<i64>,
    pub retry_after_ms: Option<i64>,
    pub next_ready_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub diagnostics: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct AttemptRecord {
    delivery_key: String,
    attempt: i64,
    requested_at: i64,
    finished_at: i64,
    class: String,
    code: Option<i64>,
    retry_after_ms: Option<i64>,
    next_ready_at: Option<i64>,
    reason: Option<String>,
    diagnostics: Option<String>,
}

impl TryFrom<AttemptRecord> for Attempt {
    type Error = LedgerError;

    fn try_from(r: AttemptRecord) -> Result<Attempt, LedgerError> {
        Ok(Attempt {
            class: ResponseClass::parse(&r.class),
            delivery_key: parse_key(&r.delivery_key)?,
            attempt: r.attempt,
            requested_at: from_millis(r.requested_at),
            finished_at: from_millis(r.finished_at),
            code: r.code,
            retry_after_ms: r.retry_after_ms,
            next_ready_at: r.next_ready_at.map(from_millis),
            reason: r.reason,
            diagnostics: r.diagnostics,
        })
    }
}

/// A key read back from a row: a key the ledger wrote always parses, so one that does not is
/// a corrupt row.
pub(super) fn parse_key<K>(text: &str) -> Result<K, LedgerError>
where
    K: std::str::FromStr<Err = crate::domain::keys::KeyError>,
{
    text.parse()
        .map_err(|e| LedgerError::Corrupt(format!("bad key {text:?}: {e}")))
}

/// One render to record under the lease it was made with (see
/// `ledger.jobs().rendered_many`).
#[derive(Debug, Clone)]
pub struct Render {
    pub lease: JobLease,
    pub artifact: ArtifactRef,
    pub deliveries: Vec<NewDelivery>,
}

/// One attempt to record under the lease it was made with (see
/// `ledger.deliveries().finish_many`).
#[derive(Debug, Clone)]
pub struct Finish {
    pub lease: DeliveryLease,
    pub attempt: NewAttempt,
    pub next: DeliveryNext,
}

/// What a rescue returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RescueCounts {
    pub jobs: u64,
    pub deliveries: u64,
    /// Delivering jobs with nothing left to send, settled.
    pub settled: u64,
    /// Jobs and deliveries whose lost leases spent their budget: quarantined.
    pub quarantined: u64,
}

/// What a redrive moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedriveOutcome {
    pub job_key: JobKey,
    pub deliveries: u64,
}

/// Which jobs to list (every field narrows; unset fields do not).
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub report: Option<String>,
    /// Local dates from this one, inclusive.
    pub from: Option<chrono::NaiveDate>,
    /// Local dates up to this one, inclusive.
    pub to: Option<chrono::NaiveDate>,
    /// Jobs with a delivery whose last attempt had this class.
    pub class: Option<ResponseClass>,
    /// The page after this key (in the list's order: newest date first, then key).
    pub after: Option<JobKey>,
    pub limit: Option<u32>,
}

/// What retention would free for one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RetentionSizes {
    pub diagnostics_bytes: i64,
    pub diagnostics_rows: i64,
    pub ledger_rows: i64,
}

/// What a signed run request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct IngestOutcome {
    pub job_key: JobKey,
    /// This request inserted the job.
    pub created: bool,
    /// The webhook-id was seen before.
    pub replayed: bool,
}
