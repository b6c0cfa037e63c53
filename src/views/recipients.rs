//! Recipients as people and programs read them: the suppressions (`dawnpost suppressions`,
//! `GET /v1/suppressions`, the console's page) and what a bounce taken in did (`dawnpost
//! bounce`, the bounce endpoints' replies) — JSON version 1, built field by field, and text.
//! Addresses are shown masked unless the reader asks for them.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::redact::redact_address;
use crate::domain::window::rfc3339;
use crate::ledger::{Recorded, Suppression, scope};
use crate::views::api::ApiVersion;
use crate::views::history::Redactions;

/// The suppressions, version 1.
#[derive(Debug, Serialize)]
pub struct SuppressionsV1 {
    pub version: ApiVersion,
    pub suppressions: Vec<SuppressionV1>,
}

#[derive(Debug, Serialize)]
pub struct SuppressionV1 {
    pub address: String,
    /// The one report it holds for; absent for every report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    pub since: DateTime<Utc>,
    /// `bounce`, `soft_bounces`, `complaint`, `unsubscribe` or `operator`.
    pub cause: &'static str,
    pub why: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounce_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Who lifted it, when and why; absent while it is in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifted: Option<LiftedV1>,
}

#[derive(Debug, Serialize)]
pub struct LiftedV1 {
    pub at: DateTime<Utc>,
    pub by: String,
    pub reason: String,
    pub via: String,
}

impl From<&Suppression> for SuppressionV1 {
    fn from(s: &Suppression) -> SuppressionV1 {
        SuppressionV1 {
            address: s.address.clone(),
            report: s.report.clone(),
            since: s.since,
            cause: s.cause.as_str(),
            why: s.why.clone(),
            bounce_id: s.bounce_id,
            by: s.by.clone(),
            via: s.via.clone(),
            lifted: s.lifted.as_ref().map(|l| LiftedV1 {
                at: l.at,
                by: l.by.clone(),
                reason: l.reason.clone(),
                via: l.via.clone(),
            }),
        }
    }
}

impl SuppressionsV1 {
    pub fn of(list: &[Suppression]) -> SuppressionsV1 {
        SuppressionsV1 {
            version: ApiVersion,
            suppressions: list.iter().map(SuppressionV1::from).collect(),
        }
    }
}

/// What taking in one bounce did, version 1.
#[derive(Debug, Serialize)]
pub struct BounceTakenV1 {
    pub version: ApiVersion,
    pub bounce_id: i64,
    /// `hard`, `soft` or `complaint`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The delivery it was matched to; absent when it matched none (it is kept, and never
    /// suppresses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    /// The suppression it put in force, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<SuppressionV1>,
}

impl BounceTakenV1 {
    pub fn of(b: &crate::domain::bounce::Bounce, r: &Recorded) -> BounceTakenV1 {
        BounceTakenV1 {
            version: ApiVersion,
            bounce_id: r.bounce_id,
            kind: b.kind.as_str(),
            address: b.address.clone(),
            status: b.status.clone(),
            delivery: r.delivery.as_ref().map(ToString::to_string),
            suppressed: r.suppressed.as_ref().map(SuppressionV1::from),
        }
    }

    /// One line for a person.
    pub fn line(&self) -> String {
        let who = self.address.as_deref().unwrap_or("(no recipient named)");
        let status = self
            .status
            .as_deref()
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        let what = match &self.delivery {
            None => "matched no delivery: kept, not used to suppress".to_string(),
            Some(d) => match &self.suppressed {
                Some(s) => format!(
                    "recorded on {d}; {who} is suppressed {}",
                    scope(s.report.as_deref())
                ),
                None => format!("recorded on {d}"),
            },
        };
        format!(
            "bounce {} {}{status} for {who}: {what}",
            self.bounce_id, self.kind
        )
    }
}

/// The suppressions as text, one line each, newest first.
pub fn text(list: &[Suppression]) -> String {
    let mut out = String::new();
    if list.is_empty() {
        out.push_str("no suppressions\n");
    }
    for s in list {
        let by =
            s.by.as_deref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}  {}  since {}  {}{by}: {}",
            s.address,
            scope(s.report.as_deref()),
            rfc3339(s.since),
            s.cause.as_str(),
            s.why
        );
        if let Some(l) = &s.lifted {
            let _ = writeln!(
                out,
                "    lifted {} by {} via {}: {}",
                rfc3339(l.at),
                l.by,
                l.via,
                l.reason
            );
        }
    }
    out
}

/// What masks the addresses of `addresses` in text and JSON.
pub fn hiding<'a>(addresses: impl IntoIterator<Item = &'a str>) -> Redactions {
    Redactions::from_pairs(
        addresses
            .into_iter()
            .map(|a| (a.to_string(), redact_address(a)))
            .collect(),
    )
}
