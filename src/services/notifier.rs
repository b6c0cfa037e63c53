//! The notifier: tells a report's owners (`owners`, `owner_webhook`) when its work is late or
//! quarantined, once per job and cause, through the same transports and retry policy as the
//! deliveries, each send leased and every attempt recorded (`ledger/notices.rs`). Every
//! `services.notify_every` (and at once when the daemon starts, so a deadline that passed
//! while it was down is told within a round), a round:
//!
//! 1. judges every fire whose `deliver_by` passed in the last two days (`notice::expected`,
//!    from the schedule: a fire that never became a job is late too) against its job, records
//!    a `late` notice for each late one, and publishes the reports late now (the
//!    `dawnpost_report_late` series and the console's overview, through [`LateBoard`]);
//! 2. records a `quarantined` notice for each job quarantined since the last round;
//! 3. puts waiting notices in messages (`notice::next_batch` batches a report's quarantines);
//! 4. sends the due sends, each classified and retried by `delivery::retry`; a send whose host's
//!    `[[rate_limit]]` has no send left waits, unattempted, until it has (in the daemon the
//!    pool's limits: the owners' sends and the reports' count against one budget per host).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Report};
use crate::delivery::destination::{Build, Notice, Senders};
use crate::delivery::notice::{Cause, Expected, Item, LateBoard, LateReport, Standing};
use crate::delivery::retry::{Decision, RetryPolicy};
use crate::delivery::{DeliverError, Outcome, SendTarget};
use crate::domain::clock::SharedClock;
use crate::domain::keys::JobKey;
use crate::domain::outcome::ResponseClass;
use crate::ledger::{Addressed, SendNext};
use crate::ledger::{Ledger, LedgerError, NewNotice, NoticeAttempt, NoticeMessage, NoticeSend};
use crate::pool::limits::RateLimits;
use crate::pool::throttle::HostThrottle;
use crate::report::catalog::{Catalog, Reports};
use crate::runtime::metrics::Metrics;

/// Sends leased at a time; a round takes at most [`MAX_CLAIMS`] such claims.
const CLAIM: u32 = 32;
const MAX_CLAIMS: usize = 20;
/// Sends of one claim in flight together.
const IN_FLIGHT: usize = 8;
/// A quarantine recorded this long before the last round's start is looked at again (a job
/// whose transaction committed after that round read).
const SLACK: chrono::Duration = chrono::Duration::minutes(5);
/// Messages and notices are forgotten this long after (longer than `notice::LOOKBACK`, so a
/// fire is never judged again once forgotten).
const KEEP: chrono::Duration = chrono::Duration::days(8);

