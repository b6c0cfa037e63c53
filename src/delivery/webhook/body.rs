//! The webhook bodies, a contract with receivers: version 1 with the report inlined, version
//! 2 with links to it, the fields both share, and what they name of the artifact (its keys,
//! its attachments, its charts).

use chrono::NaiveDate;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::delivery::destination::Parcel;
use crate::domain::keys::{DeliveryKey, JobKey, ReportId};
use crate::report::artifact::ArtifactRef;

/// The version of the webhook body, its first field. A receiver checks it; a change of a
/// field's name, type or meaning is a new version (`docs/contracts/webhook-v1.json` is the
/// sample `tests/it/contracts.rs` pins).
pub const WEBHOOK_BODY_VERSION: u32 = 1;

/// The body of a webhook delivery: a contract with receivers, version
/// [`WEBHOOK_BODY_VERSION`], built field by field (no ledger row is serialized into it).
#[derive(Debug, Serialize)]
pub struct WebhookBody<'a> {
    /// Always [`WEBHOOK_BODY_VERSION`].
    pub version: BodyVersion,
    #[serde(flatten)]
    pub head: BodyHead<'a>,
    pub html: &'a RawValue,
    pub text: &'a RawValue,
    /// The CSV attachment's content, when the report has one (also named in `attachments`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<&'a RawValue>,
    /// The files an email of this job attaches, each with its key in the artifact store.
    pub attachments: Vec<AttachmentBody>,
    /// The report's charts: each one's object in the store, and its link when the daemon
    /// serves links (`[server] public_url`). Absent when the report has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<ChartBody>,
}

/// What every webhook body says of its job and delivery, after its `version` (both versions'
/// fields, in this order).
#[derive(Debug, Serialize)]
pub struct BodyHead<'a> {
    pub job: &'a JobKey,
    pub delivery: &'a DeliveryKey,
    pub report: &'a ReportId,
    pub title: &'a str,
    pub date: NaiveDate,
    pub window: WindowBody,
    /// A reissued revision's number (absent for revision 1), and the revision it supersedes:
    /// a receiver replaces what that one sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<&'a JobKey>,
    pub artifact: ArtifactBody<'a>,
}

/// The version of the body a webhook gets instead when the report's inlined parts would make
/// it larger than `webhook.max_body_bytes`: version 1's fields but `html`, `text` and `csv`,
/// and `links` to them (`docs/contracts/webhook-v2-linked.json`).
pub const LINKED_BODY_VERSION: u32 = 2;

/// The body of a webhook delivery of a report too large to inline: its references and links,
/// version [`LINKED_BODY_VERSION`].
#[derive(Debug, Serialize)]
pub struct LinkedBody<'a> {
    /// Always [`LINKED_BODY_VERSION`].
    pub version: LinkedVersion,
    #[serde(flatten)]
    pub head: BodyHead<'a>,
    /// Signed links to the parts, served while the artifact is kept.
    pub links: PartLinks,
    /// The size the body would have had with its parts inlined, and the limit it passed.
    pub inline_bytes: u64,
    pub max_body_bytes: u64,
    pub attachments: Vec<AttachmentBody>,
    /// The report's charts: each one's object in the store, and its link when the daemon
    /// serves links (`[server] public_url`). Absent when the report has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<ChartBody>,
}

/// Where each part of an artifact can be fetched.
#[derive(Debug, Serialize)]
pub struct PartLinks {
    pub html: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
}

/// The `version` field of a [`LinkedBody`]: [`LINKED_BODY_VERSION`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkedVersion;

impl Serialize for LinkedVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(LINKED_BODY_VERSION)
    }
}

/// The `version` field: serializes as [`WEBHOOK_BODY_VERSION`], and can be nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyVersion;

impl Serialize for BodyVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(WEBHOOK_BODY_VERSION)
    }
}

/// Where the artifact the body carries is stored: its object keys and the sha256 over its
/// parts, so a receiver can fetch or verify what it was sent.
#[derive(Debug, Serialize)]
pub struct ArtifactBody<'a> {
    pub html_key: &'a str,
    pub text_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv_key: Option<&'a str>,
    pub sha256: &'a str,
    pub bytes: i64,
}

