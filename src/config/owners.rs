//! A report's deadline and its owners: `deliver_by` (a local time on the job's date by which
//! it should be delivered), `owners` (addresses told when it is late or quarantined) and
//! `owner_webhook` (a signed webhook told the same).

use chrono::NaiveTime;

use super::ConfigError;
use super::fields::{Fields, Place};
use super::webhook::{Webhook, load_webhook};

/// Who is told when a report is late or quarantined, and by when it is due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    /// `deliver_by`: the local time on the job's date by which its job should be done; a job
    /// fired at or after that time on its date is due at that time the next day.
    pub deliver_by: Option<NaiveTime>,
    /// `owners`: one email each.
    pub emails: Vec<lettre::Address>,
    /// `owner_webhook`: a Standard Webhooks POST.
    pub webhook: Option<Webhook>,
}

impl Owners {
    /// Whether anybody is told anything.
    pub fn notified(&self) -> bool {
        !self.emails.is_empty() || self.webhook.is_some()
    }
}

/// `deliver_by`, `owners` and `owner_webhook` of a report (or of a family's row).
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Owners {
    let deliver_by = f.opt::<String>("deliver_by", errors).and_then(|text| {
        NaiveTime::parse_from_str(text.trim(), "%H:%M")
            .map_err(|_| {
                let message = format!(
                    "{text:?} is not a local time HH:MM (\"08:00\", on the job's date in the report's timezone)"
                );
                errors.push(place.error("deliver_by", message))
            })
            .ok()
    });
    let emails = f.addresses("owners", errors);
    let webhook = match f.raw("owner_webhook") {
        None => None,
        Some(toml::Value::Table(t)) => {
            load_webhook(t, &place.nested("owner_webhook"), errors, warnings)
        }
        Some(_) => {
            let message = "expected a table such as { url = \"https://…\", secret_env = \"…\" }";
            errors.push(place.error("owner_webhook", message));
            None
        }
    };
    Owners {
        deliver_by,
        emails,
        webhook,
    }
}
