//! A `file://` store's writes: every part of an artifact on one blocking thread, each staged in
//! `<file>#<random>` and published with a hard link, which fails when the file exists
//! (create-only, as object_store's `LocalFileSystem` does it, whose reads and listings see the
//! same files and skip the staged ones). A write killed halfway leaves its staged file: the
//! next write into the folder (the job rendered again) removes every staged file there. A
//! staged name is never used twice, so removing one a live writer still holds makes that write
//! fail (and its render be retried), never publish another write's bytes.
//! Through object_store each part was a hand-off of its own to the blocking pool, and the
//! first part's open failed before its folder was made. The caller is on a blocking thread.

use std::io::Write;
use std::path::{Path, PathBuf};

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;

use super::ArtifactError;

/// Where each part of `artifact` goes in the store `fs`, in the order they are written (see
/// [`super::parts`]). A part's name is its hash and extension, which no path encoding changes:
/// its folder is mapped to the file system once for the parts it holds.
pub(super) fn files<'a>(
    fs: &LocalFileSystem,
    artifact: &'a super::ArtifactRef,
    rendered: &'a crate::report::render::Rendered,
) -> Result<Vec<(PathBuf, &'a [u8])>, ArtifactError> {
    let mut files = Vec::with_capacity(3);
    let mut folder: Option<(String, PathBuf)> = None;
    for (key, body) in super::parts(artifact, rendered) {
        let plain = |name: &str| name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.');
        let path = match key.rsplit_once('/') {
            Some((dir, name)) if plain(name) => match &folder {
                Some((at, path)) if at == dir => path.join(name),
                _ => {
                    let path = fs.path_to_filesystem(&ObjectPath::from(dir))?;
                    let file = path.join(name);
                    folder = Some((dir.to_string(), path));
                    file
                }
            },
            _ => fs.path_to_filesystem(&ObjectPath::from(key.as_str()))?,
        };
        files.push((path, body));
    }
    Ok(files)
}

/// Writes each `(path, body)` in order, create-only, on the caller's (blocking) thread; a file
/// already there is kept. Returns whether any part was written by this call.
pub(super) fn write_files<B: AsRef<[u8]>>(parts: &[(PathBuf, B)]) -> Result<bool, ArtifactError> {
    let folders: std::collections::BTreeSet<&Path> = (parts.iter())
        .filter_map(|(path, _)| path.parent())
        .collect();
    for folder in folders {
        remove_staged(folder);
    }
    let mut made_folder = false;
    let mut wrote = false;
    for (path, body) in parts {
        wrote |= write_part(path, body.as_ref(), &mut made_folder)?;
    }
    Ok(wrote)
}

/// One part: staged, then linked into place unless a file is already there.
fn write_part(path: &Path, body: &[u8], made_folder: &mut bool) -> Result<bool, ArtifactError> {
    let (mut file, staged) = staging_file(path, made_folder)?;
    let published = file
        .write_all(body)
        .and_then(|()| {
            drop(file);
            std::fs::hard_link(&staged, path)
        })
        .map(|()| true);
    let _ = std::fs::remove_file(&staged);
    match published {
        Ok(wrote) => Ok(wrote),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(file_error(path, &e)),
    }
}

/// Removes the staged files a killed write left in `folder` (names holding `#`); a folder not
/// there yet has none.
fn remove_staged(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().contains('#') {
            let path = entry.path();
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "removed a part a killed write left half-written")
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "could not remove a half-written part; retention removes it")
                }
            }
        }
    }
}

/// A new staging file `<path>#<random>` beside `path` (its folder made when missing, once).
fn staging_file(
    path: &Path,
    made_folder: &mut bool,
) -> Result<(std::fs::File, PathBuf), ArtifactError> {
    let mut n = 1u32;
    loop {
        use rand::RngExt as _;
        let mut staged = path.as_os_str().to_owned();
        staged.push(format!("#{:016x}", rand::rng().random::<u64>()));
        let staged = PathBuf::from(staged);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staged);
        match opened {
            Ok(file) => return Ok((file, staged)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !*made_folder => {
                *made_folder = true;
                let folder = path.parent().unwrap_or(Path::new("."));
                std::fs::create_dir_all(folder).map_err(|e| file_error(folder, &e))?;
            }
            Err(e) => return Err(file_error(&staged, &e)),
        }
    }
}

fn file_error(path: &Path, e: &std::io::Error) -> ArtifactError {
    ArtifactError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(dir: &Path, name: &str, body: &str) -> (PathBuf, String) {
        (dir.join("r/2026-10-25").join(name), body.to_string())
    }

    #[test]
    fn parts_are_written_once_and_never_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = vec![
            part(dir.path(), "a.txt", "one"),
            part(dir.path(), "a.html", "<p>"),
        ];
        assert!(write_files(&first).expect("write"), "the folder is made");
        let again = vec![
            part(dir.path(), "a.txt", "two"),
            part(dir.path(), "a.html", "<b>"),
        ];
        assert!(!write_files(&again).expect("write"), "nothing written");
        let read = |name| std::fs::read_to_string(dir.path().join("r/2026-10-25").join(name));
        assert_eq!(read("a.txt").expect("txt"), "one");
        assert_eq!(read("a.html").expect("html"), "<p>");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("r/2026-10-25"))
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names.len(), 2, "no staging file is left: {names:?}");
    }

    #[test]
    fn a_staging_file_a_killed_write_left_is_removed_when_the_job_renders_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, body) = part(dir.path(), "a.html", "<p>whole</p>");
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut left = path.as_os_str().to_owned();
        left.push("#1");
        std::fs::write(&left, "<p>wh").expect("left");
        assert!(write_files(&[(path.clone(), body)]).expect("write"));
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "<p>whole</p>"
        );
        assert!(!Path::new(&left).exists(), "the half-written part is gone");
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("parent"))
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names.len(), 1, "only the part: {names:?}");
    }

    #[tokio::test]
    async fn what_a_file_store_writes_another_store_on_its_folder_finds_intact() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("file://{}", dir.path().display());
        let rendered = crate::report::render::Rendered {
            html: "<p>Carrier 7</p>".into(),
            text: "Carrier 7".into(),
            csv: Some("carrier\n7\n".into()),
            parts: Default::default(),
            images: Default::default(),
            xlsx: None,
        };
        for report in ["warehouse-17", "caf\u{e9} #7"] {
            let writer = super::super::ArtifactStore::open(&url, dir.path()).expect("open");
            let (written, wrote) = writer
                .write(report, "2026-10-25", &std::sync::Arc::new(rendered.clone()))
                .await
                .expect("write");
            assert!(wrote, "{report}");
            let reader = super::super::ArtifactStore::open(&url, dir.path()).expect("open");
            let found = reader.find(report, "2026-10-25").await.expect("find");
            // (A listing names an odd report's folder percent-encoded, as object_store does.)
            assert_eq!(
                found.map(|a| a.sha256),
                Some(written.sha256.clone()),
                "{report}"
            );
            let checked = reader.check(&written).await.expect("check");
            assert!(
                matches!(&checked, super::super::StoredArtifact::Intact(r) if *r == rendered),
                "{report}: {checked:?}"
            );
        }
    }

    #[test]
    fn a_folder_that_cannot_be_made_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("r"), "a file where the folder goes").expect("write");
        let err = write_files(&[part(dir.path(), "a.html", "<p>")]).expect_err("no folder");
        let said = err.to_string();
        assert!(
            said.contains("artifact file") && said.contains("r/2026-10-25"),
            "{said}"
        );
    }
}
