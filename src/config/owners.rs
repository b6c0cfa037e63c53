//! A report's deadline and its owners: `deliver_by` (a local time on the job's date by which
//! it should be delivered) and who is told when it is late or quarantined, each kind of
//! destination reading its own keys (`owners`, `owner_webhook`).

use chrono::NaiveTime;

use super::ConfigError;
use super::fields::{Fields, Place};

/// Who is told when a report is late or quarantined, and by when it is due.
#[derive(Debug, Clone, Default)]
pub struct Owners {
    /// `deliver_by`: the local time on the job's date by which its job should be done; a job
    /// fired at or after that time on its date is due at that time the next day.
    pub deliver_by: Option<NaiveTime>,
    /// Who is told, each kind's destinations as that kind read them.
    pub destinations: super::Destinations,
}

impl Owners {
    /// Whether anybody is told anything.
    pub fn notified(&self) -> bool {
        !self.destinations.is_empty()
    }
}

/// `deliver_by` and the owners' keys of a report (or of a family's row).
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    kinds: &[&dyn super::DestinationConfig],
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
    let destinations =
        super::Destinations::read(kinds, |kind| kind.read_owners(f, errors, warnings));
    Owners {
        deliver_by,
        destinations,
    }
}
