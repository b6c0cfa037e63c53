//! `send_when` and `skip_if_empty`: whether a rendered job is sent. `"always"` (the default)
//! sends what it renders; `"results"` sends only when the source data has results: the value at
//! `skip_if_empty`'s path (its older spelling), or the whole data without one, is not missing,
//! null, or an empty array, object or string.

use super::ConfigError;
use super::fields::Fields;
use crate::domain::data_path::{DataPath, DataPathError};

/// Where in the source data an empty value ends the job `skipped`, if anywhere.
pub(super) fn load(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Option<DataPath> {
    let place = f.place.clone();
    let path = f.opt::<String>("skip_if_empty", errors).and_then(|p| {
        p.parse()
            .map_err(|e: DataPathError| errors.push(place.error("skip_if_empty", e.to_string())))
            .ok()
    });
    match f.opt::<String>("send_when", errors).as_deref() {
        None => path,
        Some("results") => path.or_else(|| "data".parse().ok()),
        Some("always") => {
            if let Some(p) = &path {
                let message = format!(
                    "\"always\" sends an empty report, which skip_if_empty = \"{p}\" skips: write send_when = \"results\", or leave one out"
                );
                errors.push(place.error("send_when", message));
            }
            None
        }
        Some(other) => {
            let message = format!("{other:?}: use \"always\" or \"results\"");
            errors.push(place.error("send_when", message));
            path
        }
    }
}
