//! The destination seam. A kind of destination (email, webhook, …) is a [`Destination`]: it
//! reads its keys of a report and of its owners from the configuration (the supertrait
//! [`DestinationConfig`], which the configuration knows it by), says where its sends go, how long
//! one may take, how an owners' notice's send is keyed, and builds the [`Sender`] that sends a
//! job's delivery (a [`Parcel`]) or an owners' [`Notice`]. Everything else — the pool, the
//! notifier, `check`, the console — asks the kinds registered in `delivery::KINDS` and names
//! none of them.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use super::{DeliverError, Outcome, SendTarget};
use crate::config::{Config, DestinationConfig, Owners, Report, Settings};
use crate::domain::keys::{DeliveryKey, DestinationKind, JobKey};
use crate::domain::window::Window;
use crate::report::artifact::ArtifactRef;
use crate::report::render::Rendered;
use crate::runtime::tls::CaBundle;

/// A future a [`Sender`] returns.
pub type Sending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One kind of destination.
pub trait Destination: DestinationConfig {
    /// Its destinations among a report's, in the order configured.
    fn of_report<'r>(&self, report: &'r Report) -> &'r [String] {
        report.destinations.to(self.kind())
    }

    /// Its destinations among a report's owners.
    fn of_owners<'r>(&self, owners: &'r Owners) -> &'r [String] {
        owners.destinations.to(self.kind())
    }

    /// Where sends to `destination` go: the name a 429 pauses and `[[rate_limit]]` counts by.
    /// `relay` is the SMTP relay's.
    fn send_target(&self, destination: &str, relay: &SendTarget) -> SendTarget;

    /// The most one send may take, its transport's own timeout.
    fn timeout(&self, settings: &Settings) -> std::time::Duration;

    /// Its sender, built once per pool (or notifier) from the configuration.
    fn sender(&self, build: &Build<'_>) -> Result<Box<dyn Sender>, DeliverError>;

    /// A destination of this kind as a person may read it: its kind and
    /// [`redact_destination`](crate::domain::redact::redact_destination)'s form.
    fn shown(&self, destination: &str) -> String {
        let redacted = crate::domain::redact::redact_destination(destination);
        format!("{} {redacted}", self.kind())
    }

    /// A send target of this kind that `reports` reports send to, as `check` lists it.
    fn target_shown(&self, target: &str, _reports: usize) -> String {
        format!("{} host {target}", self.kind())
    }

    /// The key of an owners' notice's send to `destination`, within message `message`.
    fn notice_send(&self, message: &str, destination: &str) -> String {
        format!("{message}/{}:{destination}", self.kind())
    }

    /// What `preview` shows of this kind for `report`, rendered as `rendered` for job `job`
    /// at `now`: what one destination of it would get. Asked only of a kind the report sends
    /// to; `None` when the kind shows nothing.
    fn preview(&self, _shown: &Shown<'_>) -> Result<Option<Preview>, String> {
        Ok(None)
    }

    /// The part this kind makes itself from the template context when a report's template has
    /// no `<template>.<part>.hbs` of its [`DestinationConfig::template_part`].
    fn default_part(&self) -> Option<crate::report::render::DefaultPart> {
        None
    }

    /// What follows an ambiguous attempt to `destination` of `report` (one that may have
    /// arrived): `None` for a kind whose sends carry a key its receivers recognise a second
    /// copy by (an email's Message-ID, a webhook's Idempotency-Key), which retries with it.
    fn on_ambiguous(&self, _report: &Report, _destination: &str) -> Option<OnAmbiguous> {
        None
    }

    /// The person `destination` reaches, as a suppression names them (an email address):
    /// a delivery to a suppressed recipient is not sent. `None` for a kind that reaches no one
    /// person.
    fn recipient(&self, _destination: &str) -> Option<String> {
        None
    }

    /// The rate its send targets keep when no `[[rate_limit]]` names them: a pattern of its
    /// targets, sends a second, and the burst.
    fn default_rate(&self) -> Option<(&'static str, f64, u32)> {
        None
    }

    /// Why a render of `report` cannot be sent to this kind at all (a message that is not what
    /// its service takes, a setting it needs missing): `check`'s errors.
    fn invalid(&self, _report: &Report, _rendered: &Rendered, _config: &Config) -> Vec<String> {
        Vec::new()
    }

    /// What `check` warns of a report of this kind whose sample renders as `rendered` (`parts`:
    /// its parts' sizes in words, and their total in bytes): a limit it passes.
    fn checked(
        &self,
        _rendered: &Rendered,
        _parts: &(String, u64),
        _config: &Config,
    ) -> Vec<String> {
        Vec::new()
    }
}

/// What follows an attempt that may have reached its receiver when the receiver cannot tell a
/// second copy (a chat post has no idempotency key): `on_ambiguous` of a chat destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnAmbiguous {
    /// Held for an operator, who checks whether it arrived and redrives it if not: never
    /// posted twice by a blind retry. The default.
    #[default]
    Quarantine,
    /// Retried as any transient failure: it may arrive twice.
    Retry,
}

impl OnAmbiguous {
    pub fn parse(text: &str) -> Option<OnAmbiguous> {
        match text {
            "quarantine" => Some(OnAmbiguous::Quarantine),
            "retry" => Some(OnAmbiguous::Retry),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OnAmbiguous::Quarantine => "quarantine",
            OnAmbiguous::Retry => "retry",
        }
    }
}

