//! What `send_when = "changed"` and `"alert"` decided for each job of such a report: made once,
//! inside the transaction that records the job's render (its deliveries) or its skip, under a
//! lock on the report, so two nodes never decide two jobs of one report from the same state.

use chrono::{DateTime, Utc};

use super::backend::tx::{Arg, Statement, Tx};
use super::group_commit::{LeaseTo, rendered_in};
use super::handles::Decisions;
use super::{JobLease, LeasedDelivery, Render, Result};
use crate::domain::clock::{from_millis, to_millis};
use crate::domain::condition::{AlertState, Decision, Earlier, Facts, Rule, decide};
use crate::domain::keys::{IsoDate, JobKey};

/// A rendered job to decide: its lease, its artifact and deliveries when the render was made
/// for a send (`None` when the decision expected was a skip), and the decision expected (what
/// the render's alert marks say).
pub struct ToDecide<'a> {
    pub lease: &'a JobLease,
    pub render: Option<Render>,
    pub rule: &'a Rule,
    pub facts: &'a Facts,
    pub expected: &'a Decision,
    pub lease_to: Option<LeaseTo<'a>>,
    pub now: DateTime<Utc>,
}

/// What came of a decision.
#[derive(Debug)]
pub enum Decided {
    /// Recorded: sent (with the deliveries born leased) or skipped.
    Recorded(Decision, Vec<LeasedDelivery>),
    /// The report's state moved since the render read it: render again for this decision.
    Moved(Decision),
    /// An earlier job of the report (this key) is not decided yet: this one went back to the
    /// queue, due at the instant given, without counting the attempt, so the report's state
    /// follows its dates.
    Behind(String, DateTime<Utc>),
}

/// How long a job behind an earlier one of its report waits before it is tried again.
const BEHIND_WAIT: chrono::Duration = chrono::Duration::seconds(5);

/// A job's decision as `show`, the console and the API tell it.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRow {
    pub rule: String,
    pub event: String,
    pub sent: bool,
    pub words: String,
    pub value: Option<f64>,
    pub triggered: Option<bool>,
}

/// The decisions' columns, in order.
const INSERT: &str = "INSERT INTO send_decisions (job_key, report_id, local_date, revision, rule,
        event, sent, words, fingerprint, value, triggered, since_key, alerted_at, decided_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";

/// The last job of the report before a date that was sent and whose deliveries all arrived.
const DELIVERED: &str = "SELECT d.job_key, d.fingerprint FROM send_decisions d
     JOIN jobs j ON j.key = d.job_key
     WHERE d.report_id = $1 AND d.local_date < $2 AND d.sent = 1 AND j.state = 'done'
     ORDER BY d.local_date DESC, d.revision DESC LIMIT 1";

/// The alert's state after the report's latest decided job before a date.
const ALERT: &str = "SELECT triggered, since_key, alerted_at, value FROM send_decisions
     WHERE report_id = $1 AND local_date < $2 AND rule = 'alert' AND triggered IS NOT NULL
     ORDER BY local_date DESC, revision DESC LIMIT 1";

/// What the revision a reissue corrects decided.
const SUPERSEDED: &str = "SELECT sent, words FROM send_decisions
     WHERE report_id = $1 AND local_date = $2 AND revision < $3
     ORDER BY revision DESC LIMIT 1";

/// An earlier job of the report still to render (and so to decide).
const PENDING_BEFORE: &str = "SELECT key FROM jobs
     WHERE report = $1 AND local_date < $2 AND state IN ('ready', 'rendering', 'waiting')
     ORDER BY local_date LIMIT 1";

/// `rendering → ready` later, the attempt not counted: the job waits for an earlier one.
const DEFER: &str = "UPDATE jobs SET state = 'ready', attempts = attempts - 1, ready_at = $3,
        last_error = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = $5
     WHERE key = $1 AND lease_token = $2 AND state = 'rendering'";

const OF_JOB: &str = "SELECT rule, event, sent, words, value, triggered FROM send_decisions
     WHERE job_key = $1";

impl Decisions<'_> {
    /// What the report's jobs before `key`'s date decided: what a render reads to mark an
    /// alert, and what [`Decisions::record`] reads again under the report's lock.
    pub async fn earlier(self, key: &JobKey) -> Result<Earlier> {
        self.within(async |tx| earlier_in(tx, key).await).await
    }

    /// Decides `d`'s job and records the decision with its render or its skip, in one
    /// transaction; [`Decided::Moved`] (nothing recorded) when the decision differs from the
    /// one its render expected.
    pub async fn record(self, d: ToDecide<'_>) -> Result<Decided> {
        let key = d.lease.key().clone();
        self.within(async |tx| {
            lock_report(tx, key.report().as_str()).await?;
            if let Some(first) = pending_before(tx, &key).await? {
                let at = crate::domain::clock::add(d.now, BEHIND_WAIT);
                let why =
                    format!("waits for {first}, an earlier job of its report, to be decided first");
                let st = Statement::new(DEFER)
                    .bind(&key)
                    .bind(d.lease.token())
                    .bind(to_millis(at))
                    .bind(Some(why.as_str()))
                    .bind(to_millis(d.now));
                super::fenced(tx.execute(&st).await?, d.lease)?;
                return Ok(Decided::Behind(first, at));
            }
            let earlier = earlier_in(tx, &key).await?;
            let mut decision = decide(d.rule, d.facts, &earlier, &key.to_string(), d.now);
            if let Some(was) = superseded(tx, &key).await? {
                decision.words = format!(
                    "{}; revision {} was {was}",
                    decision.words,
                    key.revision() - 1
                );
            }
            let (same_send, same_words) = (
                decision.send == d.expected.send,
                same(&decision, d.expected),
            );
            if !same_send || !same_words || decision.send != d.render.is_some() {
                return Ok(Decided::Moved(decision));
            }
            let born = match d.render {
                Some(render) => {
                    let mut one =
                        rendered_in(tx, std::slice::from_ref(&render), d.lease_to, d.now).await?;
                    one.pop().unwrap_or(Ok(Vec::new()))?
                }
                None => {
                    skip_in(tx, d.lease, &decision.words, d.now).await?;
                    Vec::new()
                }
            };
            insert(tx, &key, d.rule, d.facts, &decision, d.now).await?;
            Ok(Decided::Recorded(decision, born))
        })
        .await
    }

    /// The decision recorded for job `key`, if its report decides.
    pub async fn of(self, key: &JobKey) -> Result<Option<DecisionRow>> {
        let st = Statement::new(OF_JOB).bind(key);
        let row = self
            .within(async |tx| {
                tx.fetch_optional::<(String, String, i64, String, Option<f64>, Option<i64>)>(&st)
                    .await
            })
            .await?;
        Ok(
            row.map(|(rule, event, sent, words, value, triggered)| DecisionRow {
                rule,
                event,
                sent: sent == 1,
                words,
                value,
                triggered: triggered.map(|t| t == 1),
            }),
        )
    }
}

