//! The audit of operators' actions: who redrove or cancelled what, why, when and through what
//! (the `audit` table).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::LedgerError;
use super::backend::tx::Statement;
use super::types::parse_key;
use crate::domain::clock::from_millis;
use crate::domain::keys::{DeliveryKey, JobKey};

/// Who did an audited action, why, and through what. Made only by [`Audit::new`], which
/// refuses an action without a name or a reason: every redrive and cancel is audited.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    by: &'a str,
    reason: &'a str,
    via: Via,
}

/// Through what an audited action came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Via {
    /// `dawnpost redrive` / `dawnpost cancel`.
    #[serde(rename = "cli")]
    Cli,
    /// The ops API.
    #[serde(rename = "api")]
    Api,
    /// An operator's console session.
    #[serde(rename = "console:operator")]
    Console,
}

impl Via {
    /// As the audit rows hold it.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Cli => "cli",
            Via::Api => "api",
            Via::Console => "console:operator",
        }
    }
}

impl std::fmt::Display for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Via {
    type Err = LedgerError;

    fn from_str(s: &str) -> Result<Via, LedgerError> {
        [Via::Cli, Via::Api, Via::Console]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown audit channel {s:?}")))
    }
}

/// An action refused because it could not be audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("by and reason must not be empty: the action is audited")]
pub struct Unaudited;

impl<'a> Audit<'a> {
    /// `by` and `reason`, trimmed; refused when either is empty.
    pub fn new(by: &'a str, reason: &'a str, via: Via) -> Result<Audit<'a>, Unaudited> {
        let (by, reason) = (by.trim(), reason.trim());
        if by.is_empty() || reason.is_empty() {
            return Err(Unaudited);
        }
        Ok(Audit { by, reason, via })
    }

    pub fn by(&self) -> &'a str {
        self.by
    }

    pub fn reason(&self) -> &'a str {
        self.reason
    }

    pub fn via(&self) -> Via {
        self.via
    }
}

/// The audit row of `action` (`redrive`, `cancel`) on job `job`, or on one of its deliveries.
pub(super) fn audit_row<'a>(
    job: &'a str,
    delivery: Option<&DeliveryKey>,
    audit: &Audit<'a>,
    action: &'a str,
    at_ms: i64,
) -> Statement<'a> {
    Statement::new(
        "INSERT INTO audit (job_key, delivery_key, redriven_by, reason, at, action, via)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(job)
    .bind(delivery)
    .bind(audit.by())
    .bind(audit.reason())
    .bind(at_ms)
    .bind(action)
    .bind(audit.via().as_str())
}

/// One audited action on a job or a delivery: a redrive or a cancel.
#[derive(Debug, Clone)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_without_a_name_or_a_reason_is_not_audited() {
        assert_eq!(
            Audit::new("", "inbox fixed", Via::Cli).err(),
            Some(Unaudited)
        );
        assert_eq!(Audit::new("alice", "  ", Via::Api).err(), Some(Unaudited));
        let a = Audit::new(" alice ", " inbox fixed\n", Via::Console).expect("audited");
        assert_eq!(
            (a.by(), a.reason(), a.via()),
            ("alice", "inbox fixed", Via::Console)
        );
    }

    #[test]
    fn a_channel_reads_back_as_written_and_nothing_else_does() {
        for via in [Via::Cli, Via::Api, Via::Console] {
            assert_eq!(via.as_str().parse::<Via>().ok(), Some(via));
        }
        assert!("console".parse::<Via>().is_err());
    }
}
