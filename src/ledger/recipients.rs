//! Recipients: the bounces and complaints recorded after a send (each a later event on its
//! delivery, which stays `sent`), the suppressions they cause or an operator sets and lifts
//! (kept as the address's history), and a delivery to a suppressed address ended `suppressed`.

use chrono::{DateTime, Duration, Utc};

use super::backend::tx::{Statement, Tx};
use super::handles::Recipients;
use super::types::parse_key;
use super::{Audit, DeliveryLease, LedgerError, Result, SUPPRESSED_FORMAT, fenced};
use crate::domain::bounce::{Bounce, BounceKind};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::keys::DeliveryKey;

/// Why an address is suppressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A hard bounce.
    Bounce,
    /// Too many soft bounces in the policy's window.
    SoftBounces,
    /// The recipient complained (marked a report as spam).
    Complaint,
    /// The recipient unsubscribed (one click).
    Unsubscribe,
    /// An operator suppressed it.
    Operator,
}

impl Cause {
    pub const ALL: [Cause; 5] = [
        Cause::Bounce,
        Cause::SoftBounces,
        Cause::Complaint,
        Cause::Unsubscribe,
        Cause::Operator,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Cause::Bounce => "bounce",
            Cause::SoftBounces => "soft_bounces",
            Cause::Complaint => "complaint",
            Cause::Unsubscribe => "unsubscribe",
            Cause::Operator => "operator",
        }
    }

    fn parse(s: &str) -> Result<Cause> {
        (Cause::ALL.into_iter().find(|c| c.as_str() == s))
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown suppression cause {s:?}")))
    }
}

/// Whom a suppression holds for, in words: `for report R`, or `for every report`.
pub fn scope(report: Option<&str>) -> String {
    match report {
        Some(r) => format!("for report {r}"),
        None => "for every report".to_string(),
    }
}

/// How many soft bounces of an address within how long suppress it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoftPolicy {
    pub limit: u32,
    pub window: Duration,
}

/// A suppression: in force while `lifted` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppression {
    pub id: i64,
    pub address: String,
    /// The one report it holds for; `None` for every report.
    pub report: Option<String>,
    pub since: DateTime<Utc>,
    pub cause: Cause,
    /// In words: the bounce that caused it, or the operator's reason.
    pub why: String,
    pub bounce_id: Option<i64>,
    pub by: Option<String>,
    pub via: Option<String>,
    pub lifted: Option<Lifted>,
}

/// Who lifted a suppression, when and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifted {
    pub at: DateTime<Utc>,
    pub by: String,
    pub reason: String,
    pub via: String,
}

#[derive(Debug, sqlx::FromRow)]
struct SuppressionRecord {
    id: i64,
    address: String,
    report_id: String,
    since: i64,
    cause: String,
    why: String,
    bounce_id: Option<i64>,
    by: Option<String>,
    via: Option<String>,
    lifted_at: Option<i64>,
    lifted_by: Option<String>,
    lifted_reason: Option<String>,
    lifted_via: Option<String>,
}

impl TryFrom<SuppressionRecord> for Suppression {
    type Error = LedgerError;

    fn try_from(r: SuppressionRecord) -> Result<Suppression> {
        let lifted = r.lifted_at.map(|at| Lifted {
            at: from_millis(at),
            by: r.lifted_by.unwrap_or_default(),
            reason: r.lifted_reason.unwrap_or_default(),
            via: r.lifted_via.unwrap_or_default(),
        });
        Ok(Suppression {
            id: r.id,
            address: r.address,
            report: Some(r.report_id).filter(|r| !r.is_empty()),
            since: from_millis(r.since),
            cause: Cause::parse(&r.cause)?,
            why: r.why,
            bounce_id: r.bounce_id,
            by: r.by,
            via: r.via,
            lifted,
        })
    }
}

/// A bounce as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BounceRow {
    pub id: i64,
    pub received_at: DateTime<Utc>,
    pub provider: String,
    pub kind: BounceKind,
    pub address: Option<String>,
    pub status: Option<String>,
    pub diagnostic: Option<String>,
    /// The delivery it was matched to; `None` when it matched none.
    pub delivery: Option<DeliveryKey>,
}

