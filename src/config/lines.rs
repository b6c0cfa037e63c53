//! The line an error's field sits on. The loader reads a file as plain tables and names a
//! problem by its report and field; this finds that field in the file's text, so that every
//! error names its line too (`reports.toml: line 12: report "warehouse-17": source.kind: …`).

use std::ops::Range;
use std::path::PathBuf;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::ConfigError;

/// Gives each error of a TOML file that names no line or row the line of its field: the
/// field's key where it is written, else the nearest table on its path that is. Each file is
/// read and parsed once, however many errors it has.
pub(super) fn locate(errors: &mut [ConfigError]) {
    let mut files: Vec<PathBuf> = (errors.iter())
        .filter(|e| target(e).is_some())
        .map(|e| e.file.clone())
        .collect();
    files.sort();
    files.dedup();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(doc) = DeTable::parse(&text) else {
            continue;
        };
        for e in errors.iter_mut().filter(|e| e.file == file) {
            let Some(family) = target(e) else {
                continue;
            };
            let Some(line) = line_of(&text, &doc, e, family.as_deref()) else {
                continue;
            };
            e.row = Some(match e.row.take() {
                Some(family) => format!("{family}, line {line}"),
                None => format!("line {line}"),
            });
        }
    }
}

/// Whether `e` is one to locate (a TOML file's, naming no line or row), and the `[[family]]`
/// whose own table it is about, if it is a family's (`family "…"`; a row's problem names its
/// row's line instead).
fn target(e: &ConfigError) -> Option<Option<String>> {
    if e.file.extension().is_none_or(|x| x != "toml") {
        return None;
    }
    let Some(row) = e.row.as_deref() else {
        return Some(None);
    };
    let id = (row.strip_prefix("family \""))
        .and_then(|r| r.strip_suffix('"'))
        .filter(|id| !id.contains('"'))?;
    Some(Some(id.to_string()))
}

/// The line of `e`'s field in `doc`, parsed from `text` (in the `[[family]]` whose id is
/// `family`, when given), when the field's table is found.
fn line_of(
    text: &str,
    doc: &Spanned<DeTable<'_>>,
    e: &ConfigError,
    family: Option<&str>,
) -> Option<usize> {
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
    Some(line_at(text, at.start))
}

/// The line of `text` at byte `offset`: the first one from there with something on it (a
/// table's span may start at the line break before its header).
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    let skipped = text[offset..].len() - text[offset..].trim_start().len();
    text[..offset + skipped].matches('\n').count() + 1
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
