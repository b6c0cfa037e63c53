//! The email kind's keys: a report's `email` (distinct addresses) and `list_unsubscribe`, and
//! its `owners`.

use std::sync::Arc;

use crate::config::{ConfigError, Fields, Read};

/// What a report's emails carry beyond their addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `list_unsubscribe`: the `List-Unsubscribe` of its emails (`mailto:…`), for reports sent
    /// outside the company.
    pub list_unsubscribe: Option<String>,
}

/// `email` and `list_unsubscribe`.
pub(super) fn read_report(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Read {
    let to = addresses(f, "email", errors);
    let list_unsubscribe = read_list_unsubscribe(f, errors);
    Read {
        to,
        detail: Some(Arc::new(Options { list_unsubscribe })),
    }
}

/// `owners`: one email each.
pub(super) fn read_owners(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Read {
    Read {
        to: addresses(f, "owners", errors),
        detail: None,
    }
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