impl<'a> ArtifactBody<'a> {
    pub fn of(artifact: &'a ArtifactRef) -> ArtifactBody<'a> {
        ArtifactBody {
            html_key: &artifact.html_key,
            text_key: &artifact.text_key,
            csv_key: artifact.csv_key.as_deref(),
            sha256: &artifact.sha256,
            bytes: artifact.bytes,
        }
    }
}

/// One chart as a webhook body references it.
#[derive(Debug, Serialize)]
pub struct ChartBody {
    pub id: String,
    pub content_type: &'static str,
    /// Its object key in the artifact store (part of the artifact's sha256).
    pub key: String,
    pub bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl ChartBody {
    /// The charts of `parcel`'s artifact, linked under `links` when there are links.
    pub(crate) fn of(
        parcel: &Parcel<'_>,
        links: Option<&crate::delivery::links::Links>,
    ) -> Vec<ChartBody> {
        (parcel.rendered.images.iter())
            .map(|(id, png)| ChartBody {
                id: id.clone(),
                content_type: "image/png",
                key: parcel.artifact.part_key(&format!("{id}.png")),
                bytes: png.len(),
                url: links.map(|l| l.chart(parcel.job, id)),
            })
            .collect()
    }
}

/// One attachment as a webhook body references it.
#[derive(Debug, Serialize)]
pub struct AttachmentBody {
    pub filename: String,
    pub content_type: &'static str,
    /// Its object key in the artifact store (part of the artifact's sha256).
    pub key: String,
    pub bytes: usize,
}

impl AttachmentBody {
    /// The files an email of `parcel`'s job attaches: its CSV and its spreadsheet, as its
    /// report's `attach` says and its artifact has them.
    pub(crate) fn of(parcel: &Parcel<'_>) -> Vec<AttachmentBody> {
        let (job, artifact, rendered) = (parcel.job, parcel.artifact, parcel.rendered);
        let attach = parcel.report.attach;
        let mut out = match attach.csv {
            true => AttachmentBody::csv_of(job, artifact, rendered.csv.as_deref()),
            false => Vec::new(),
        };
        let xlsx = artifact.parts.iter().find(|p| p.ends_with(".xlsx"));
        if let (Some(name), Some(sheet), true) = (xlsx, &rendered.xlsx, attach.xlsx) {
            out.push(AttachmentBody {
                filename: job.xlsx_filename(),
                content_type: crate::delivery::email::message::XLSX_TYPE,
                key: artifact.part_key(name),
                bytes: sheet.len(),
            });
        }
        out
    }

    /// The CSV attachment of a job, if its artifact has one.
    pub fn csv_of(job: &JobKey, artifact: &ArtifactRef, csv: Option<&str>) -> Vec<AttachmentBody> {
        match (&artifact.csv_key, csv) {
            (Some(key), Some(csv)) => vec![AttachmentBody {
                filename: job.csv_filename(),
                content_type: "text/csv; charset=utf-8",
                key: key.clone(),
                bytes: csv.len(),
            }],
            _ => Vec::new(),
        }
    }
}

/// An artifact's parts as JSON strings, escaped once for all the webhooks of its job (the
/// HTML is most of a body, and escaping it was a twentieth of a delivery's CPU).
#[derive(Debug)]
pub(crate) struct EscapedParts {
    pub html: Box<RawValue>,
    pub text: Box<RawValue>,
    pub csv: Option<Box<RawValue>>,
}

impl EscapedParts {
    pub fn of(
        rendered: &crate::report::render::Rendered,
    ) -> Result<EscapedParts, serde_json::Error> {
        Ok(EscapedParts {
            html: serde_json::value::to_raw_value(&rendered.html)?,
            text: serde_json::value::to_raw_value(&rendered.text)?,
            csv: match &rendered.csv {
                Some(csv) => Some(serde_json::value::to_raw_value(csv)?),
                None => None,
            },
        })
    }
}

#[derive(Debug, Serialize)]
pub struct WindowBody {
    pub start: String,
    pub end: String,
}