#[derive(Debug, sqlx::FromRow)]
struct BounceRecord {
    id: i64,
    received_at: i64,
    provider: String,
    kind: String,
    address: Option<String>,
    status: Option<String>,
    diagnostic: Option<String>,
    delivery_key: Option<String>,
}

impl TryFrom<BounceRecord> for BounceRow {
    type Error = LedgerError;

    fn try_from(r: BounceRecord) -> Result<BounceRow> {
        Ok(BounceRow {
            id: r.id,
            received_at: from_millis(r.received_at),
            provider: r.provider,
            kind: BounceKind::parse(&r.kind)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown bounce kind {:?}", r.kind)))?,
            address: r.address,
            status: r.status,
            diagnostic: r.diagnostic,
            delivery: r.delivery_key.as_deref().map(parse_key).transpose()?,
        })
    }
}

/// What recording a bounce did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub bounce_id: i64,
    /// The delivery it was matched to.
    pub delivery: Option<DeliveryKey>,
    /// The suppression it put in force, if it did (not when one already was).
    pub suppressed: Option<Suppression>,
}

const BOUNCE_INSERT: &str = "INSERT INTO bounces (received_at, provider, kind, address, status,
        diagnostic, delivery_key, report_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id";

const SUPPRESSION_INSERT: &str = "INSERT INTO suppressions (address, report_id, since, cause, why,
        bounce_id, by, via)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (address, report_id) WHERE lifted_at IS NULL DO NOTHING RETURNING id";

const IN_FORCE: &str = "SELECT id, address, report_id, since, cause, why, bounce_id, by, via,
        lifted_at, lifted_by, lifted_reason, lifted_via
     FROM suppressions WHERE address = $1 AND report_id IN ('', $2) AND lifted_at IS NULL
     ORDER BY report_id, id LIMIT 1";

const SOFT_SINCE: &str = "SELECT COUNT(*) FROM bounces
     WHERE address = $1 AND kind = 'soft' AND delivery_key IS NOT NULL AND received_at >= $2";

/// `sending → suppressed` (or `quarantined` while a live node does not read `suppressed`),
/// saying `$4`, in format `$5`, at `$6`: not an attempt, so the lease's count is given back.
const SUPPRESS_DELIVERY: &str = "UPDATE deliveries SET state = $7, attempts = attempts - 1,
        last_error = $4, format = CASE WHEN format > $5 THEN format ELSE $5 END,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = $6, terminal_at = $6
     WHERE job_number = $1 AND ordinal = $2 AND lease_token = $3 AND state = 'sending'";

/// A new suppression, as [`Recipients::suppress`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct NewSuppression<'a> {
    pub address: &'a str,
    pub report: Option<&'a str>,
    pub cause: Cause,
    pub why: &'a str,
    pub at: DateTime<Utc>,
}