/// Whether two decisions mark a render alike: the same event and words, but for the
/// superseded revision's words a reissue adds.
fn same(a: &Decision, b: &Decision) -> bool {
    let head = |d: &Decision| d.words.split("; revision ").next().map(str::to_string);
    a.event == b.event && head(a) == head(b)
}

/// Serialises the decisions of one report until the end of the transaction: PostgreSQL's
/// transaction-scoped advisory lock on the report's id; SQLite's write transaction already
/// excludes every other writer.
async fn lock_report(tx: &mut Tx, report: &str) -> Result<()> {
    if tx.postgres().is_none() {
        return Ok(());
    }
    let lock = Statement::new("SELECT pg_advisory_xact_lock(7243018, hashtext($1))").bind(report);
    tx.execute(&lock).await.map(|_| ())
}

async fn pending_before(tx: &mut Tx, key: &JobKey) -> Result<Option<String>> {
    let date = IsoDate(key.date()).to_string();
    let st = Statement::new(PENDING_BEFORE)
        .bind(key.report().as_str())
        .bind(date.as_str());
    Ok(tx.fetch_optional::<(String,)>(&st).await?.map(|(k,)| k))
}

async fn earlier_in(tx: &mut Tx, key: &JobKey) -> Result<Earlier> {
    let (report, date) = (key.report().as_str(), IsoDate(key.date()).to_string());
    let st = Statement::new(DELIVERED).bind(report).bind(date.as_str());
    let delivered = tx.fetch_optional::<(String, String)>(&st).await?;
    let st = Statement::new(ALERT).bind(report).bind(date.as_str());
    let alert = tx
        .fetch_optional::<(i64, Option<String>, Option<i64>, Option<f64>)>(&st)
        .await?
        .map(|(triggered, since, at, value)| AlertState {
            triggered: triggered == 1,
            since: since.unwrap_or_default(),
            alerted_at: at.map(from_millis),
            value,
        });
    Ok(Earlier { delivered, alert })
}

/// What the revision a reissue corrects decided, in words (`None` for a first revision or one
/// whose predecessor was not decided).
async fn superseded(tx: &mut Tx, key: &JobKey) -> Result<Option<String>> {
    if key.revision() == 1 {
        return Ok(None);
    }
    let (report, date) = (key.report().as_str(), IsoDate(key.date()).to_string());
    let st = Statement::new(SUPERSEDED)
        .bind(report)
        .bind(date.as_str())
        .bind(i64::from(key.revision()));
    let row = tx.fetch_optional::<(i64, String)>(&st).await?;
    Ok(row.map(|(sent, words)| {
        let verb = if sent == 1 { "sent" } else { "skipped" };
        let words = words
            .split("; revision ")
            .next()
            .unwrap_or_default()
            .to_string();
        format!("{verb}: {words}")
    }))
}

async fn skip_in(tx: &mut Tx, lease: &JobLease, why: &str, now: DateTime<Utc>) -> Result<()> {
    let st = Statement::new(super::jobs::RENDER_SKIP)
        .bind(lease.key())
        .bind(lease.token())
        .bind(Some(why))
        .bind(super::SKIPPED_FORMAT)
        .bind(to_millis(now));
    let n = tx.execute(&st).await?;
    super::fenced(n, lease)
}

async fn insert(
    tx: &mut Tx,
    key: &JobKey,
    rule: &Rule,
    facts: &Facts,
    d: &Decision,
    now: DateTime<Utc>,
) -> Result<()> {
    let alert = d.alert.as_ref();
    let st = Statement::new(INSERT)
        .bind(key)
        .bind(key.report().as_str())
        .bind(Arg::Text(IsoDate(key.date()).to_string().into()))
        .bind(i64::from(key.revision()))
        .bind(rule.as_str())
        .bind(d.event.as_str())
        .bind(i64::from(d.send))
        .bind(d.words.as_str())
        .bind(facts.fingerprint.as_str())
        .bind(facts.value)
        .bind(alert.map(|a| i64::from(a.triggered)))
        .bind(alert.map(|a| a.since.as_str()))
        .bind(alert.and_then(|a| a.alerted_at).map(to_millis))
        .bind(to_millis(now));
    tx.execute(&st).await.map(|_| ())
}
