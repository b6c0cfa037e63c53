//! A test send: one report rendered for a date, as its job would be, and emailed to one address
//! an operator typed, its subject led by `[test]`. Audited (who, through what, when, what the
//! relay answered); no job, delivery, recipient list, suppression or send decision counts it,
//! and an address suppressed for the report is refused.

use chrono::{DateTime, NaiveDate, Utc};

use std::sync::Arc;

use crate::config::{Config, EmailSettings, Report};
use crate::delivery::email::message;
use crate::domain::keys::{DeliveryKey, IsoDate};
use crate::domain::outcome::ResponseClass;
use crate::domain::redact::redact_address;
use crate::ledger::{Audit, Ledger, NewTestSend};
use crate::report::render::Templates;
use crate::report::schedule::Fire;

/// What an operator asked for: report `report` of `date` (default: today in its timezone) to
/// `to`.
#[derive(Debug, Clone)]
pub struct TestSendRequest<'a> {
    pub report: &'a str,
    pub to: &'a str,
    pub date: Option<NaiveDate>,
}

/// Why a test send was not made or did not arrive; each names the report.
#[derive(Debug, thiserror::Error)]
pub enum TestSendError {
    #[error("no report {0:?} in the configuration")]
    NoReport(String),
    #[error("{0:?} is not an email address")]
    Address(String),
    #[error("report {report}: {address} is suppressed ({why}): a test is not sent to it")]
    Suppressed {
        report: String,
        address: String,
        why: String,
    },
    #[error("report {report}: {reason}")]
    Failed { report: String, reason: String },
    #[error("cannot send a test: {0}")]
    Setup(String),
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
}

/// What a test send came to: the message's date, where it went (the address shown in part)
/// and what the relay said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSent {
    pub date: NaiveDate,
    pub to: String,
    pub answer: String,
}

/// What a test send needs of the configuration, built once (a node's console keeps one): the
/// email settings and transport, an HTTP client for sources, the bound of a render and where a
/// report's link points.
#[derive(Clone)]
pub struct TestSender {
    email: Arc<EmailSettings>,
    sender: crate::delivery::email::EmailSender,
    http: reqwest::Client,
    deadline: std::time::Duration,
    links: Option<crate::delivery::links::Links>,
}

impl std::fmt::Debug for TestSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestSender")
    }
}

impl TestSender {
    pub fn new(config: &Config) -> Result<TestSender, TestSendError> {
        let s = &config.settings;
        let ca = s.tls.ca.as_deref();
        let sender =
            crate::delivery::email::EmailSender::from_settings(&s.email, ca, &config.root, 1)
                .map_err(|e| TestSendError::Setup(e.to_string()))?;
        let http = crate::report::source::http_client(ca)
            .map_err(|e| TestSendError::Setup(e.to_string()))?;
        let links = crate::delivery::links::Links::from_settings(&s.server)
            .map_err(|e| TestSendError::Setup(e.to_string()))?;
        Ok(TestSender {
            email: Arc::new(s.email.clone()),
            sender,
            http,
            deadline: s.pool.lease.as_std(),
            links,
        })
    }

    /// Renders `report` with `templates` and sends test `req` at `now`, asked for under
    /// `audit`, and records it in `ledger`.
    pub async fn send(
        &self,
        (report, templates): (&Report, Option<&Templates>),
        ledger: &Ledger,
        req: &TestSendRequest<'_>,
        audit: &Audit<'_>,
        now: DateTime<Utc>,
    ) -> Result<TestSent, TestSendError> {
        let name = report.id.to_string();
        let failed = |reason: String| TestSendError::Failed {
            report: name.clone(),
            reason,
        };
        let address: lettre::Address = (req.to.trim().parse())
            .map_err(|_| TestSendError::Address(redact_address(req.to.trim())))?;
        let shown = redact_address(address.as_ref());
        if let Some(s) = ledger
            .recipients()
            .suppressed(address.as_ref(), &name)
            .await?
        {
            return Err(TestSendError::Suppressed {
                report: name,
                address: shown,
                why: s.why,
            });
        }
        let date = (req.date).unwrap_or_else(|| now.with_timezone(&report.timezone()).date_naive());
        let fire = Fire::for_date(report, date)
            .ok_or_else(|| failed(format!("{date} has no window in its timezone")))?;
        let templates = templates
            .ok_or_else(|| failed(format!("template {:?} is not loaded", report.template)))?;
        let kit = super::preview::RenderKit {
            templates,
            http: &self.http,
            deadline: self.deadline,
            links: self.links.clone(),
        };
        let rendered = super::preview::render_with(&kit, report, &fire, now)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let built = self
            .message(report, &fire, &address, &rendered, now)
            .map_err(failed)?;
        let key = test_key(&fire, &address, now);
        let deadline =
            (self.email.timeout.as_std()).saturating_add(std::time::Duration::from_secs(5));
        let send = self.sender.send(&built, &key, address.as_ref());
        let outcome = match tokio::time::timeout(deadline, send).await {
            Ok(outcome) => outcome,
            Err(_) => crate::delivery::Outcome::new(
                ResponseClass::Ambiguous,
                None,
                "no answer within the email timeout",
            ),
        };
        let day = IsoDate(date).to_string();
        let record = NewTestSend {
            report: &name,
            date: &day,
            address: address.as_ref(),
            outcome: outcome.class.as_str(),
            detail: &outcome.reason,
            at: now,
        };
        ledger.recipients().test_sent(&record, audit).await?;
        match outcome.class {
            ResponseClass::Accepted => Ok(TestSent {
                date,
                to: shown,
                answer: outcome.reason,
            }),
            _ => Err(failed(format!(
                "the test to {shown} was not accepted: {}",
                outcome.reason
            ))),
        }
    }

    /// The test's email: the report's, its subject led by `[test]`, without list headers that
    /// would unsubscribe a recipient.
    fn message(
        &self,
        report: &Report,
        fire: &Fire,
        address: &lettre::Address,
        rendered: &crate::report::render::Rendered,
        now: DateTime<Utc>,
    ) -> Result<lettre::Message, String> {
        let subject = message::subject_of(&report.title, &fire.key, rendered);
        let list = message::ListHeaders {
            report: report.id.as_str(),
            domain: self.email.list_domain(),
            reply_to: self.email.reply_to.as_ref(),
            unsubscribe: None,
            one_click: None,
            attach: report.attach,
        };
        let key = test_key(fire, address, now);
        let subject = format!("[test] {subject}");
        message::build_message(
            &self.email.from,
            address,
            &subject,
            &key,
            now.into(),
            rendered,
            &list,
        )
        .map_err(|e| format!("cannot build the email: {e}"))
    }
}

/// The key a test's email carries (its Message-ID and `X-Dawnpost-Delivery`): of its own, so a
/// test is never taken for the job's real delivery, nor one test for another.
fn test_key(fire: &Fire, address: &lettre::Address, now: DateTime<Utc>) -> DeliveryKey {
    let stamp = crate::domain::clock::to_millis(now);
    let kind = crate::delivery::email::KIND;
    DeliveryKey::new(fire.key.clone(), kind, format!("{address}#test-{stamp}"))
}
