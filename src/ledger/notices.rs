//! Owners' notices: the notices owed (one per job and cause, an idempotent key), the messages
//! that tell them (their words fixed when made), and each message's sends to the owners,
//! leased, attempted and retried like deliveries. `delivery::notice` says what is due and what a
//! message says; this file only keeps it.

use super::handles::Notices;
use chrono::{DateTime, Utc};

use super::backend::tx::Statement;
use super::{LedgerError, PerBackend, Result};
use crate::delivery::notice::{Cause, Composed, Item};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::keys::{DestinationKind, JobKey};

/// The `message` of a notice nobody was told of (its report has no owners any more).
const NOBODY: &str = "";

/// A notice owed to a report's owners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewNotice {
    pub report: String,
    pub job: JobKey,
    pub cause: Cause,
    /// What is missing or why it was quarantined, for a person.
    pub detail: String,
    /// Its idempotent key, when not one per job and cause (a suppression's: one per
    /// suppression and report).
    pub key: Option<String>,
}

/// A notice as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeRow {
    pub key: String,
    pub report: String,
    pub job: JobKey,
    pub cause: Cause,
    pub detail: String,
    pub noticed_at: DateTime<Utc>,
    pub told: Told,
}

/// Whether a notice was told, and in which message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// It waits for its message (a report's quarantines are batched).
    Waiting,
    /// Nobody: its report had no owners any more when its message was made.
    Nobody,
    /// In this message.
    In(String),
}

#[derive(Debug, sqlx::FromRow)]
struct NoticeRecord {
    key: String,
    report: String,
    job_key: String,
    cause: String,
    detail: String,
    noticed_at: i64,
    message: Option<String>,
}

impl TryFrom<NoticeRecord> for NoticeRow {
    type Error = LedgerError;

    fn try_from(r: NoticeRecord) -> Result<NoticeRow> {
        let corrupt = |what: &str| LedgerError::Corrupt(format!("notice {}: {what}", r.key));
        Ok(NoticeRow {
            job: r.job_key.parse().map_err(|_| corrupt("bad job key"))?,
            cause: Cause::parse(&r.cause).ok_or_else(|| corrupt("unknown cause"))?,
            key: r.key,
            report: r.report,
            detail: r.detail,
            noticed_at: from_millis(r.noticed_at),
            told: match r.message {
                None => Told::Waiting,
                Some(m) if m == NOBODY => Told::Nobody,
                Some(m) => Told::In(m),
            },
        })
    }
}

/// One send of a message to one owner, leased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeSend {
    pub key: String,
    pub message: String,
    pub kind: DestinationKind,
    /// The address, or the webhook's URL.
    pub destination: String,
    pub state: String,
    /// Attempts so far, this one included when leased.
    pub attempts: i64,
    pub lease_token: i64,
    pub created_at: DateTime<Utc>,
    pub last_error: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
struct SendRecord {
    key: String,
    message: String,
    kind: String,
    destination: String,
    state: String,
    attempts: i64,
    lease_token: i64,
    created_at: i64,
    last_error: Option<String>,
}

impl TryFrom<SendRecord> for NoticeSend {
    type Error = LedgerError;

    fn try_from(r: SendRecord) -> Result<NoticeSend> {
        Ok(NoticeSend {
            kind: DestinationKind::parse(&r.kind).ok_or_else(|| {
                LedgerError::Corrupt(format!("notice send {}: kind {:?}", r.key, r.kind))
            })?,
            key: r.key,
            message: r.message,
            destination: r.destination,
            state: r.state,
            attempts: r.attempts,
            lease_token: r.lease_token,
            created_at: from_millis(r.created_at),
            last_error: r.last_error,
        })
    }
}

/// A message's words.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct NoticeMessage {
    pub key: String,
    pub report: String,
    pub subject: String,
    pub body: String,
    pub webhook_body: String,
}

/// What follows an attempt of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendNext {
    Sent,
    Retry { at: DateTime<Utc> },
    Quarantine,
}

/// One attempt of a send, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoticeAttempt {
    pub class: String,
    pub code: Option<i64>,
    pub reason: String,
}

/// What a report's owners get for a batch of its notices: the words and who gets them.
pub(crate) type Addressed = (Composed, Vec<(DestinationKind, String)>);

/// Gives a batch of a report's notices (report, cause, items, message key) its words and
/// owners; `None` when the report has nobody to tell.
pub(crate) type Addresser<'a> = dyn Fn(&str, Cause, &[Item], &str) -> Option<Addressed> + Sync + 'a;

