//! `figures`: the key figures a report names — a label and a path into its data each — which a
//! message too short for the whole report shows (a chat destination's default message), and
//! which every template sees as `figures`.
//!
//! ```toml
//! figures = [
//!   { label = "Orders shipped", path = "data.summary.orders_shipped" },
//!   { label = "Late", path = "data.summary.orders_late" },
//! ]
//! ```

use super::ConfigError;
use super::fields::{Fields, Place};
use crate::domain::data_path::DataPath;

/// One key figure: what a reader calls it, and where its value is in the report's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    pub label: String,
    pub path: DataPath,
}

/// The most figures a report names (a Slack section holds ten fields).
pub const MAX_FIGURES: usize = 10;

/// A report's `figures`, in the order written.
pub(super) fn load(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Vec<Figure> {
    let place = f.place.clone();
    let items = match f.raw("figures") {
        None => return Vec::new(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            let message = "expected a list such as [{ label = \"Late\", path = \"data.late\" }]";
            errors.push(place.error("figures", message));
            return Vec::new();
        }
    };
    if items.len() > MAX_FIGURES {
        let message = format!("{} figures: at most {MAX_FIGURES}", items.len());
        errors.push(place.error("figures", message));
    }
    let mut figures: Vec<Figure> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let here = place.nested(&format!("figures[{i}]"));
        let toml::Value::Table(t) = item else {
            errors.push(here.error(
                "(item)",
                "expected a table { label = \"…\", path = \"data.…\" }",
            ));
            continue;
        };
        if let Some(figure) = figure(t, &here, errors) {
            if figures.iter().any(|x| x.label == figure.label) {
                let message = format!("{:?} is named twice", figure.label);
                errors.push(here.error("label", message));
            } else {
                figures.push(figure);
            }
        }
    }
    figures
}

fn figure(t: &toml::Table, place: &Place<'_>, errors: &mut Vec<ConfigError>) -> Option<Figure> {
    let mut f = Fields::new(t, place.clone());
    let label = f.req::<String>("label", errors).filter(|l| {
        let empty = l.trim().is_empty();
        empty.then(|| errors.push(place.error("label", "must not be empty")));
        !empty
    });
    let path = f.req::<String>("path", errors).and_then(|p| {
        (p.parse::<DataPath>())
            .map_err(|e| errors.push(place.error("path", e.to_string())))
            .ok()
    });
    f.finish(errors);
    Some(Figure {
        label: label?,
        path: path?,
    })
}
