//! Reads one TOML table field by field so that every problem of a file is collected, not only
//! the first one serde would stop at. Unknown keys are errors.

use std::collections::BTreeSet;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::ConfigError;
use crate::domain::duration::Span;

/// Where a table sits: its file, the report it belongs to, and the field path leading to it.
#[derive(Debug, Clone)]
pub struct Place<'a> {
    pub file: &'a Path,
    /// A `[[family]]` report's row: `family "…", <rows file> line N`.
    pub row: Option<&'a str>,
    pub report: Option<&'a str>,
    pub prefix: String,
}

impl<'a> Place<'a> {
    pub fn new(file: &'a Path) -> Self {
        Place {
            file,
            row: None,
            report: None,
            prefix: String::new(),
        }
    }

    pub fn field(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else if name.starts_with('[') {
            format!("{}{name}", self.prefix)
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    pub(crate) fn nested(&self, name: &str) -> Place<'a> {
        Place {
            file: self.file,
            row: self.row,
            report: self.report,
            prefix: self.field(name),
        }
    }

    /// A warning about `field`, in the words an error would use.
    pub fn warning(&self, field: &str, message: &str) -> String {
        let row = self.row.map(|r| format!("{r}: ")).unwrap_or_default();
        match self.report {
            Some(report) => format!(
                "{}: {row}report {report:?}: {}: {message}",
                self.file.display(),
                self.field(field)
            ),
            None => format!(
                "{}: {row}{}: {message}",
                self.file.display(),
                self.field(field)
            ),
        }
    }

    pub fn error(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_path_buf(),
            row: self.row.map(str::to_string),
            report: self.report.map(str::to_string),
            field: self.field(field),
            message: message.into(),
        }
    }
}

/// A cursor over one table that records which keys were read.
pub struct Fields<'t, 'a> {
    table: &'t toml::Table,
    pub place: Place<'a>,
    seen: BTreeSet<&'static str>,
}

impl<'t, 'a> Fields<'t, 'a> {
    pub fn new(table: &'t toml::Table, place: Place<'a>) -> Self {
        Fields {
            table,
            place,
            seen: BTreeSet::new(),
        }
    }

