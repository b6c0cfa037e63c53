//! `[[family]]`: one report definition fanned out over rows ([`super::rows`]). Each row makes
//! one report, a report like any other: every string of the family's table may use the row's
//! columns as `{{row.<column>}}` (an array element or a key a row leaves empty is dropped), and the
//! report's templates see the row as `row`. Problems name the file, the family, the row (a
//! CSV's line, a JSON array's item, a query's row) and the column.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::ConfigError;
use super::fields::{Fields, Place};
use super::report::{LoadContext, Report, load_report};
use super::rows::{Family, FamilyRow, Row, read_rows, rows_field, rows_spec, substitute};
use crate::domain::keys::ReportId;

/// At most this many problems are listed per family; the rest are counted.
const MAX_ROW_ERRORS: usize = 20;

/// Every `[[family]]` table of `file`: the reports of their rows.
pub(super) fn load_families(
    file: &Path,
    value: &toml::Value,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<Report> {
    let toml::Value::Array(items) = value else {
        errors.push(Place::new(file).error("family", "expected [[family]] tables"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            toml::Value::Table(t) => out.extend(load_family(file, i, t, ctx, errors, warnings)),
            _ => errors.push(Place::new(file).error(&format!("family[{i}]"), "expected a table")),
        }
    }
    out
}

fn load_family(
    file: &Path,
    index: usize,
    table: &toml::Table,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<Report> {
    let id = match table.get("id") {
        Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
        _ => format!("family[{index}]"),
    };
    let label = format!("family {id:?}");
    let place = Place {
        row: Some(&label),
        ..Place::new(file)
    };
    let mut f = Fields::new(table, place.clone());
    let Some(spec) = rows_spec(&mut f, ctx.root, errors) else {
        return Vec::new();
    };
    let rows = match read_rows(&spec, ctx.root, ctx.readers.rows) {
        Ok(rows) => rows,
        Err(message) => {
            errors.push(place.error(rows_field(&spec), message));
            return Vec::new();
        }
    };
    if rows.is_empty() {
        warnings.push(place.warning("rows", "no rows: this family makes no reports"));
    }
    let mut body = table.clone();
    body.remove("rows");
    let Made {
        reports,
        problems,
        warnings: row_warnings,
    } = reports_of_rows((file, index), &id, &body, rows, &place, ctx);
    if let Some(more) = capped(problems, errors) {
        errors.push(place.error("rows", format!("… and {more} more problem(s) in its rows")));
    }
    // Capped as its problems are: a key every row shares warns once a row (10,000 rows, one
    // unset secret_env).
    if let Some(more) = capped(row_warnings, warnings) {
        warnings.push(place.warning("rows", &format!("… and {more} more warning(s) in its rows")));
    }
    ctx.families.borrow_mut().push(Family {
        file: file.to_path_buf(),
        id,
        rows: spec,
        reports: reports.len(),
    });
    reports
}

/// What a family's rows make: a report for each row that loads, and the rows' problems and
/// warnings, which the family reports capped.
struct Made {
    reports: Vec<Report>,
    problems: Vec<ConfigError>,
    warnings: Vec<String>,
}

/// A report for each of `rows`, from the family's `body` with the row's values put in; a row
/// whose values do not fit, whose report does not load, or whose report id another row made
/// already, makes none and says why.
fn reports_of_rows(
    (file, index): (&Path, usize),
    id: &str,
    body: &toml::Table,
    rows: Vec<Row>,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
) -> Made {
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    let mut reports: Vec<Report> = Vec::new();
    let mut made: HashMap<ReportId, String> = HashMap::new();
    for row in rows {
        let family_row = FamilyRow {
            family: id.to_string(),
            row: row.at,
            values: row.values,
        };
        let origin = family_row.origin();
        let row_place = Place {
            row: Some(&origin),
            ..place.clone()
        };
        let before = problems.len();
        let expanded = expand_table(body, &family_row.values, &row_place, "", &mut problems);
        if problems.len() > before {
            continue;
        }
        let Some(mut report) = load_report(
            (file, Some(&origin)),
            index,
            &expanded,
            ctx,
            &mut problems,
            &mut warnings,
        ) else {
            continue;
        };
        if let Some(first) = made.get(&report.id) {
            let message = format!(
                "{} and {} both make report {}",
                first, family_row.row, report.id
            );
            problems.push(row_place.error("id", message));
            continue;
        }
        made.insert(report.id.clone(), family_row.row.clone());
        report.family = Some(Arc::new(family_row));
        reports.push(report);
    }
    Made {
        reports,
        problems,
        warnings,
    }
}

/// The first [`MAX_ROW_ERRORS`] of a family's `items` into `into`; how many more were left out,
/// if any.
fn capped<T>(items: Vec<T>, into: &mut Vec<T>) -> Option<usize> {
    let more = items.len().saturating_sub(MAX_ROW_ERRORS);
    into.extend(items.into_iter().take(MAX_ROW_ERRORS));
    (more > 0).then_some(more)
}

/// `table` with every `{{row.<column>}}` in its strings replaced by the row's value (a key
/// whose string the row leaves empty left out); a column the row lacks is a problem naming the
/// field and the column.
fn expand_table(
    table: &toml::Table,
    row: &Map<String, Value>,
    place: &Place<'_>,
    path: &str,
    problems: &mut Vec<ConfigError>,
) -> toml::Table {
    table
        .iter()
        .map(|(k, v)| {
            let field = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            (k, expand_value(v, row, place, &field, problems), v)
        })
        // A key the row leaves empty is unset, as if not written: `calendar = "{{row.calendar}}"`
        // with no calendar in the row is a report without one.
        .filter(|(_, new, old)| !is_blank(new) || is_blank(old))
        .map(|(k, new, _)| (k.clone(), new))
        .collect()
}

fn expand_value(
    value: &toml::Value,
    row: &Map<String, Value>,
    place: &Place<'_>,
    field: &str,
    problems: &mut Vec<ConfigError>,
) -> toml::Value {
    match value {
        toml::Value::String(s) => match substitute(s, row) {
            Ok(s) => toml::Value::String(s),
            Err(message) => {
                problems.push(place.error(field, message));
                value.clone()
            }
        },
        // An element the row leaves empty is dropped: `email = ["{{row.ops}}", "{{row.lead}}"]`
        // with no lead is one address.
        toml::Value::Array(items) => toml::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| expand_value(v, row, place, &format!("{field}[{i}]"), problems))
                .zip(items)
                .filter(|(new, old)| !is_blank(new) || is_blank(old))
                .map(|(new, _)| new)
                .collect(),
        ),
        toml::Value::Table(t) => toml::Value::Table(expand_table(t, row, place, field, problems)),
        other => other.clone(),
    }
}

fn is_blank(v: &toml::Value) -> bool {
    matches!(v, toml::Value::String(s) if s.trim().is_empty())
}
