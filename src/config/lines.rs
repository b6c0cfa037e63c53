//! The line an error's field sits on. The loader reads a file as plain tables and names a
//! problem by its report and field; this finds that field in the file's text, so that every
//! error names its line too (`reports.toml: line 12: report "warehouse-17": source.kind: …`).

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;

use toml::de::{DeArray, DeTable, DeValue};

use super::ConfigError;

/// Gives each error of a TOML file that names no line or row the line of its field: the
/// field's key where it is written, else the nearest table on its path that is.
pub(super) fn locate(errors: &mut [ConfigError]) {
    let mut texts: HashMap<PathBuf, Option<String>> = HashMap::new();
    for e in errors.iter_mut() {
        // A family's own table (`family "…"`); a row's problem names its row's line instead.
        let family = (e.row.as_deref())
            .and_then(|r| r.strip_prefix("family \""))
            .and_then(|r| r.strip_suffix('"'))
            .filter(|id| !id.contains('"'))
            .map(str::to_string);
        if (e.row.is_some() && family.is_none()) || e.file.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let text = texts
            .entry(e.file.clone())
            .or_insert_with(|| std::fs::read_to_string(&e.file).ok());
        let Some(line) = text
            .as_deref()
            .and_then(|t| line_of(t, e, family.as_deref()))
        else {
            continue;
        };
        e.row = Some(match e.row.take() {
            Some(family) => format!("{family}, line {line}"),
            None => format!("line {line}"),
        });
    }
}

/// The line of `e`'s field in `text` (in the `[[family]]` whose id is `family`, when given),
/// when the file parses and the field's table is found.
fn line_of(text: &str, e: &ConfigError, family: Option<&str>) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    let mut at: Range<usize> = doc.span();
    let mut table: Option<&DeTable<'_>> = Some(doc.get_ref());
    let found = match (family, &e.report) {
        (Some(id), _) => Some(table_of(doc.get_ref(), "family", id)?),
        (None, Some(label)) => Some(table_of(doc.get_ref(), "report", label)?),
        (None, None) => None,
    };
    if let Some((span, t)) = found {
        at = span;
        table = Some(t);
    }
    for segment in e.field.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let Some((k, v)) = table.and_then(|t| entry(t, key)) else {
            break;
        };
        at = k.span();
        let value = match (v.get_ref(), index) {
            (DeValue::Array(items), Some(i)) => match items.get(i) {
                Some(item) => {
                    at = item.span();
                    item.get_ref()
                }
                None => break,
            },
            (value, _) => value,
        };
        table = match value {
            DeValue::Table(t) => Some(t),
            _ => None,
        };
    }
    let start = at.start.min(text.len());
    // A table's span may start at the line break before its header.
    let skipped = text[start..].len() - text[start..].trim_start().len();
    Some(text[..start + skipped].matches('\n').count() + 1)
}

/// The `[[report]]` (or `[[family]]`, as `kind` says) table `label` names: by its id, or
/// `report[i]` when it had none.
fn table_of<'t, 'i>(
    doc: &'t DeTable<'i>,
    kind: &str,
    label: &str,
) -> Option<(Range<usize>, &'t DeTable<'i>)> {
    let reports: &DeArray<'i> = match entry(doc, kind)?.1.get_ref() {
        DeValue::Array(items) => items,
        _ => return None,
    };
    let by_index = (label.strip_prefix(&format!("{kind}[")))
        .and_then(|r| r.trim_end_matches(']').parse::<usize>().ok());
    let found = match by_index {
        Some(i) => reports.get(i),
        None => reports.iter().find(|r| match r.get_ref() {
            DeValue::Table(t) => entry(t, "id")
                .is_some_and(|(_, id)| matches!(id.get_ref(), DeValue::String(s) if s == label)),
            _ => false,
        }),
    }?;
    match found.get_ref() {
        DeValue::Table(t) => Some((found.span(), t)),
        _ => None,
    }
}

/// The key and value of `key` in `table`.
fn entry<'t, 'i>(
    table: &'t DeTable<'i>,
    key: &str,
) -> Option<(
    &'t toml::Spanned<toml::de::DeString<'i>>,
    &'t toml::Spanned<DeValue<'i>>,
)> {
    table.iter().find(|(k, _)| k.get_ref().as_ref() == key)
}
