//! `[[report.chart]]`: a chart drawn from the report's data, which the HTML template places with
//! `{{chart "id"}}`.
//!
//! ```toml
//! [[report.chart]]
//! id = "late_by_hour"                  # unique within the report
//! kind = "line"                        # "line" | "bar" | "stacked_bar" | "area"
//! title = "Late orders by hour"
//! data = "data.hours"                  # a path to an array of objects in the source data
//! x = "hour"                           # the field for the x axis
//! y = ["late", "shipped"]              # one series per field
//! labels = ["Late", "Shipped"]         # the series' names (default: the fields')
//! ```

use super::ConfigError;
use super::fields::{Fields, Place};
use crate::domain::data_path::DataPath;

/// How a chart draws its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    Line,
    Bar,
    StackedBar,
    Area,
}

impl ChartKind {
    pub fn parse(text: &str) -> Option<ChartKind> {
        match text {
            "line" => Some(ChartKind::Line),
            "bar" => Some(ChartKind::Bar),
            "stacked_bar" => Some(ChartKind::StackedBar),
            "area" => Some(ChartKind::Area),
            _ => None,
        }
    }

    /// Its name in words: `line chart`, `stacked bar chart`.
    pub fn words(self) -> &'static str {
        match self {
            ChartKind::Line => "line chart",
            ChartKind::Bar => "bar chart",
            ChartKind::StackedBar => "stacked bar chart",
            ChartKind::Area => "area chart",
        }
    }
}

/// One chart of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSpec {
    /// Unique within the report: `[a-z0-9_-]`, at most 40 characters.
    pub id: String,
    pub kind: ChartKind,
    pub title: String,
    /// Where its rows are: an array of objects.
    pub data: DataPath,
    /// The field of each row on the x axis.
    pub x: String,
    /// The fields of each row drawn, one series each.
    pub y: Vec<String>,
    /// What the legend and the picture's text call each series (`labels`; the fields' names
    /// by default).
    pub labels: Vec<String>,
}

/// The most series one chart draws.
pub const MAX_SERIES: usize = 8;

/// A report's `[[report.chart]]` tables.
pub(super) fn load(f: &mut Fields<'_, '_>, errors: &mut Vec<ConfigError>) -> Vec<ChartSpec> {
    let place = f.place.clone();
    let items = match f.raw("chart") {
        None => return Vec::new(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            errors.push(place.error("chart", "expected [[report.chart]] tables"));
            return Vec::new();
        }
    };
    let mut charts: Vec<ChartSpec> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let here = place.nested(&format!("chart[{i}]"));
        let toml::Value::Table(t) = item else {
            errors.push(here.error("(table)", "expected a [[report.chart]] table"));
            continue;
        };
        let Some(chart) = chart(t, &here, errors) else {
            continue;
        };
        if charts.iter().any(|c| c.id == chart.id) {
            errors.push(here.error("id", format!("{:?} is used by another chart", chart.id)));
        } else {
            charts.push(chart);
        }
    }
    charts
}

fn chart(t: &toml::Table, place: &Place<'_>, errors: &mut Vec<ConfigError>) -> Option<ChartSpec> {
    let mut f = Fields::new(t, place.clone());
    let id = f.req::<String>("id", errors).filter(|id| {
        let ok = !id.is_empty()
            && id.len() <= 40
            && (id.chars())
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
        if !ok {
            let message = format!("{id:?}: use 1 to 40 of a-z, 0-9, _ and -");
            errors.push(place.error("id", message));
        }
        ok
    });
    let kind = f.req::<String>("kind", errors).and_then(|k| {
        let kind = ChartKind::parse(&k);
        if kind.is_none() {
            let message = format!("{k:?}: use \"line\", \"bar\", \"stacked_bar\" or \"area\"");
            errors.push(place.error("kind", message));
        }
        kind
    });
    let title = f.req::<String>("title", errors).filter(|t| {
        let empty = t.trim().is_empty();
        empty.then(|| errors.push(place.error("title", "must not be empty")));
        !empty
    });
    let data = f.req::<String>("data", errors).and_then(|p| {
        (p.parse::<DataPath>())
            .map_err(|e| errors.push(place.error("data", e.to_string())))
            .ok()
    });
    let x = f.req::<String>("x", errors).filter(|x| {
        let empty = x.trim().is_empty();
        empty.then(|| errors.push(place.error("x", "must not be empty")));
        !empty
    });
    let y = match f.raw("y") {
        Some(toml::Value::String(s)) => Some(vec![s.clone()]),
        Some(toml::Value::Array(_)) => f.opt::<Vec<String>>("y", errors),
        Some(_) => {
            errors.push(place.error("y", "expected a field name or a list of them"));
            None
        }
        None => {
            errors.push(place.error("y", "missing required field"));
            None
        }
    };
    let y = y.filter(|y| {
        let problem = match y.len() {
            0 => Some("lists no field".to_string()),
            n if n > MAX_SERIES => Some(format!("{n} series: at most {MAX_SERIES}")),
            _ => (y.iter().any(|f| f.trim().is_empty())).then(|| "has an empty field name".into()),
        };
        problem.map(|p| errors.push(place.error("y", p))).is_none()
    });
    let labels = f.opt::<Vec<String>>("labels", errors);
    f.finish(errors);
    let y = y?;
    let labels = match labels {
        None => y.clone(),
        Some(labels) if labels.len() == y.len() => labels,
        Some(labels) => {
            let message = format!("{} labels for {} series in y", labels.len(), y.len());
            errors.push(place.error("labels", message));
            return None;
        }
    };
    Some(ChartSpec {
        id: id?,
        kind: kind?,
        title: title?,
        data: data?,
        x: x?,
        y,
        labels,
    })
}