impl Recipients<'_> {
    /// Records `bounce`, matched to `delivery` (or to none), at `at`, and suppresses its
    /// address as the bounce and `soft` say: a hard bounce for every report, a complaint for
    /// the report it names (or every report), soft bounces once `soft.limit` of them fall in
    /// `soft.window`. An unmatched bounce is kept and never suppresses.
    pub async fn record(
        self,
        bounce: &Bounce,
        delivery: Option<&DeliveryKey>,
        soft: SoftPolicy,
        at: DateTime<Utc>,
    ) -> Result<Recorded> {
        let insert = Statement::new(BOUNCE_INSERT)
            .bind(to_millis(at))
            .bind(bounce.provider)
            .bind(bounce.kind.as_str())
            .bind(bounce.address.as_deref())
            .bind(bounce.status.as_deref())
            .bind(bounce.diagnostic.as_deref())
            .bind(delivery)
            .bind(bounce.report.as_deref());
        self.within(async |tx| {
            let Some((id,)) = tx.fetch_optional::<(i64,)>(&insert).await? else {
                return Err(LedgerError::Corrupt(
                    "a bounce insert returned no id".into(),
                ));
            };
            let suppressed = match (delivery, bounce.address.as_deref()) {
                (Some(_), Some(address)) => suppress_for(tx, bounce, address, id, soft, at).await?,
                _ => None,
            };
            Ok(Recorded {
                bounce_id: id,
                delivery: delivery.cloned(),
                suppressed,
            })
        })
        .await
    }

    /// Suppresses `s.address` (for `s.report`, or every report); `false` when a suppression
    /// of it is in force already. An operator's is audited in its row.
    pub async fn suppress(self, s: NewSuppression<'_>, audit: Option<&Audit<'_>>) -> Result<bool> {
        let (by, via) = match audit {
            Some(a) => (Some(a.by()), Some(a.via().as_str())),
            None => (None, None),
        };
        let why = audit.map_or(s.why, |a| a.reason());
        let st = suppression_row(&s, why, None, by, via);
        self.within(async |tx| Ok(tx.fetch_optional::<(i64,)>(&st).await?.is_some()))
            .await
    }

    /// Lifts the suppression of `address` for `report` (or for every report) in force,
    /// audited in its row; `false` when none was.
    pub async fn unsuppress(
        self,
        address: &str,
        report: Option<&str>,
        audit: &Audit<'_>,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let st = Statement::new(
            "UPDATE suppressions SET lifted_at = $3, lifted_by = $4, lifted_reason = $5,
                lifted_via = $6
             WHERE address = $1 AND report_id = $2 AND lifted_at IS NULL",
        )
        .bind(address)
        .bind(report.unwrap_or(""))
        .bind(to_millis(at))
        .bind(audit.by())
        .bind(audit.reason())
        .bind(audit.via().as_str());
        Ok(self.execute(&st).await? > 0)
    }

    /// Lifts suppression `id` if it is in force, audited in its row; `false` when it was not.
    pub async fn lift(self, id: i64, audit: &Audit<'_>, at: DateTime<Utc>) -> Result<bool> {
        let st = Statement::new(
            "UPDATE suppressions SET lifted_at = $2, lifted_by = $3, lifted_reason = $4,
                lifted_via = $5
             WHERE id = $1 AND lifted_at IS NULL",
        )
        .bind(id)
        .bind(to_millis(at))
        .bind(audit.by())
        .bind(audit.reason())
        .bind(audit.via().as_str());
        Ok(self.execute(&st).await? > 0)
    }

    /// The suppression of `address` in force for `report`: its own, or one for every report.
    pub async fn suppressed(self, address: &str, report: &str) -> Result<Option<Suppression>> {
        let st = Statement::new(IN_FORCE).bind(address).bind(report);
        Ok(self
            .fetch_all::<SuppressionRecord, Suppression>(&st)
            .await?
            .pop())
    }

    /// What changes whenever a suppression is made or lifted: the newest suppression's id and
    /// how many are in force.
    pub async fn version(self) -> Result<(i64, i64)> {
        let row: (i64, i64) = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT COALESCE(MAX(id), 0),
                        (SELECT COUNT(*) FROM suppressions WHERE lifted_at IS NULL)
                 FROM suppressions",
            )
            .fetch_one(p)
            .await?
        });
        Ok(row)
    }

    /// Every suppression, newest first: those in force, and with `lifted` the lifted ones too.
    pub async fn suppressions(self, lifted: bool, limit: u32) -> Result<Vec<Suppression>> {
        let sql = if lifted {
            "SELECT id, address, report_id, since, cause, why, bounce_id, by, via, lifted_at,
                lifted_by, lifted_reason, lifted_via
             FROM suppressions ORDER BY id DESC LIMIT $1"
        } else {
            "SELECT id, address, report_id, since, cause, why, bounce_id, by, via, lifted_at,
                lifted_by, lifted_reason, lifted_via
             FROM suppressions WHERE lifted_at IS NULL ORDER BY id DESC LIMIT $1"
        };
        let st = Statement::new(sql).bind(i64::from(limit));
        self.fetch_all::<SuppressionRecord, Suppression>(&st).await
    }

    /// The bounces recorded on delivery `key`, oldest first.
    pub async fn bounces_of(self, key: &DeliveryKey) -> Result<Vec<BounceRow>> {
        let st = Statement::new(
            "SELECT id, received_at, provider, kind, address, status, diagnostic, delivery_key
             FROM bounces WHERE delivery_key = $1 ORDER BY id",
        )
        .bind(key);
        self.fetch_all::<BounceRecord, BounceRow>(&st).await
    }

    /// How many bounces matched no delivery.
    pub async fn unmatched(self) -> Result<i64> {
        let row: (i64,) = on_backend!(self, |p, _d| {
            sqlx::query_as("SELECT COUNT(*) FROM bounces WHERE delivery_key IS NULL")
                .fetch_one(p)
                .await?
        });
        Ok(row.0)
    }

    /// The sent email deliveries to `address`, newest first, at most `limit`: where a bounce
    /// naming only a Message-ID is looked for.
    pub async fn sent_to(self, address: &str, limit: u32) -> Result<Vec<DeliveryKey>> {
        let escaped: String = (address.to_lowercase().chars())
            .flat_map(|c| match c {
                '%' | '_' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let pattern = format!("%/email:{escaped}");
        let keys: Vec<(String,)> = on_backend!(self, |p, _d| {
            sqlx::query_as(
                "SELECT key FROM deliveries WHERE state = 'sent' AND lower(key) LIKE $1 ESCAPE '\\'
                 ORDER BY job_number DESC LIMIT $2",
            )
            .bind(&pattern)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await?
        });
        keys.iter().map(|(k,)| parse_key(k)).collect()
    }

    /// Ends leased delivery `lease` for its suppressed recipient, saying `why`: `suppressed`
    /// when every live node reads it (`write_format`), else `quarantined`.
    pub async fn suppress_delivery(
        self,
        lease: &DeliveryLease,
        why: &str,
        at: DateTime<Utc>,
    ) -> Result<super::DeliveryState> {
        let state = if self.nodes().write_format() >= SUPPRESSED_FORMAT {
            super::DeliveryState::Suppressed
        } else {
            super::DeliveryState::Quarantined
        };
        let st = Statement::new(SUPPRESS_DELIVERY)
            .bind(lease.place().job_number)
            .bind(i64::from(lease.place().ordinal))
            .bind(lease.token())
            .bind(why)
            .bind(SUPPRESSED_FORMAT)
            .bind(to_millis(at))
            .bind(state.as_str());
        fenced(self.execute(&st).await?, lease)?;
        Ok(state)
    }
}

/// The suppression a matched bounce causes, if any, inside the bounce's transaction.
async fn suppress_for(
    tx: &mut Tx,
    bounce: &Bounce,
    address: &str,
    bounce_id: i64,
    soft: SoftPolicy,
    at: DateTime<Utc>,
) -> Result<Option<Suppression>> {
    let status = bounce
        .status
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let when = crate::domain::window::rfc3339(at);
    let (cause, report, why) = match bounce.kind {
        BounceKind::Hard => (
            Cause::Bounce,
            None,
            format!(
                "hard bounce{status} reported by {} at {when}",
                bounce.provider
            ),
        ),
        BounceKind::Complaint => (
            Cause::Complaint,
            bounce.report.as_deref(),
            format!("complaint reported by {} at {when}", bounce.provider),
        ),
        BounceKind::Soft => {
            let since = to_millis(crate::domain::clock::sub(at, soft.window));
            let count = Statement::new(SOFT_SINCE).bind(address).bind(since);
            let (n,) = tx.fetch_optional::<(i64,)>(&count).await?.unwrap_or((0,));
            if n < i64::from(soft.limit) {
                return Ok(None);
            }
            let window =
                crate::domain::duration::Span::from_std(soft.window.to_std().unwrap_or_default());
            (
                Cause::SoftBounces,
                None,
                format!(
                    "{n} soft bounces within {window}, the last{status} reported by {} at {when}",
                    bounce.provider
                ),
            )
        }
    };
    let s = NewSuppression {
        address,
        report,
        cause,
        why: &why,
        at,
    };
    let st = suppression_row(&s, &why, Some(bounce_id), None, None);
    let Some((id,)) = tx.fetch_optional::<(i64,)>(&st).await? else {
        return Ok(None);
    };
    Ok(Some(Suppression {
        id,
        address: address.to_string(),
        report: report.map(str::to_string),
        since: at,
        cause,
        why,
        bounce_id: Some(bounce_id),
        by: None,
        via: None,
        lifted: None,
    }))
}

fn suppression_row<'a>(
    s: &NewSuppression<'a>,
    why: &'a str,
    bounce_id: Option<i64>,
    by: Option<&'a str>,
    via: Option<&'a str>,
) -> Statement<'a> {
    Statement::new(SUPPRESSION_INSERT)
        .bind(s.address)
        .bind(s.report.unwrap_or(""))
        .bind(to_millis(s.at))
        .bind(s.cause.as_str())
        .bind(why)
        .bind(bounce_id)
        .bind(by)
        .bind(via)
}