/// A report's render as `preview` shows it to a kind.
pub struct Shown<'a> {
    pub report: &'a Report,
    pub job: &'a JobKey,
    pub rendered: &'a Rendered,
    pub config: &'a Config,
    pub now: DateTime<Utc>,
}

/// What `preview` shows of one kind.
pub struct Preview {
    /// The message one destination gets, as a file: its extension and bytes.
    pub file: Option<(&'static str, Vec<u8>)>,
    /// Its size, in words (`email 12.3 KB encoded`).
    pub size: String,
    /// What a person should know before it goes out: a limit it passes.
    pub warnings: Vec<String>,
}

/// What a kind's [`Sender`] is built from.
pub struct Build<'a> {
    pub config: &'a Config,
    pub ca: Option<&'a CaBundle>,
    /// How many sends may be in flight at once (a connection pool's size).
    pub concurrency: u32,
    /// Links to reports too large to send (`[server] public_url`); none without it. Made once
    /// for every kind.
    pub links: Option<super::links::Links>,
}

impl<'a> Build<'a> {
    pub fn new(
        config: &'a Config,
        ca: Option<&'a CaBundle>,
        concurrency: u32,
    ) -> Result<Build<'a>, DeliverError> {
        let links = super::links::Links::from_settings(&config.settings.server)?;
        Ok(Build {
            config,
            ca,
            concurrency,
            links,
        })
    }
}

/// A kind's sender: its transport and the settings it sends with.
pub trait Sender: Send + Sync {
    /// Sends one delivery of `parcel` to `to`: builds what goes (a message that cannot be built
    /// is a permanent outcome), asks `confirm` whether the lease still holds, then calls the
    /// transport. `Err` only when `confirm` said no: nothing was sent.
    fn send<'a>(
        &'a self,
        parcel: &'a Parcel<'a>,
        to: &'a DeliveryKey,
        confirm: Confirm<'a>,
    ) -> Sending<'a, Result<Outcome, NotConfirmed>>;

    /// Sends an owners' notice.
    fn notify<'a>(&'a self, notice: &'a Notice<'a>) -> Sending<'a, Outcome>;
}

/// The lease check before a send: whether the send may start.
pub(crate) type Confirm<'a> = &'a (dyn Fn() -> Sending<'a, Result<(), NotConfirmed>> + Send + Sync);

/// The lease check said no: the send must not start.
#[derive(Debug)]
pub struct NotConfirmed;

/// One job's rendered report, as every kind's sends read it.
pub struct Parcel<'a> {
    pub job: &'a JobKey,
    pub window: &'a Window,
    /// The revision this one corrects, for a reissue.
    pub supersedes: Option<&'a JobKey>,
    pub report: &'a Report,
    pub artifact: &'a ArtifactRef,
    pub rendered: &'a Rendered,
    /// What a kind works out once for the job's deliveries leased together.
    pub memo: &'a Memo,
    pub now: DateTime<Utc>,
}

/// What a kind works out once for all of a job's deliveries leased together (a body encoded,
/// a message measured), kept by kind.
#[derive(Default)]
pub struct Memo(Mutex<Vec<(DestinationKind, Arc<dyn Any + Send + Sync>)>>);

impl Memo {
    /// `kind`'s value, made by `init` the first time it is asked for.
    pub fn get_or_init<T: Any + Send + Sync>(
        &self,
        kind: DestinationKind,
        init: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let found = held
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v.clone());
        if let Some(Ok(value)) = found.map(|v| v.downcast::<T>()) {
            return value;
        }
        let value = Arc::new(init());
        held.retain(|(k, _)| *k != kind);
        held.push((kind, value.clone()));
        value
    }
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

/// One send of an owners' notice.
pub struct Notice<'a> {
    /// The send's key: its Message-ID or Idempotency-Key, the same on every retry.
    pub key: &'a str,
    /// The message's key.
    pub message: &'a str,
    pub destination: &'a str,
    /// The report's owners as configured now (`None`: the report is gone).
    pub owners: Option<&'a Owners>,
    pub subject: &'a str,
    pub body: &'a str,
    /// The owner webhook's body (`delivery::notice::NoticeBody`).
    pub webhook_body: &'a str,
    pub now: DateTime<Utc>,
}

/// Every registered kind's sender.
pub struct Senders(Vec<(DestinationKind, Box<dyn Sender>)>);

impl Senders {
    pub fn build(build: &Build<'_>) -> Result<Senders, DeliverError> {
        let senders = (super::kinds().iter())
            .map(|d| Ok((d.kind(), d.sender(build)?)))
            .collect::<Result<_, DeliverError>>()?;
        Ok(Senders(senders))
    }

    /// The sender of `kind`; a kind this version does not send is a permanent outcome.
    pub fn of(&self, kind: DestinationKind) -> Result<&dyn Sender, Outcome> {
        (self.0.iter())
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| s.as_ref())
            .ok_or_else(|| {
                permanent(format!(
                    "this version of dawnpost does not send {kind} destinations"
                ))
            })
    }
}

impl std::fmt::Debug for Senders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

/// An outcome of a send that never reached its transport: permanent, with its reason.
pub fn permanent(reason: impl Into<String>) -> Outcome {
    Outcome::new(
        crate::domain::outcome::ResponseClass::Permanent,
        None,
        reason,
    )
}