/// Why the notifier could not be built.
#[derive(Debug, thiserror::Error)]
pub enum NotifierError {
    #[error(transparent)]
    Transport(#[from] DeliverError),
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundCounts {
    /// Reports late now.
    pub late: usize,
    /// Notices recorded this round (not recorded before).
    pub noticed: u64,
    pub messages: u64,
    pub sent: u64,
    pub retried: u64,
    pub quarantined: u64,
    /// Sends put back unattempted: their host was paused by a 429, or its `[[rate_limit]]`
    /// had no send left.
    pub deferred: u64,
}

/// The round-to-round memory of one notifier.
#[derive(Debug, Default)]
struct Memory {
    /// Fires judged for good (done by their deadline, or told late and delivered since).
    settled: HashSet<JobKey>,
    /// Quarantines after this were not looked at yet.
    quarantined_since: Option<DateTime<Utc>>,
    last_forget: Option<DateTime<Utc>>,
}

/// The owners' notifier of one node.
pub struct Notifier {
    ledger: Ledger,
    catalog: Catalog,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    board: LateBoard,
    /// Each destination kind's sender (one SMTP pool of its own).
    senders: Senders,
    policy: RetryPolicy,
    /// `[[rate_limit]]`, by send target.
    limits: Arc<RateLimits>,
    /// Hosts paused by a rate-limited reply (the pool's, in the daemon).
    throttle: Arc<HostThrottle>,
    public_url: Option<url::Url>,
    owner: String,
    /// How long a send's lease lasts: longer than either transport's timeout.
    lease_for: chrono::Duration,
    every: Duration,
    memory: Mutex<Memory>,
}

impl Notifier {
    /// Its transports from `config` (one SMTP pool of its own); the reports from `catalog`.
    pub fn new(
        config: &Config,
        (ledger, catalog, clock): (Ledger, Catalog, SharedClock),
        metrics: Arc<Metrics>,
        board: LateBoard,
    ) -> Result<Notifier, NotifierError> {
        let s = &config.settings;
        let ca = s.tls.ca.as_deref();
        let longest = crate::delivery::longest_timeout(s);
        Ok(Notifier {
            senders: Senders::build(&Build::new(config, ca, IN_FLIGHT as u32)?)?,
            policy: RetryPolicy::from(&s.retry),
            limits: Arc::new(RateLimits::new(
                &s.rate_limits,
                &s.email.smtp_url,
                clock.clone(),
            )),
            throttle: Arc::default(),
            public_url: s.server.public_url.clone(),
            owner: crate::pool::default_owner(),
            lease_for: chrono::Duration::from_std(longest + Duration::from_secs(60))
                .unwrap_or(chrono::Duration::minutes(5)),
            every: s.services.notify_every.as_std(),
            memory: Mutex::default(),
            ledger,
            catalog,
            clock,
            metrics,
            board,
        })
    }

    /// Counts its sends against `limits` (the pool's, in the daemon) instead of its own.
    pub fn with_limits(mut self, limits: Arc<RateLimits>) -> Notifier {
        self.limits = limits;
        self
    }

    /// Shares `throttle`'s paused hosts (the pool's, in the daemon): a notice to a host a 429
    /// paused waits for the pause's end, unattempted, and a 429 to a notice pauses the host
    /// for the pool's deliveries too.
    pub fn with_throttle(mut self, throttle: Arc<HostThrottle>) -> Notifier {
        self.throttle = throttle;
        self
    }

    /// A round every `services.notify_every`, the first at once, until `cancel`.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        crate::runtime::periodic::every(self.every, crate::runtime::periodic::Start::Now, &cancel, || async {
            if let Err(e) = self.run_once().await {
                tracing::warn!(error = %crate::domain::words::error_chain(&e), "owners' notices: round failed");
            }
        })
        .await;
    }

    /// One round (the module's docs): judge, notice, batch, send.
    pub async fn run_once(&self) -> Result<RoundCounts, LedgerError> {
        let now = self.clock.now();
        let reports = self.catalog.current();
        let mut counts = RoundCounts::default();
        let (late, notices) = self.judge_deadlines(&reports, now).await?;
        counts.late = late.len();
        let quarantined = self.quarantines(&reports, now).await?;
        counts.noticed = (self.ledger)
            .notices()
            .insert_many(&[notices, quarantined].concat(), now)
            .await?;
        let public_url = self.public_url.as_ref();
        let address = |report: &str, cause: Cause, items: &[Item], key: &str| {
            let r = reports.by_id.get(report)?;
            addressed(r, cause, items, key, public_url)
        };
        counts.messages = self.ledger.notices().make_messages(now, &address).await?;
        let sent = self.send_due(&mut counts).await;
        // Published once the round's sends are done: a late report seen means its owners were
        // told (or their send is due again).
        self.publish(late);
        sent?;
        self.forget(now).await?;
        Ok(counts)
    }

    /// The reports late now, and a `late` notice for each late fire of a report with owners.
    async fn judge_deadlines(
        &self,
        reports: &Reports,
        now: DateTime<Utc>,
    ) -> Result<(Vec<LateReport>, Vec<NewNotice>), LedgerError> {
        let expected: Vec<(Expected, &Arc<Report>)> = {
            let memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            crate::delivery::notice::expected(reports.list.iter(), now)
                .into_iter()
                .filter(|e| !memory.settled.contains(&e.key))
                .filter_map(|e| Some((e.clone(), reports.by_id.get(e.key.report().as_str())?)))
                // A report a reload added is not expected to have fired before it came.
                .filter(|(e, r)| {
                    (reports.added_at.get(r.id.as_str())).is_none_or(|t| e.fire_at > *t)
                })
                .collect()
        };
        let keys: Vec<&JobKey> = expected.iter().map(|(e, _)| &e.key).collect();
        let jobs: HashMap<JobKey, crate::ledger::Job> =
            (self.ledger.jobs().get_many(&keys).await?)
                .into_iter()
                .map(|j| (j.key.clone(), j))
                .collect();
        let (mut late, mut notices, mut settled) = (Vec::new(), Vec::new(), Vec::new());
        for (e, report) in expected {
            let standing = jobs.get(&e.key).map(|j| Standing {
                state: j.state.as_str(),
                terminal_at: j.terminal_at,
                last_error: j.last_error.as_deref(),
            });
            let Some(lateness) = crate::delivery::notice::judge(&e, standing, report.timezone())
            else {
                settled.push(e.key);
                continue;
            };
            if report.owners.notified() {
                notices.push(NewNotice {
                    report: report.id.to_string(),
                    job: e.key.clone(),
                    cause: Cause::Late,
                    detail: lateness.detail.clone(),
                    key: None,
                });
            }
            match lateness.missing {
                true => late.push(LateReport {
                    key: e.key,
                    deadline: e.deadline,
                    detail: lateness.detail,
                }),
                // Told (the notice above), and delivered since: nothing more to judge.
                false => settled.push(e.key),
            }
        }
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        // Older fires are no longer expected (`notice::expected`): forget them.
        let oldest =
            crate::domain::clock::sub(now, crate::delivery::notice::LOOKBACK * 2).date_naive();
        memory.settled.retain(|k| k.date() >= oldest);
        memory.settled.extend(settled);
        late.sort_by(|a, b| (a.deadline, &a.key).cmp(&(b.deadline, &b.key)));
        Ok((late, notices))
    }

    /// A `quarantined` notice for each job of a report with owners quarantined since the last
    /// round (since [`crate::delivery::notice::LOOKBACK`] at the first).
    async fn quarantines(
        &self,
        reports: &Reports,
        now: DateTime<Utc>,
    ) -> Result<Vec<NewNotice>, LedgerError> {
        let since = {
            let memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            (memory.quarantined_since)
                .map(|t| crate::domain::clock::sub(t, SLACK))
                .unwrap_or_else(|| {
                    crate::domain::clock::sub(now, crate::delivery::notice::LOOKBACK)
                })
        };
        let jobs = self.ledger.notices().quarantined_since(since).await?;
        self.memory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .quarantined_since = Some(now);
        Ok(jobs
            .into_iter()
            .filter(|(_, report, _)| {
                reports
                    .by_id
                    .get(report)
                    .is_some_and(|r| r.owners.notified())
            })
            .map(|(job, report, why)| NewNotice {
                report,
                job,
                cause: Cause::Quarantined,
                detail: why.unwrap_or_else(|| "quarantined".into()),
                key: None,
            })
            .collect())
    }

    /// The reports late now: `/metrics` and the console's overview.
    fn publish(&self, late: Vec<LateReport>) {
        let series: Vec<(String, String)> = late
            .iter()
            .map(|l| {
                (
                    l.key.report().to_string(),
                    crate::domain::keys::IsoDate(l.key.date()).to_string(),
                )
            })
            .collect();
        self.metrics.set_late(&series);
        self.board.set(late);
    }

    /// Sends what is due, a claim at a time.
    async fn send_due(&self, counts: &mut RoundCounts) -> Result<(), LedgerError> {
        let mut words: HashMap<String, Option<NoticeMessage>> = HashMap::new();
        for _ in 0..MAX_CLAIMS {
            let now = self.clock.now();
            let until = crate::domain::clock::add(now, self.lease_for);
            let sends = self
                .ledger
                .notices()
                .claim(&self.owner, now, until, CLAIM)
                .await?;
            if sends.is_empty() {
                return Ok(());
            }
            for send in &sends {
                if !words.contains_key(&send.message) {
                    let message = self.ledger.notices().message(&send.message).await?;
                    words.insert(send.message.clone(), message);
                }
            }
            for chunk in sends.chunks(IN_FLIGHT) {
                let tries = chunk
                    .iter()
                    .map(|s| self.send_one(s, words.get(&s.message)));
                for next in futures_util::future::join_all(tries).await {
                    match next {
                        Ok(None) => counts.deferred += 1,
                        Ok(Some(SendNext::Sent)) => counts.sent += 1,
                        Ok(Some(SendNext::Retry { .. })) => counts.retried += 1,
                        Ok(Some(SendNext::Quarantine)) => counts.quarantined += 1,
                        Err(LedgerError::LeaseLost { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(())
    }

    /// One attempt of `send`, recorded with what follows it; `None` when its host's rate
    /// limit had no send left and it went back unattempted.
    async fn send_one(
        &self,
        send: &NoticeSend,
        message: Option<&Option<NoticeMessage>>,
    ) -> Result<Option<SendNext>, LedgerError> {
        let target = self.limits.target_to(send.kind, &send.destination);
        let outcome = match message {
            Some(Some(m)) => {
                if self.deferred(send, &target).await? {
                    return Ok(None);
                }
                self.transmit(send, m).await
            }
            _ => Outcome::new(ResponseClass::Permanent, None, "its message is gone"),
        };
        let now = self.clock.now();
        let attempt = u32::try_from(send.attempts).unwrap_or(u32::MAX);
        let decision = (self.policy).decide(
            now,
            send.created_at,
            attempt,
            outcome.class,
            outcome.retry_after,
            crate::pool::jitter(),
        );
        self.throttle_on(&target, &outcome, &decision, now);
        let next = match decision {
            Decision::Sent => SendNext::Sent,
            Decision::Retry { at, .. } => SendNext::Retry { at },
            Decision::Quarantine { .. } => SendNext::Quarantine,
        };
        let record = NoticeAttempt {
            class: outcome.class.as_str().to_string(),
            code: outcome.code,
            reason: outcome.reason.clone(),
        };
        self.ledger
            .notices()
            .attempted(send, &record, &next, now)
            .await?;
        let outcome_name = match next {
            SendNext::Sent => "sent",
            SendNext::Retry { .. } => "retry",
            SendNext::Quarantine => "quarantined",
        };
        self.metrics.owner_notice(outcome_name);
        let to = crate::domain::redact::redact_destination(&send.destination);
        tracing::info!(message = %send.message, to = %to, attempt, outcome = outcome_name, reason = %outcome.reason, "owners' notice");
        Ok(Some(next))
    }

    /// Whether `send` went back, unattempted, to wait for its host: paused by a 429 (see
    /// [`HostThrottle`]) or out of its rate limit's sends (see [`RateLimits::take`]).
    async fn deferred(&self, send: &NoticeSend, target: &SendTarget) -> Result<bool, LedgerError> {
        let now = self.clock.now();
        let (until, why) = match self.throttle.paused_until(target.as_str(), now) {
            Some(until) => (until, "its host's pause after a 429"),
            None => match self.limits.take_or_defer(target, now, &self.metrics) {
                Some(until) => (until, "its host's rate limit"),
                None => return Ok(false),
            },
        };
        self.ledger.notices().defer(send, until, now).await?;
        tracing::debug!(message = %send.message, host = %target, until = %until, "owners' notice: waits for {why}");
        Ok(true)
    }

    /// What a reply tells the shared throttle: a 429 pauses the host as a delivery's would
    /// (see [`RetryPolicy::pause_until`]), an accepted notice ends a pause. Other outcomes
    /// leave it as it is: some never reached the host (a message gone, a secret unset).
    fn throttle_on(
        &self,
        target: &SendTarget,
        outcome: &Outcome,
        decision: &Decision,
        now: DateTime<Utc>,
    ) {
        match outcome.class {
            ResponseClass::RateLimited => {
                let until = (self.policy).pause_until(now, outcome.retry_after, decision);
                self.throttle.pause(target.as_str(), until);
            }
            ResponseClass::Accepted => self.throttle.clear(target.as_str()),
            _ => {}
        }
    }

    /// Hands `send` of message `m` to its kind's sender.
    async fn transmit(&self, send: &NoticeSend, m: &NoticeMessage) -> Outcome {
        let sender = match self.senders.of(send.kind) {
            Ok(sender) => sender,
            Err(outcome) => return outcome,
        };
        let report = self.catalog.current().by_id.get(&m.report).cloned();
        let notice = Notice {
            key: &send.key,
            message: &send.message,
            destination: &send.destination,
            owners: report.as_deref().map(|r| &r.owners),
            subject: &m.subject,
            body: &m.body,
            webhook_body: &m.webhook_body,
            now: self.clock.now(),
        };
        sender.notify(&notice).await
    }

    /// Forgets old messages and notices, once an hour.
    async fn forget(&self, now: DateTime<Utc>) -> Result<(), LedgerError> {
        let due = {
            let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            let due = (memory.last_forget)
                .is_none_or(|t| now >= crate::domain::clock::add(t, chrono::Duration::hours(1)));
            if due {
                memory.last_forget = Some(now);
            }
            due
        };
        if due {
            self.ledger
                .notices()
                .forget(crate::domain::clock::sub(now, KEEP))
                .await?;
        }
        Ok(())
    }
}

/// The words of a batch of `report`'s notices and its owners; `None` when it has none.
fn addressed(
    report: &Report,
    cause: Cause,
    items: &[Item],
    key: &str,
    public_url: Option<&url::Url>,
) -> Option<Addressed> {
    if !report.owners.notified() || items.is_empty() {
        return None;
    }
    let words = crate::delivery::notice::compose(report, cause, items, key, public_url);
    Some((words, crate::delivery::of_owners(&report.owners)))
}
