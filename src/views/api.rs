//! The JSON contract of the ops API (`GET /v1/jobs`, `/v1/jobs/{key}`, `/v1/dlq` and the
//! redrives' replies) and of the CLI's `jobs`, `show` and `dlq --json`: version 1.
//!
//! These types are the contract; the ledger's rows are not. A row may gain, lose or rename a
//! column without a reader noticing, because what is printed is built here, field by field.
//! Changing a name, a type or the meaning of a field here is a new version of the contract:
//! `tests/it/contracts.rs` compares each against its checked-in sample in `docs/contracts/`,
//! and README.md documents them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::keys::{DeliveryKey, JobKey};
use crate::ledger::{Attempt, Delivery, Job, Node, RedriveOutcome};
use crate::views::history::{DeliveryHistory, Dlq, JobHistory, Redactions, StoreCheck};

/// The version of this contract: the first field of each object a reader gets on its own
/// (a job, a history, the dead letters, a redrive's reply, a node).
pub(crate) const VERSION: u32 = 1;

/// The `version` field: serializes as [`VERSION`], and can be nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiVersion;

impl Serialize for ApiVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(VERSION)
    }
}

/// One job, as `GET /v1/jobs` lists it and `jobs --json` prints it (one per line).
#[derive(Debug, Clone, Serialize)]
pub struct JobV1 {
    pub version: ApiVersion,
    pub key: String,
    pub report: String,
    pub date: String,
    pub state: &'static str,
    pub origin: &'static str,
    pub fire_at: DateTime<Utc>,
    pub window: WindowV1,
    pub ready_at: DateTime<Utc>,
    pub attempts: i64,
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub artifact: Option<ArtifactV1>,
    pub artifact_deleted_at: Option<DateTime<Utc>>,
    pub diagnostics_cleared_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub redrive_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub terminal_at: Option<DateTime<Utc>>,
    pub generated_at: Option<DateTime<Utc>>,
    pub lease_losses: i64,
    /// The deadline of its wait for the data (`ready_when`), once it waited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_until: Option<DateTime<Utc>>,
    /// When the deadline passed without its data ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_at: Option<DateTime<Utc>>,
    /// A reissued revision's number (absent for revision 1) and the revision it supersedes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// A job's data interval, `[start, end)`.
#[derive(Debug, Clone, Serialize)]
pub struct WindowV1 {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// Where a job's artifact is stored: object keys and the sha256 over its parts.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactV1 {
    pub html_key: String,
    pub text_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv_key: Option<String>,
    pub sha256: String,
    pub bytes: i64,
    /// The keys of the named parts a destination kind sends (a chat message), by part name;
    /// absent when there are none (an added field of version 1).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub parts: std::collections::BTreeMap<String, String>,
}

/// One delivery of a job to one destination.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryV1 {
    pub key: String,
    pub job_key: String,
    pub kind: String,
    pub destination: String,
    pub state: &'static str,
    pub ready_at: DateTime<Utc>,
    pub attempts: i64,
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub last_class: Option<&'static str>,
    pub last_error: Option<String>,
    pub redrive_count: i64,
    pub budget_attempts: i64,
    pub budget_since: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub terminal_at: Option<DateTime<Utc>>,
    pub lease_losses: i64,
}

/// One recorded attempt of a delivery.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptV1 {
    pub delivery_key: String,
    pub attempt: i64,
    pub requested_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub class: &'static str,
    pub code: Option<i64>,
    pub retry_after_ms: Option<i64>,
    pub next_ready_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
    pub diagnostics: Option<String>,
}

/// A delivery with every attempt made, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryHistoryV1 {
    #[serde(flatten)]
    pub delivery: DeliveryV1,
    /// An attempt sent a bounded copy with a link instead of the whole report (it was too
    /// large for the destination); absent when none did.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sent_a_link: bool,
    pub attempt_log: Vec<AttemptV1>,
    /// The bounces and complaints recorded on it after it was sent, oldest first; absent
    /// when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bounces: Vec<BounceV1>,
}

/// A bounce or complaint recorded on a delivery.
#[derive(Debug, Clone, Serialize)]
pub struct BounceV1 {
    pub received_at: DateTime<Utc>,
    /// `dsn`, `ses`, `postmark`, `sendgrid` or `mailgun`.
    pub provider: String,
    /// `hard`, `soft` or `complaint`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
}