    pub fn raw(&mut self, name: &'static str) -> Option<&'t toml::Value> {
        self.seen.insert(name);
        self.table.get(name)
    }

    /// An optional field; a value of the wrong shape is an error and reads as absent.
    pub(crate) fn opt<T: DeserializeOwned>(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<T> {
        let value = self.raw(name)?.clone();
        match T::deserialize(value) {
            Ok(v) => Some(v),
            Err(e) => {
                errors.push(self.place.error(name, e.message().to_string()));
                None
            }
        }
    }

    /// A list of distinct email addresses (`email`, `owners`): each bad or repeated one an
    /// error naming its place (`owners[1]`).
    pub fn addresses(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Vec<lettre::Address> {
        let mut out: Vec<lettre::Address> = Vec::new();
        let listed = self.opt::<Vec<String>>(name, errors).unwrap_or_default();
        for (i, addr) in listed.iter().enumerate() {
            let field = format!("{name}[{i}]");
            match addr.trim().parse::<lettre::Address>() {
                Ok(a) if out.contains(&a) => {
                    errors.push((self.place).error(&field, format!("{addr:?} is listed twice")))
                }
                Ok(a) => out.push(a),
                Err(e) => errors.push(
                    (self.place).error(&field, format!("{addr:?} is not an email address: {e}")),
                ),
            }
        }
        out
    }

    /// A required field.
    pub fn req<T: DeserializeOwned>(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<T> {
        if self.table.get(name).is_none() {
            self.seen.insert(name);
            errors.push(self.place.error(name, "missing required field"));
            return None;
        }
        self.opt(name, errors)
    }

    /// A sub-table such as `[database]`; absent reads as an empty table.
    pub fn table(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<&'t toml::Table> {
        match self.raw(name) {
            None => None,
            Some(toml::Value::Table(t)) => Some(t),
            Some(other) => {
                errors.push(self.place.error(
                    name,
                    format!("expected a table, found {}", other.type_str()),
                ));
                None
            }
        }
    }

    /// Reports every key that no reader asked for.
    /// An optional duration that must be longer than zero.
    pub(crate) fn positive(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<Span> {
        let span = self.opt::<Span>(name, errors)?;
        if span.is_zero() {
            errors.push(self.place.error(name, "must be longer than zero"));
            return None;
        }
        Some(span)
    }

    /// An optional size in bytes from 1 to `max`: `4096`, `"512KiB"`, `"10MiB"`, `"1GiB"`.
    pub fn bytes(
        &mut self,
        name: &'static str,
        max: u64,
        errors: &mut Vec<ConfigError>,
    ) -> Option<u64> {
        let value = self.raw(name)?;
        match size_of(value) {
            Some(n) if (1..=max).contains(&n) => Some(n),
            _ => {
                let message = format!(
                    "{value} is not a size from 1 byte to {} (e.g. \"10MiB\")",
                    shown_size(max)
                );
                errors.push(self.place.error(name, message));
                None
            }
        }
    }

    /// An optional whole number of at least 1.
    pub(crate) fn at_least_one(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<u32> {
        let n = self.opt::<i64>(name, errors)?;
        match u32::try_from(n) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                errors.push(self.place.error(
                    name,
                    format!("must be a whole number of at least 1, found {n}"),
                ));
                None
            }
        }
    }

    /// An optional field naming an environment variable (the secret stays in the environment).
    pub(crate) fn env_name(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<String> {
        let env = self.opt::<String>(name, errors)?;
        self.valid_env(name, env, errors)
    }

    /// [`Fields::env_name`] for a required field.
    pub(crate) fn env_name_required(
        &mut self,
        name: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<String> {
        let env = self.req::<String>(name, errors)?;
        self.valid_env(name, env, errors)
    }

    fn valid_env(
        &self,
        name: &'static str,
        env: String,
        errors: &mut Vec<ConfigError>,
    ) -> Option<String> {
        if super::valid_env_name(&env) {
            Some(env)
        } else {
            let message = format!("{env:?} is not an environment variable name");
            errors.push(self.place.error(name, message));
            None
        }
    }

    pub fn finish(self, errors: &mut Vec<ConfigError>) {
        for key in self.table.keys() {
            if !self.seen.contains(key.as_str()) {
                let known: Vec<&str> = self.seen.iter().copied().collect();
                errors.push(self.place.error(
                    key,
                    format!("unknown key (expected one of: {})", known.join(", ")),
                ));
            }
        }
    }
}

/// Parses a whole file into a table, or one error naming the line.
pub(crate) fn parse_file(path: &Path, errors: &mut Vec<ConfigError>) -> Option<toml::Table> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            errors.push(Place::new(path).error("(file)", format!("cannot read: {e}")));
            return None;
        }
    };
    match text.parse::<toml::Table>() {
        Ok(t) => Some(t),
        Err(e) => {
            let mut msg = e.message().to_string();
            if let Some(span) = e.span() {
                let line = text[..span.start.min(text.len())].lines().count().max(1);
                msg = format!("line {line}: {msg}");
            }
            errors.push(Place::new(path).error("(syntax)", format!("invalid TOML: {msg}")));
            None
        }
    }
}

/// A size as TOML gives it: a whole number of bytes, or a string `"512KiB"`, `"10MiB"`, `"1GiB"`.
pub(crate) fn size_of(value: &toml::Value) -> Option<u64> {
    match value {
        toml::Value::Integer(n) => u64::try_from(*n).ok(),
        toml::Value::String(s) => parse_bytes(s),
        _ => None,
    }
}

fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    n.parse::<u64>().ok()?.checked_mul(scale)
}

/// A size for a person, in the largest binary unit it is a whole number of (`10MiB`, `1500B`).
pub(crate) fn shown_size(n: u64) -> String {
    [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|(unit, _)| n >= *unit && n.is_multiple_of(*unit))
        .map_or_else(
            || format!("{n}B"),
            |(unit, name)| format!("{}{name}", n / unit),
        )
}

/// Why `u` is not an http(s) URL templated with `{{window.start}}` and `{{window.end}}` only,
/// if it is not (checked with sample values in place of the window).
pub(crate) fn window_url(u: &str) -> Result<(), String> {
    let sample = u
        .replace("{{window.start}}", "2026-01-01T00:00:00Z")
        .replace("{{window.end}}", "2026-01-02T00:00:00Z");
    if sample.contains("{{") {
        return Err(format!(
            "{u:?}: only {{{{window.start}}}} and {{{{window.end}}}} may be templated"
        ));
    }
    match url::Url::parse(&sample) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
        _ => Err(format!("{u:?} is not an http or https URL")),
    }
}
