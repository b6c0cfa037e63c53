//! The rows of a `[[family]]`: a CSV file (a header line naming the columns), a JSON file (an
//! array of objects) or an SQL query (read by a [`RowReader`], since configuration speaks to no
//! database), and `{{row.<column>}}` in a string replaced by a row's value.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::ConfigError;
use super::fields::Fields;
use super::resolve;
use crate::domain::duration::Span;

/// The largest rows file read (a CSV or JSON file of rows).
pub(crate) const MAX_ROWS_FILE: u64 = 64 << 20;

/// Where a family's rows come from. Paths are resolved against the project root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowsSpec {
    /// A CSV file with a header line naming the columns.
    Csv { path: PathBuf },
    /// A JSON file holding an array of objects.
    Json { path: PathBuf },
    /// A read-only query (in a file) against the database named by `url_env`.
    Sql {
        url_env: String,
        query: PathBuf,
        timeout: Span,
    },
}

impl RowsSpec {
    /// Where the rows come from, in words, paths relative to `root`: `CSV config/w.csv`.
    pub(crate) fn describe(&self, root: &Path) -> String {
        match self {
            RowsSpec::Csv { path } => format!("CSV {}", shown(path, root)),
            RowsSpec::Json { path } => format!("JSON {}", shown(path, root)),
            RowsSpec::Sql { url_env, query, .. } => {
                format!("the query {} against ${url_env}", shown(query, root))
            }
        }
    }
}

/// Reads the rows of a family whose rows come from an SQL query (the sql source does it;
/// configuration speaks to no database): each row's columns, or why they cannot be read.
pub trait RowReader {
    fn sql_rows(
        &self,
        url_env: &str,
        query: &Path,
        timeout: Span,
    ) -> Result<Vec<Map<String, Value>>, String>;
}

/// Reads no SQL rows: a family whose rows come from a query is refused, saying so.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSqlRows;

impl RowReader for NoSqlRows {
    fn sql_rows(&self, _: &str, _: &Path, _: Span) -> Result<Vec<Map<String, Value>>, String> {
        Err("this command does not read rows from a database".into())
    }
}

/// A `[[family]]` as loaded.
#[derive(Debug, Clone)]
pub struct Family {
    /// The file that defines it.
    pub file: PathBuf,
    /// Its `id`, with the row's columns still in it (`warehouse-{{row.id}}`).
    pub id: String,
    pub rows: RowsSpec,
    /// The reports its rows made.
    pub reports: usize,
}

/// The family and row a report was made from.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyRow {
    /// The family's `id` with the columns still in it.
    pub family: String,
    /// Where the row is: `config/warehouses.csv line 5`, `query config/w.sql row 3`.
    pub row: String,
    /// The row's columns: what the report's templates see as `row`.
    pub values: Map<String, Value>,
}

impl FamilyRow {
    /// `family "warehouse-{{row.id}}", config/warehouses.csv line 5`.
    pub fn origin(&self) -> String {
        format!("family {:?}, {}", self.family, self.row)
    }
}

/// One row: where it is, and its columns.
pub(super) struct Row {
    pub at: String,
    pub values: Map<String, Value>,
}

/// The `rows` table's field an unreadable source is reported on.
pub(super) fn rows_field(spec: &RowsSpec) -> &'static str {
    match spec {
        RowsSpec::Csv { .. } | RowsSpec::Json { .. } => "rows.path",
        RowsSpec::Sql { .. } => "rows.query",
    }
}

/// `rows = { kind = "csv" | "json", path }` or `{ kind = "sql", url_env, query, timeout }`.
pub(super) fn rows_spec(
    f: &mut Fields<'_, '_>,
    root: &Path,
    errors: &mut Vec<ConfigError>,
) -> Option<RowsSpec> {
    let t = match f.raw("rows") {
        Some(toml::Value::Table(t)) => t,
        Some(_) => {
            let message = "expected a table such as { kind = \"csv\", path = \"…\" }";
            errors.push(f.place.error("rows", message));
            return None;
        }
        None => {
            errors.push(f.place.error("rows", "missing required field"));
            return None;
        }
    };
    let mut r = Fields::new(t, f.place.nested("rows"));
    let spec = match r.req::<String>("kind", errors)?.as_str() {
        kind @ ("csv" | "json") => {
            let path = resolve(root, &r.req::<PathBuf>("path", errors)?);
            if kind == "csv" {
                RowsSpec::Csv { path }
            } else {
                RowsSpec::Json { path }
            }
        }
        "sql" => {
            let timeout = r.positive("timeout", errors).unwrap_or(Span::from_secs(30));
            let url_env = r.env_name_required("url_env", errors);
            let query = r.req::<PathBuf>("query", errors);
            RowsSpec::Sql {
                url_env: url_env?,
                query: resolve(root, &query?),
                timeout,
            }
        }
        other => {
            let message =
                format!("{other:?} is not a kind of rows: use \"csv\", \"json\" or \"sql\"");
            errors.push(r.place.error("kind", message));
            return None;
        }
    };
    r.finish(errors);
    Some(spec)
}

