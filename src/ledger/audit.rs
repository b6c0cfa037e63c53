//! The audit of operators' actions: who redrove or cancelled what, why, when and through what
//! (the `redrives` table).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::LedgerError;
use super::types::parse_key;
use crate::clock::from_millis;
use crate::keys::{DeliveryKey, JobKey};

/// Who did an audited action, why, and through what (`cli`, `api`, `console:operator`).
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    pub by: &'a str,
    pub reason: &'a str,
    pub via: &'a str,
}

impl<'a> Audit<'a> {
    pub fn new(by: &'a str, reason: &'a str, via: &'a str) -> Audit<'a> {
        Audit { by, reason, via }
    }
}

/// One audited action on a job or a delivery: a redrive or a cancel.
#[derive(Debug, Clone, Serialize)]
pub struct Redrive {
    pub job_key: JobKey,
    pub delivery_key: Option<DeliveryKey>,
    pub by: String,
    pub reason: String,
    pub at: DateTime<Utc>,
    /// `redrive` or `cancel`.
    pub action: String,
    /// Through what: `cli`, `api`, `console:operator`; unset on rows older than the column.
    pub via: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct RedriveRecord {
    job_key: String,
    delivery_key: Option<String>,
    redriven_by: String,
    reason: String,
    at: i64,
    action: String,
    via: Option<String>,
}

impl TryFrom<RedriveRecord> for Redrive {
    type Error = LedgerError;

    fn try_from(r: RedriveRecord) -> Result<Redrive, LedgerError> {
        Ok(Redrive {
            job_key: parse_key(&r.job_key)?,
            delivery_key: r.delivery_key.as_deref().map(parse_key).transpose()?,
            by: r.redriven_by,
            reason: r.reason,
            at: from_millis(r.at),
            action: r.action,
            via: r.via,
        })
    }
}