const INSERT_NOTICE: &str = "INSERT INTO notices (key, report, job_key, cause, detail, noticed_at)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING";

const WAITING: &str =
    "SELECT * FROM notices WHERE message IS NULL ORDER BY report, noticed_at, key";

/// The newest quarantine message of report `$1`: its window's start and its place in it.
const NEWEST_WINDOW: &str = "SELECT window_start, seq FROM notice_messages
     WHERE report = $1 AND cause = 'quarantined' ORDER BY window_start DESC, seq DESC LIMIT 1";

const INSERT_MESSAGE: &str = "INSERT INTO notice_messages
       (key, report, cause, window_start, seq, subject, body, webhook_body, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO NOTHING";

const INSERT_SEND: &str = "INSERT INTO notice_sends
       (key, message, kind, destination, state, ready_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'pending', $5, $5, $5) ON CONFLICT (key) DO NOTHING";

const TOLD: &str = "UPDATE notices SET message = $1 WHERE key = $2 AND message IS NULL";

/// Claims up to `$4` sends due at `$3` (pending, or sending with an expired lease: that
/// attempt was lost) for owner `$1` until `$2`.
const CLAIM: PerBackend = PerBackend {
    sqlite: "UPDATE notice_sends
             SET state = 'sending', lease_owner = $1, lease_token = lease_token + 1,
                 lease_expires_at = $2, attempts = attempts + 1, updated_at = $3
             WHERE key IN (SELECT key FROM notice_sends
                           WHERE (state = 'pending' AND ready_at <= $3)
                              OR (state = 'sending' AND lease_expires_at <= $3)
                           ORDER BY ready_at, key LIMIT CAST($4 AS INTEGER))
             RETURNING *",
    postgres: "UPDATE notice_sends
               SET state = 'sending', lease_owner = $1, lease_token = lease_token + 1,
                   lease_expires_at = $2, attempts = attempts + 1, updated_at = $3
               WHERE key IN (SELECT key FROM notice_sends
                             WHERE (state = 'pending' AND ready_at <= $3)
                                OR (state = 'sending' AND lease_expires_at <= $3)
                             ORDER BY ready_at, key LIMIT $4 FOR UPDATE SKIP LOCKED)
               RETURNING *",
};

/// The end of leased send `$1` (token `$2`): state `$3`, due again at `$4`, at `$7`.
const SETTLE: &str = "UPDATE notice_sends
     SET state = $3, ready_at = $4, last_class = $5, last_error = $6,
         lease_owner = NULL, lease_expires_at = NULL, updated_at = $7
     WHERE key = $1 AND lease_token = $2 AND state = 'sending'";

/// Leased send `$1` (token `$2`) back to pending, due at `$3`, at `$4`: its claim counted an
/// attempt that was not made.
const DEFER: &str = "UPDATE notice_sends
     SET state = 'pending', ready_at = $3, attempts = attempts - 1,
         lease_owner = NULL, lease_expires_at = NULL, updated_at = $4
     WHERE key = $1 AND lease_token = $2 AND state = 'sending'";

const INSERT_ATTEMPT: &str =
    "INSERT INTO notice_attempts (send_key, attempt, at, class, code, reason)
     VALUES ($1, $2, $3, $4, $5, $6)";

/// Messages made before `$1` whose sends are all finished go, with their sends and attempts;
/// then the notices told before it.
const FORGET_MESSAGES: &str = sql!(
    "DELETE FROM notice_messages WHERE created_at < $1
     AND NOT EXISTS (SELECT 1 FROM notice_sends s WHERE s.message = notice_messages.key
                     AND s.state IN (",
    super::states::DELIVERIES_UNFINISHED,
    "))"
);
const FORGET_NOTICES: &str = "DELETE FROM notices WHERE noticed_at < $1 AND message IS NOT NULL";

/// The waiting notices by report and cause; a late notice is a batch of its own.
fn batches(waiting: &[NoticeRow]) -> Vec<Vec<&NoticeRow>> {
    let mut out: Vec<Vec<&NoticeRow>> = Vec::new();
    let mut quarantined: std::collections::BTreeMap<&str, Vec<&NoticeRow>> = Default::default();
    for n in waiting {
        match n.cause {
            Cause::Late | Cause::Suppressed => out.push(vec![n]),
            Cause::Quarantined => quarantined.entry(&n.report).or_default().push(n),
        }
    }
    out.extend(quarantined.into_values());
    out
}

/// Inserts message `key` (of `report`, for `cause`, window start and place) and one send per
/// owner.
async fn insert_message(
    tx: &mut super::backend::tx::Tx,
    (key, report, cause, (window, seq)): (&str, &str, Cause, (DateTime<Utc>, i64)),
    words: &Composed,
    owners: &[(DestinationKind, String)],
    now: DateTime<Utc>,
) -> Result<()> {
    let st = Statement::new(INSERT_MESSAGE)
        .bind(key)
        .bind(report)
        .bind(cause.as_str())
        .bind(to_millis(window))
        .bind(seq)
        .bind(words.subject.as_str())
        .bind(words.body.as_str())
        .bind(words.webhook_body.as_str())
        .bind(to_millis(now));
    tx.execute(&st).await?;
    for (kind, destination) in owners {
        let send_key = match crate::delivery::of(*kind) {
            Some(d) => d.notice_send(key, destination),
            None => format!("{key}/{kind}:{destination}"),
        };
        let st = Statement::new(INSERT_SEND)
            .bind(send_key.as_str())
            .bind(key)
            .bind(kind.as_str())
            .bind(destination.as_str())
            .bind(to_millis(now));
        tx.execute(&st).await?;
    }
    Ok(())
}

/// A send's update found no row: its lease (token) no longer holds.
fn lease_lost(send: &NoticeSend) -> LedgerError {
    LedgerError::LeaseLost {
        key: send.key.as_str().to_string(),
        token: send.lease_token,
    }
}

impl Notices<'_> {
    /// Records the notices not recorded yet (by key: one per job and cause); how many were new.
    pub(crate) async fn insert_many(
        self,
        notices: &[NewNotice],
        now: DateTime<Utc>,
    ) -> Result<u64> {
        self.within(async |tx| {
            let mut new = 0;
            for n in notices {
                let key = n.key.clone().unwrap_or_else(|| n.cause.key(&n.job));
                let st = Statement::new(INSERT_NOTICE)
                    .bind(key.as_str())
                    .bind(n.report.as_str())
                    .bind(&n.job)
                    .bind(n.cause.as_str())
                    .bind(n.detail.as_str())
                    .bind(to_millis(now));
                new += tx.execute(&st).await?;
            }
            Ok(new)
        })
        .await
    }

    /// The jobs that entered `quarantined` after `since`: (key, report, why).
    pub(crate) async fn quarantined_since(
        self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(JobKey, String, Option<String>)>> {
        let sql = "SELECT key, report, last_error FROM jobs
                   WHERE terminal_at > $1 AND state = 'quarantined' ORDER BY terminal_at, key";
        let rows: Vec<(String, String, Option<String>)> = on_backend!(self, |p, _d| {
            sqlx::query_as(sql)
                .bind(to_millis(since))
                .fetch_all(p)
                .await?
        });
        rows.into_iter()
            .map(|(key, report, why)| {
                let key = key
                    .parse()
                    .map_err(|_| LedgerError::Corrupt(format!("job key {key:?}")))?;
                Ok((key, report, why))
            })
            .collect()
    }

    /// Puts every waiting notice in a message, under one lock across nodes: each late notice
    /// in its own, at once; a report's quarantines batched (`notice::next_batch`). `address`
    /// gives a batch's words and owners (`None`: nobody to tell, and the notices are closed).
    /// How many messages were made.
    pub(crate) async fn make_messages(
        self,
        now: DateTime<Utc>,
        address: &Addresser<'_>,
    ) -> Result<u64> {
        self.within(async |tx| {
            tx.lock_notices().await?;
            let waiting: Vec<NoticeRow> = tx
                .fetch_all::<NoticeRecord>(&Statement::new(WAITING))
                .await?
                .into_iter()
                .map(NoticeRow::try_from)
                .collect::<Result<_>>()?;
            let mut made = 0;
            for batch in batches(&waiting) {
                let (report, cause) = (batch[0].report.as_str(), batch[0].cause);
                let (window, seq) = match cause {
                    Cause::Late | Cause::Suppressed => (now, 1),
                    Cause::Quarantined => {
                        let st = Statement::new(NEWEST_WINDOW).bind(report);
                        let newest = tx.fetch_optional::<(i64, i64)>(&st).await?;
                        let newest = newest.map(|(w, s)| (from_millis(w), s));
                        match crate::delivery::notice::next_batch(newest, batch[0].noticed_at, now)
                        {
                            Some(next) => next,
                            None => continue,
                        }
                    }
                };
                let key = match cause {
                    Cause::Late | Cause::Suppressed => batch[0].key.clone(),
                    Cause::Quarantined => {
                        crate::delivery::notice::quarantine_message_key(report, window, seq)
                    }
                };
                let items: Vec<Item> = (batch.iter())
                    .map(|n| Item {
                        job: n.job.clone(),
                        detail: n.detail.clone(),
                    })
                    .collect();
                let told = match address(report, cause, &items, &key) {
                    None => NOBODY.to_string(),
                    Some((words, owners)) => {
                        let message = (key.as_str(), report, cause, (window, seq));
                        insert_message(tx, message, &words, &owners, now).await?;
                        made += 1;
                        key
                    }
                };
                for n in batch {
                    let st = Statement::new(TOLD)
                        .bind(told.as_str())
                        .bind(n.key.as_str());
                    tx.execute(&st).await?;
                }
            }
            Ok(made)
        })
        .await
    }

    /// Leases up to `limit` due sends for `owner` until `until`.
    pub(crate) async fn claim(
        self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<NoticeSend>> {
        let recs: Vec<SendRecord> = on_backend!(self, |p, d| {
            sqlx::query_as(d::pick(CLAIM))
                .bind(owner)
                .bind(to_millis(until))
                .bind(to_millis(now))
                .bind(i64::from(limit))
                .fetch_all(p)
                .await?
        });
        recs.into_iter().map(NoticeSend::try_from).collect()
    }

    /// The words of message `key`.
    pub(crate) async fn message(self, key: &str) -> Result<Option<NoticeMessage>> {
        let sql =
            "SELECT key, report, subject, body, webhook_body FROM notice_messages WHERE key = $1";
        Ok(on_backend!(self, |p, _d| {
            sqlx::query_as(sql).bind(key).fetch_optional(p).await?
        }))
    }

    /// Records an attempt of leased send `send` and what follows it, in one transaction;
    /// refused ([`LedgerError::LeaseLost`]) when the lease no longer holds.
    pub(crate) async fn attempted(
        self,
        send: &NoticeSend,
        attempt: &NoticeAttempt,
        next: &SendNext,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let (state, ready_at) = match next {
            SendNext::Sent => ("sent", now),
            SendNext::Retry { at } => ("pending", *at),
            SendNext::Quarantine => ("quarantined", now),
        };
        let key = send.key.as_str();
        let settle = Statement::new(SETTLE)
            .bind(key)
            .bind(send.lease_token)
            .bind(state)
            .bind(to_millis(ready_at))
            .bind(attempt.class.as_str())
            .bind(attempt.reason.as_str())
            .bind(to_millis(now));
        let record = Statement::new(INSERT_ATTEMPT)
            .bind(key)
            .bind(send.attempts)
            .bind(to_millis(now))
            .bind(attempt.class.as_str())
            .bind(attempt.code)
            .bind(attempt.reason.as_str());
        self.within(async |tx| {
            if tx.execute(&settle).await? != 1 {
                return Err(lease_lost(send));
            }
            tx.execute(&record).await.map(|_| ())
        })
        .await
    }

    /// Puts leased send `send` back, due at `until`, without counting an attempt (nothing was
    /// sent: its host's `[[rate_limit]]` had no send left); refused
    /// ([`LedgerError::LeaseLost`]) when the lease no longer holds.
    pub(crate) async fn defer(
        self,
        send: &NoticeSend,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let key = send.key.as_str();
        let defer = Statement::new(DEFER)
            .bind(key)
            .bind(send.lease_token)
            .bind(to_millis(until))
            .bind(to_millis(now));
        self.within(async |tx| match tx.execute(&defer).await? {
            1 => Ok(()),
            _ => Err(lease_lost(send)),
        })
        .await
    }

    /// The notices of job `job`'s report and date, oldest first.
    pub(crate) async fn of_job(self, job: &JobKey) -> Result<Vec<NoticeRow>> {
        let sql = "SELECT * FROM notices WHERE job_key = $1 ORDER BY noticed_at, key";
        self.select::<NoticeRecord, _, _>(sql, job).await
    }

    /// The sends of message `message`, by key.
    pub async fn sends_of(self, message: &str) -> Result<Vec<NoticeSend>> {
        let sql = "SELECT * FROM notice_sends WHERE message = $1 ORDER BY key";
        self.select::<SendRecord, _, _>(sql, message).await
    }

    /// Forgets finished messages and told notices older than `before`; how many messages went.
    pub(crate) async fn forget(self, before: DateTime<Utc>) -> Result<u64> {
        let at = to_millis(before);
        self.within(async |tx| {
            let gone = tx
                .execute(&Statement::new(FORGET_MESSAGES).bind(at))
                .await?;
            tx.execute(&Statement::new(FORGET_NOTICES).bind(at)).await?;
            Ok(gone)
        })
        .await
    }
}
