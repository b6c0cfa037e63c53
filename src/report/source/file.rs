//! The `file` kind: a JSON file, read on a blocking thread and at most `source.limit` of it.

use serde_json::Value;

use super::{SourceError, too_large};

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
