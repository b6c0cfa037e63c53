//! The `file` kind: a JSON file, read on a blocking thread and at most `source.limit` of it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    Answer, Ask, Asking, Fetch, Fetching, ProbeOutcome, Source, SourceError, settings_of, too_large,
};
use crate::config::{ConfigError, Fields, SourceConfig, SourceContext, SourceSpec};
use crate::domain::window::{Window, rfc3339};

const KIND: &str = "file";

/// `{ kind = "file", path }`: a JSON file, resolved against the project root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub path: PathBuf,
}

source_settings!(FileSource {
    fn sample(&self) -> Option<&Path> {
        Some(&self.path)
    }
});

/// `ready_when = { kind = "file", path }`: ready once the file exists; its path may hold
/// `{{date}}`, `{{window.start}}` and `{{window.end}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProbe {
    pub path: String,
}

source_settings!(FileProbe {});

/// The placeholders a file probe's path may hold.
const FILE_PLACEHOLDERS: [&str; 3] = ["{{date}}", "{{window.start}}", "{{window.end}}"];

/// A file probe's path for a job: `{{date}}` is its local date, the window's bounds RFC 3339.
pub(crate) fn file_path(template: &str, date: chrono::NaiveDate, window: &Window) -> String {
    template
        .replace("{{date}}", &date.to_string())
        .replace("{{window.start}}", &rfc3339(window.start))
        .replace("{{window.end}}", &rfc3339(window.end))
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

    fn probes(&self) -> bool {
        true
    }

    fn read_probe(
        &self,
        f: &mut Fields<'_, '_>,
        ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        let path = f.req::<String>("path", errors)?;
        let bare = (FILE_PLACEHOLDERS.iter()).fold(path.clone(), |p, ph| p.replace(ph, ""));
        if path.trim().is_empty() || bare.contains("{{") {
            let message = format!(
                "{path:?}: only {{{{date}}}}, {{{{window.start}}}} and {{{{window.end}}}} may be templated"
            );
            errors.push(f.place.error("path", message));
            return None;
        }
        let resolved = crate::config::resolve(ctx.root, Path::new(&path));
        let path = resolved.to_string_lossy().into_owned();
        Some(SourceSpec::new(FileProbe { path }))
    }
}

impl Source for File {
    fn fetch<'a>(&'a self, spec: &'a SourceSpec, at: Fetch<'a>) -> Fetching<'a> {
        Box::pin(async move {
            let s = settings_of::<FileSource>(spec, KIND)?;
            read_file(s.path.clone(), at.max_bytes).await
        })
    }

    fn ask<'a>(&'a self, probe: &'a SourceSpec, at: Ask<'a>) -> Asking<'a> {
        Box::pin(async move {
            let Some(p) = probe.settings::<FileProbe>() else {
                return Answer::new(ProbeOutcome::Failed, "not a file probe");
            };
            let path = file_path(&p.path, at.date, at.window);
            match tokio::fs::try_exists(&path).await {
                Ok(true) => Answer::new(ProbeOutcome::Ready, format!("{path} exists")),
                Ok(false) => Answer::new(ProbeOutcome::NotReady, format!("no file {path}")),
                Err(e) => Answer::new(ProbeOutcome::Failed, format!("cannot look for {path}: {e}")),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> chrono::DateTime<chrono::Utc> {
        s.parse().expect("an RFC 3339 instant")
    }

    #[test]
    fn a_file_probes_path_takes_the_jobs_date_and_window() {
        let window = Window {
            start: utc("2026-11-29T23:00:00Z"),
            end: utc("2026-11-30T23:00:00Z"),
        };
        let date = "2026-11-30".parse().expect("a date");
        assert_eq!(
            file_path("data/ready-{{date}}.flag", date, &window),
            "data/ready-2026-11-30.flag"
        );
        assert_eq!(
            file_path("x/{{window.start}}", date, &window),
            "x/2026-11-29T23:00:00Z"
        );
    }
}