/// One audited action on a job or a delivery.
#[derive(Debug, Clone, Serialize)]
pub struct RedriveV1 {
    pub job_key: String,
    pub delivery_key: Option<String>,
    pub by: String,
    pub reason: String,
    pub at: DateTime<Utc>,
    /// `redrive` or `cancel`.
    pub action: String,
    /// `cli`, `api` or `console:operator`; null on rows older than the column.
    pub via: Option<String>,
}

/// What `show` looked up in the artifact store.
#[derive(Debug, Clone, Serialize)]
pub struct StoreCheckV1 {
    pub url: String,
    /// `intact`, `missing`, `altered` or `unreadable`.
    pub status: &'static str,
    pub detail: String,
}

/// A job's whole history: `GET /v1/jobs/{key}` and `show --json`.
#[derive(Debug, Clone, Serialize)]
pub struct JobHistoryV1 {
    #[serde(flatten)]
    pub job: JobV1,
    /// `stored`, `deleted` (by retention) or `none` (not rendered).
    pub artifact_status: &'static str,
    pub deliveries: Vec<DeliveryHistoryV1>,
    pub redrives: Vec<RedriveV1>,
    /// Every probe of its data (`ready_when`), oldest first; absent for a report that does
    /// not wait for its data.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeV1>,
    /// Every revision of its report and date (key and state), when it was reissued.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<RevisionV1>,
    /// What its report's owners were told of it, oldest first; absent when nothing. Since
    /// 0.2.0.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<NoticeV1>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreCheckV1>,
    /// Whether it was sent, for a report with `send_when = "changed"` or `"alert"`; absent
    /// for any other report and before its render. Since 0.3.0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionV1>,
}

/// What `send_when` decided for a job: its rule (`changed`, `alert`), whether it was sent,
/// what happened (`first`, `changed`, `unchanged`, `triggered`, `reminded`,
/// `still_triggered`, `recovered`, `ok`), in words, and for an alert the value found and
/// whether the alert is triggered after it.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionV1 {
    pub rule: String,
    pub sent: bool,
    pub event: String,
    pub words: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triggered: Option<bool>,
}

/// One revision of a reissued job.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionV1 {
    pub key: String,
    pub state: &'static str,
    pub created_at: DateTime<Utc>,
    /// Its artifact, every part named; absent before it rendered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactV1>,
}

/// One notice to a job's report's owners: why (`late`, `quarantined`), when, what it said,
/// and whether it was told: `waiting` (for its batch's message), `nobody` (the report had no
/// owners by then) or `sent` in `message`.
#[derive(Debug, Clone, Serialize)]
pub struct NoticeV1 {
    pub cause: &'static str,
    pub noticed_at: DateTime<Utc>,
    pub detail: String,
    pub told: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl From<&crate::ledger::NoticeRow> for NoticeV1 {
    fn from(n: &crate::ledger::NoticeRow) -> NoticeV1 {
        use crate::ledger::Told;
        let (told, message) = match &n.told {
            Told::Waiting => ("waiting", None),
            Told::Nobody => ("nobody", None),
            Told::In(m) => ("sent", Some(m.clone())),
        };
        NoticeV1 {
            cause: n.cause.as_str(),
            noticed_at: n.noticed_at,
            detail: n.detail.clone(),
            told,
            message,
        }
    }
}

/// One probe of a job's data: when, what it found (`ready`, `not_ready`, `failed`) and what
/// it answered.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeV1 {
    pub at: DateTime<Utc>,
    pub outcome: &'static str,
    pub answer: String,
}

/// Quarantined work: `GET /v1/dlq` and `dlq --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DlqV1 {
    pub version: ApiVersion,
    pub jobs: Vec<JobV1>,
    pub deliveries: Vec<DeliveryV1>,
}

/// The reply to `POST /v1/jobs/{key}/redrive`: the job and how many deliveries moved back.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JobRedrivenV1 {
    pub version: ApiVersion,
    pub job: String,
    pub deliveries: u64,
}

/// The reply to `POST /v1/deliveries/{key}/redrive`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DeliveryRedrivenV1 {
    pub version: ApiVersion,
    pub job: String,
    pub delivery: String,
}

