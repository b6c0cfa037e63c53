//! The `file` kind: a JSON file, read on a blocking thread and at most `source.limit` of it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Fetch, Fetching, Source, SourceError, settings_of, too_large};
use crate::config::{ConfigError, Fields, SourceConfig, SourceContext, SourceSettings, SourceSpec};
use crate::domain::duration::Span;

const KIND: &str = "file";

/// `{ kind = "file", path }`: a JSON file, resolved against the project root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub path: PathBuf,
}

impl SourceSettings for FileSource {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn timeout(&self) -> Option<Span> {
        None
    }

    fn sample(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn same(&self, other: &dyn SourceSettings) -> bool {
        crate::config::same_settings(self, other)
    }
}

/// The `file` kind.
pub(super) struct File;

impl SourceConfig for File {
    fn kind(&self) -> &'static str {
        KIND
    }

    /// `path`, read and parsed now: a file that does not read as JSON is an error of `path`.
    fn read(
        &self,
        f: &mut Fields<'_, '_>,
        ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let path = crate::config::resolve(ctx.root, &f.req::<PathBuf>("path", errors)?);
        match (ctx.json_file_problem)(&path) {
            None => Some(SourceSpec::new(FileSource { path })),
            Some(message) => {
                errors.push(f.place.error("path", message));
                None
            }
        }
    }
}

impl Source for File {
    fn fetch<'a>(&'a self, spec: &'a SourceSpec, at: Fetch<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let s = settings_of::<FileSource>(spec, KIND)?;
            read_file(s.path.clone(), at.max_bytes).await
        })
    }
}

/// A file source's data, read on one blocking thread.
pub(super) async fn read_file(
    path: std::path::PathBuf,
    max_bytes: u64,
) -> Result<Value, SourceError> {
    let read = tokio::task::spawn_blocking(move || read_json_file(&path, max_bytes));
    read.await
        .map_err(|e| SourceError::Transient(format!("reading the file stopped: {e}")))?
}

/// A file source's data, read here (the caller is on a blocking thread) and at most
/// `max_bytes` of it: a file that grows past the limit while it is read fails like a larger one.
pub(crate) fn read_json_file(path: &std::path::Path, max_bytes: u64) -> Result<Value, SourceError> {
    use std::io::Read;
    let cannot =
        |e: std::io::Error| SourceError::Transient(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let announced = file.metadata().map(|m| m.len()).unwrap_or(0);
    if announced > max_bytes {
        return Err(too_large(&path.display().to_string(), max_bytes));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(&path.display().to_string(), max_bytes));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| SourceError::Permanent(format!("{} is not valid JSON: {e}", path.display())))
}