/// A path as a person reads it: relative to the project root when it is under it.
fn shown(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

pub(super) fn read_rows(
    spec: &RowsSpec,
    root: &Path,
    sql: &dyn RowReader,
) -> Result<Vec<Row>, String> {
    match spec {
        RowsSpec::Csv { path } => csv_rows(path, &shown(path, root)),
        RowsSpec::Json { path } => json_rows(path, &shown(path, root)),
        RowsSpec::Sql {
            url_env,
            query,
            timeout,
        } => {
            let name = shown(query, root);
            let rows = sql.sql_rows(url_env, query, *timeout)?;
            Ok(rows
                .into_iter()
                .enumerate()
                .map(|(i, values)| Row {
                    at: format!("query {name} row {}", i + 1),
                    values,
                })
                .collect())
        }
    }
}

fn read_bounded(path: &Path, name: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_ROWS_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if bytes.len() as u64 > MAX_ROWS_FILE {
        return Err(format!(
            "{name} is larger than {}",
            super::fields::shown_size(MAX_ROWS_FILE)
        ));
    }
    Ok(bytes)
}

/// A CSV file's rows; each row is named by its line, the header by its column names.
fn csv_rows(path: &Path, name: &str) -> Result<Vec<Row>, String> {
    let bytes = read_bounded(path, name)?;
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(bytes.as_slice());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("{name} line 1: {}", csv_problem(&e)))?
        .iter()
        .map(str::to_string)
        .collect();
    if let Some(h) = headers.iter().find(|h| !is_column_name(h)) {
        return Err(format!(
            "{name} line 1: column {h:?} is not a name (letters, digits and '_')"
        ));
    }
    for (i, h) in headers.iter().enumerate() {
        if headers[..i].contains(h) {
            return Err(format!("{name} line 1: column {h:?} is named twice"));
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, csv::Position::line);
            format!("{name} line {line}: {}", csv_problem(&e))
        })?;
        let line = record.position().map_or(0, csv::Position::line);
        let values = headers
            .iter()
            .zip(record.iter())
            .map(|(h, v)| (h.clone(), Value::String(v.to_string())))
            .collect();
        rows.push(Row {
            at: format!("{name} line {line}"),
            values,
        });
    }
    Ok(rows)
}

/// A CSV error in words, without its position (the caller names the line).
fn csv_problem(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} field(s), but the header names {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".into(),
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    }
}

fn is_column_name(h: &str) -> bool {
    !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A JSON file's rows: an array of objects, each named by its position (`item 1` first).
fn json_rows(path: &Path, name: &str) -> Result<Vec<Row>, String> {
    let bytes = read_bounded(path, name)?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{name} is not valid JSON: {e}"))?;
    let Value::Array(items) = value else {
        return Err(format!("{name}: expected an array of objects, one per row"));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(values) => Ok(Row {
                at: format!("{name} item {}", i + 1),
                values,
            }),
            _ => Err(format!("{name} item {}: expected an object", i + 1)),
        })
        .collect()
}

/// `text` with each `{{row.<column>}}` (spaces allowed inside the braces) replaced; any other
/// `{{…}}` (`{{date}}`, `{{window.start}}`) is left for the field's own reader.
pub(crate) fn substitute(text: &str, row: &Map<String, Value>) -> Result<String, String> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}").map(|c| open + c) else {
            break;
        };
        let inner = rest[open + 2..close].trim();
        out.push_str(&rest[..open]);
        match inner.strip_prefix("row.") {
            Some(column) => out.push_str(&cell(row, column)?),
            None => out.push_str(&rest[open..close + 2]),
        }
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn cell(row: &Map<String, Value>, column: &str) -> Result<String, String> {
    match row.get(column) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) => Ok(String::new()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
        Some(_) => Err(format!(
            "column {column:?} holds a list or an object, not a value"
        )),
        None => {
            let mut columns: Vec<&str> = row.keys().map(String::as_str).collect();
            columns.sort_unstable();
            Err(format!(
                "column {column:?} is not in the row (its columns: {})",
                columns.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, Value)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn substitutes_row_columns_and_leaves_the_rest() {
        let r = row(&[("id", Value::from("17")), ("n", Value::from(3))]);
        assert_eq!(
            substitute("w-{{row.id}}/{{ row.n }}?from={{window.start}}", &r).unwrap(),
            "w-17/3?from={{window.start}}"
        );
        assert_eq!(substitute("plain", &r).unwrap(), "plain");
        assert_eq!(substitute("open {{row.id", &r).unwrap(), "open {{row.id");
        let err = substitute("{{row.tz}}", &r).unwrap_err();
        assert!(err.contains("\"tz\"") && err.contains("id, n"), "{err}");
    }
}