impl From<&Job> for JobV1 {
    fn from(j: &Job) -> JobV1 {
        JobV1 {
            version: ApiVersion,
            key: j.key.to_string(),
            report: j.key.report().to_string(),
            date: j.key.date().to_string(),
            state: j.state.as_str(),
            origin: j.origin.as_str(),
            fire_at: j.fire_at,
            window: WindowV1 {
                start: j.window.start,
                end: j.window.end,
            },
            ready_at: j.ready_at,
            attempts: j.attempts,
            lease_owner: j.lease_owner.clone(),
            lease_token: j.lease_token,
            lease_expires_at: j.lease_expires_at,
            artifact: j.artifact.as_ref().map(ArtifactV1::from),
            artifact_deleted_at: j.artifact_deleted_at,
            diagnostics_cleared_at: j.diagnostics_cleared_at,
            last_error: j.last_error.clone(),
            redrive_count: j.redrive_count,
            created_at: j.created_at,
            updated_at: j.updated_at,
            terminal_at: j.terminal_at,
            generated_at: j.generated_at,
            lease_losses: j.lease_losses,
            wait_until: j.wait_until,
            late_at: j.late_at,
            revision: (j.key.revision() > 1).then(|| j.key.revision()),
            supersedes: j.supersedes.as_ref().map(JobKey::to_string),
        }
    }
}

impl From<&Delivery> for DeliveryV1 {
    fn from(d: &Delivery) -> DeliveryV1 {
        DeliveryV1 {
            key: d.key.to_string(),
            job_key: d.key.job().to_string(),
            kind: d.key.kind().to_string(),
            destination: d.key.destination().to_string(),
            state: d.state.as_str(),
            ready_at: d.ready_at,
            attempts: d.attempts,
            lease_owner: d.lease_owner.clone(),
            lease_token: d.lease_token,
            lease_expires_at: d.lease_expires_at,
            last_class: d.last_class.map(|c| c.as_str()),
            last_error: d.last_error.clone(),
            redrive_count: d.redrive_count,
            budget_attempts: d.budget_attempts,
            budget_since: d.budget_since,
            created_at: d.created_at,
            updated_at: d.updated_at,
            terminal_at: d.terminal_at,
            lease_losses: d.lease_losses,
        }
    }
}

impl From<&Attempt> for AttemptV1 {
    fn from(a: &Attempt) -> AttemptV1 {
        AttemptV1 {
            delivery_key: a.delivery_key.to_string(),
            attempt: a.attempt,
            requested_at: a.requested_at,
            finished_at: a.finished_at,
            class: a.class.as_str(),
            code: a.code,
            retry_after_ms: a.retry_after_ms,
            next_ready_at: a.next_ready_at,
            reason: a.reason.clone(),
            diagnostics: a.diagnostics.clone(),
        }
    }
}

impl From<&crate::report::artifact::ArtifactRef> for ArtifactV1 {
    fn from(a: &crate::report::artifact::ArtifactRef) -> ArtifactV1 {
        ArtifactV1 {
            html_key: a.html_key.clone(),
            text_key: a.text_key.clone(),
            csv_key: a.csv_key.clone(),
            sha256: a.sha256.clone(),
            bytes: a.bytes,
            parts: (a.parts.iter())
                .map(|p| (p.clone(), a.part_key(p)))
                .collect(),
        }
    }
}

impl From<&DeliveryHistory> for DeliveryHistoryV1 {
    fn from(d: &DeliveryHistory) -> DeliveryHistoryV1 {
        DeliveryHistoryV1 {
            delivery: (&d.delivery).into(),
            sent_a_link: d.sent_a_link(),
            attempt_log: d.attempt_log.iter().map(AttemptV1::from).collect(),
            bounces: (d.bounces.iter())
                .map(|b| BounceV1 {
                    received_at: b.received_at,
                    provider: b.provider.clone(),
                    kind: b.kind.as_str(),
                    status: b.status.clone(),
                    diagnostic: b.diagnostic.clone(),
                })
                .collect(),
        }
    }
}

impl From<&StoreCheck> for StoreCheckV1 {
    fn from(s: &StoreCheck) -> StoreCheckV1 {
        StoreCheckV1 {
            url: s.url.clone(),
            status: s.status,
            detail: s.detail.clone(),
        }
    }
}

