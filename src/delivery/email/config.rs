//! The email kind's keys: a report's `email` (distinct addresses), `list_unsubscribe` and
//! `unsubscribe`, and
//! its `owners`.

use std::sync::Arc;

use crate::domain::keys::DestinationKind;

use crate::config::{ConfigError, DestinationConfig, Fields, Read};

impl DestinationConfig for super::Email {
    fn kind(&self) -> DestinationKind {
        super::KIND
    }

    /// `email`, `list_unsubscribe` and `unsubscribe`.
    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        _warnings: &mut Vec<String>,
    ) -> Read {
        let to = addresses(f, "email", errors);
        let list_unsubscribe = read_list_unsubscribe(f, errors);
        let unsubscribe = f.opt::<bool>("unsubscribe", errors).unwrap_or(false);
        Read {
            to,
            detail: Some(Arc::new(Options {
                list_unsubscribe,
                unsubscribe,
            })),
        }
    }

    /// `owners`: one email each.
    fn read_owners(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        _warnings: &mut Vec<String>,
    ) -> Read {
        let to = addresses(f, "owners", errors);
        Read { to, detail: None }
    }
}

/// What a report's emails carry beyond their addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `list_unsubscribe`: the `List-Unsubscribe` of its emails (`mailto:…`), for reports sent
    /// outside the company.
    pub list_unsubscribe: Option<String>,
    /// `unsubscribe`: its emails carry a one-click unsubscribe link (RFC 8058) under
    /// `[server] public_url`, signed for the report and the recipient.
    pub unsubscribe: bool,
}

fn addresses(
    f: &mut Fields<'_, '_>,
    key: &'static str,
    errors: &mut Vec<ConfigError>,
) -> Vec<String> {
    (f.addresses(key, errors).iter())
        .map(ToString::to_string)
        .collect()
}

/// `list_unsubscribe`: a `mailto:` URL with an address, when given.
fn read_list_unsubscribe(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<String> {
    let place = f.place.clone();
    f.opt::<String>("list_unsubscribe", errors).and_then(|u| {
        let address = u
            .strip_prefix("mailto:")
            .map(|a| a.split('?').next().unwrap_or(""));
        match address.map(str::parse::<lettre::Address>) {
            Some(Ok(_)) => Some(u),
            _ => {
                let message = format!(
                    "{u:?} is not a mailto: URL with an address (mailto:unsubscribe@example.com)"
                );
                errors.push(place.error("list_unsubscribe", message));
                None
            }
        }
    })
}
