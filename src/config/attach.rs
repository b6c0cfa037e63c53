//! `attach`: what a report's emails attach of its CSV part — `["csv"]` (the default), the
//! spreadsheet beside it (`["csv", "xlsx"]`) or instead of it (`["xlsx"]`). A report whose
//! template has no CSV part attaches nothing, and may not ask for either.

use std::path::Path;

use super::ConfigError;
use super::fields::Fields;

/// What a report's emails attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attach {
    pub csv: bool,
    pub xlsx: bool,
}

impl Default for Attach {
    fn default() -> Attach {
        Attach {
            csv: true,
            xlsx: false,
        }
    }
}

/// A report's `attach`, for its `template` under `root`.
pub(super) fn load(
    f: &mut Fields<'_, '_>,
    (root, template): (&Path, Option<&str>),
    errors: &mut Vec<ConfigError>,
) -> Attach {
    let place = f.place.clone();
    let Some(listed) = f.opt::<Vec<String>>("attach", errors) else {
        return Attach::default();
    };
    let mut attach = Attach {
        csv: false,
        xlsx: false,
    };
    for (i, name) in listed.iter().enumerate() {
        let seen = match name.as_str() {
            "csv" => std::mem::replace(&mut attach.csv, true),
            "xlsx" => std::mem::replace(&mut attach.xlsx, true),
            other => {
                let message = format!("{other:?}: use \"csv\" or \"xlsx\"");
                errors.push(place.error(&format!("attach[{i}]"), message));
                continue;
            }
        };
        if seen {
            errors.push(place.error(&format!("attach[{i}]"), format!("{name:?} is listed twice")));
        }
    }
    if listed.is_empty() {
        errors.push(place.error("attach", "lists nothing: leave it out to attach the CSV"));
    }
    if let Some(t) = template {
        let csv = root.join("templates").join(format!("{t}.csv.hbs"));
        if !csv.is_file() {
            let message = format!(
                "the template has no CSV part to attach ({} does not exist)",
                csv.display()
            );
            errors.push(place.error("attach", message));
        }
    }
    attach
}