impl From<&JobHistory> for JobHistoryV1 {
    fn from(h: &JobHistory) -> JobHistoryV1 {
        JobHistoryV1 {
            job: (&h.job).into(),
            artifact_status: h.artifact_status,
            deliveries: h.deliveries.iter().map(DeliveryHistoryV1::from).collect(),
            redrives: h
                .redrives
                .iter()
                .map(|r| RedriveV1 {
                    job_key: r.job_key.to_string(),
                    delivery_key: r.delivery_key.as_ref().map(DeliveryKey::to_string),
                    by: r.by.clone(),
                    reason: r.reason.clone(),
                    at: r.at,
                    action: r.action.clone(),
                    via: r.via.clone(),
                })
                .collect(),
            probes: (h.probes.iter())
                .map(|p| ProbeV1 {
                    at: p.at,
                    outcome: p.outcome.as_str(),
                    answer: p.answer.clone(),
                })
                .collect(),
            notices: h.notices.iter().map(NoticeV1::from).collect(),
            revisions: if h.revisions.len() > 1 {
                (h.revisions.iter())
                    .map(|r| RevisionV1 {
                        key: r.key.to_string(),
                        state: r.state.as_str(),
                        created_at: r.created_at,
                        artifact: r.artifact.as_ref().map(ArtifactV1::from),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            store: h.store.as_ref().map(StoreCheckV1::from),
            decision: h.decision.as_ref().map(|d| DecisionV1 {
                rule: d.rule.clone(),
                sent: d.sent,
                event: d.event.clone(),
                words: d.words.clone(),
                value: d.value,
                triggered: d.triggered,
            }),
        }
    }
}

impl From<&Dlq> for DlqV1 {
    fn from(d: &Dlq) -> DlqV1 {
        DlqV1 {
            version: ApiVersion,
            jobs: d.jobs.iter().map(JobV1::from).collect(),
            deliveries: d.deliveries.iter().map(DeliveryV1::from).collect(),
        }
    }
}

impl From<&RedriveOutcome> for JobRedrivenV1 {
    fn from(o: &RedriveOutcome) -> JobRedrivenV1 {
        JobRedrivenV1 {
            version: ApiVersion,
            job: o.job_key.to_string(),
            deliveries: o.deliveries,
        }
    }
}

impl DeliveryRedrivenV1 {
    pub fn new(job: &JobKey, delivery: &DeliveryKey) -> DeliveryRedrivenV1 {
        DeliveryRedrivenV1 {
            version: ApiVersion,
            job: job.to_string(),
            delivery: delivery.to_string(),
        }
    }
}

/// The reply to `POST /v1/runs`: the job, and whether it (or the webhook-id) existed before.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunAcceptedV1 {
    pub version: ApiVersion,
    pub job: String,
    pub duplicate: bool,
}

impl RunAcceptedV1 {
    pub fn new(job: &JobKey, duplicate: bool) -> RunAcceptedV1 {
        RunAcceptedV1 {
            version: ApiVersion,
            job: job.to_string(),
            duplicate,
        }
    }
}

/// One live node, as `nodes --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NodeV1 {
    pub version: ApiVersion,
    pub id: String,
    /// The node's binary's version.
    pub binary: String,
    /// The newest schema version the node knows.
    pub schema_version: i64,
    pub formats: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    /// Whether the node leads the cluster's housekeeping (the lease rescuer, the runbook
    /// driver): the live node that started first. Since 0.2.0.
    pub leads: bool,
}

impl NodeV1 {
    /// Node `n` of `live` (the live nodes, the oldest start first).
    pub fn of(n: &Node, live: &[Node]) -> NodeV1 {
        NodeV1 {
            version: ApiVersion,
            id: n.id.clone(),
            binary: n.version.clone(),
            schema_version: n.schema_version,
            formats: n.formats.clone(),
            started_at: n.started_at,
            heartbeat_at: n.heartbeat_at,
            leads: crate::ledger::leader(live).is_some_and(|l| l.id == n.id),
        }
    }
}

/// `value` as JSON with every string `hide` names redacted (recipient addresses, webhook
/// paths), unless the reader asked to see them.
pub(crate) fn redacted_json<T: Serialize>(
    value: &T,
    hide: &Redactions,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut v = serde_json::to_value(value)?;
    hide.json(&mut v);
    Ok(v)
}
