//! Artifacts: the rendered report, written once and never changed, under content-addressed
//! keys `<report>/<date>/<sha256>.html` and `.txt`, with create-only writes. A render repeated
//! after a crash finds the complete artifact already stored and reuses it, so a job has exactly
//! one artifact whatever its attempts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use sha2::{Digest, Sha256};

use crate::ledger::ArtifactRef;
use crate::render::Rendered;

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("artifact store {url}: {reason}")]
    Open { url: String, reason: String },
    #[error("artifact store: {0}")]
    Store(#[from] object_store::Error),
}

/// The artifact store and where it points.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    store: Arc<dyn ObjectStore>,
    url: String,
    /// The folder of a `file://` store: what a purge removes beyond the listed objects (the
    /// staging files `<key>#<n>` a crash mid-write leaves, which listings hide).
    local_dir: Option<PathBuf>,
}

impl ArtifactStore {
    /// `file://PATH` (relative to `root` unless absolute), `memory://`, or any URL object_store
    /// understands (`s3://…` and friends with the `cloud` feature).
    pub fn open(url: &str, root: &Path) -> Result<ArtifactStore, ArtifactError> {
        let open_err = |reason: String| ArtifactError::Open {
            url: url.to_string(),
            reason,
        };
        let mut local_dir = None;
        let store: Arc<dyn ObjectStore> = if let Some(path) = url.strip_prefix("file://") {
            let dir = crate::config::resolve(root, Path::new(path));
            local_dir = Some(dir.clone());
            std::fs::create_dir_all(&dir)
                .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
            Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| open_err(e.to_string()))?,
            )
        } else if url.starts_with("memory://") {
            Arc::new(InMemory::new())
        } else {
            let parsed = url::Url::parse(url).map_err(|e| open_err(e.to_string()))?;
            let (store, prefix) =
                object_store::parse_url(&parsed).map_err(|e| open_err(e.to_string()))?;
            Arc::new(object_store::prefix::PrefixStore::new(store, prefix))
        };
        Ok(ArtifactStore {
            store,
            url: url.to_string(),
            local_dir,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A complete artifact already stored for this report and date, if any.
    pub async fn find(
        &self,
        report: &str,
        date: &str,
    ) -> Result<Option<ArtifactRef>, ArtifactError> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("{report}/{date}"));
        let listed: Vec<object_store::ObjectMeta> =
            self.store.list(Some(&prefix)).try_collect().await?;
        let mut html = None;
        for meta in &listed {
            let key = meta.location.to_string();
            if let Some(stem) = key.strip_suffix(".html") {
                let text_key = format!("{stem}.txt");
                if let Some(text) = listed.iter().find(|m| m.location.as_ref() == text_key) {
                    let sha256 = stem.rsplit('/').next().unwrap_or_default().to_string();
                    html = Some(ArtifactRef {
                        html_key: key.clone(),
                        text_key,
                        sha256,
                        bytes: i64::try_from(meta.size + text.size).unwrap_or(i64::MAX),
                    });
                    break;
                }
            }
        }
        Ok(html)
    }

    /// Writes both parts create-only; an object already there is the "already rendered" signal
    /// and is reused. Returns the reference and whether this call wrote anything.
    pub async fn write(
        &self,
        report: &str,
        date: &str,
        rendered: &Rendered,
    ) -> Result<(ArtifactRef, bool), ArtifactError> {
        let mut hasher = Sha256::new();
        hasher.update(rendered.html.as_bytes());
        hasher.update([0u8]);
        hasher.update(rendered.text.as_bytes());
        let sha256 = hex::encode(hasher.finalize());
        let html_key = format!("{report}/{date}/{sha256}.html");
        let text_key = format!("{report}/{date}/{sha256}.txt");
        // The text part first: `find` treats an artifact as complete once its .html exists.
        let wrote_text = self.put_create(&text_key, rendered.text.clone()).await?;
        let wrote_html = self.put_create(&html_key, rendered.html.clone()).await?;
        Ok((
            ArtifactRef {
                html_key,
                text_key,
                sha256,
                bytes: i64::try_from(rendered.html.len() + rendered.text.len()).unwrap_or(i64::MAX),
            },
            wrote_text || wrote_html,
        ))
    }

    async fn put_create(&self, key: &str, body: String) -> Result<bool, ArtifactError> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(
                &ObjectPath::from(key),
                PutPayload::from(Bytes::from(body)),
                opts,
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one part.
    pub async fn read(&self, key: &str) -> Result<Bytes, ArtifactError> {
        Ok(self
            .store
            .get(&ObjectPath::from(key))
            .await?
            .bytes()
            .await?)
    }

    /// Reads both parts of an artifact.
    pub async fn read_rendered(&self, artifact: &ArtifactRef) -> Result<Rendered, ArtifactError> {
        let html = self.read(&artifact.html_key).await?;
        let text = self.read(&artifact.text_key).await?;
        Ok(Rendered {
            html: String::from_utf8_lossy(&html).into_owned(),
            text: String::from_utf8_lossy(&text).into_owned(),
        })
    }

    /// Deletes one object; one already gone counts as deleted.
    pub async fn delete(&self, key: &str) -> Result<(), ArtifactError> {
        match self.store.delete(&ObjectPath::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes everything under a job's prefix `report/date/`: its artifact, any artifact a
    /// crash left beside it, and (on `file://`) staging files of interrupted writes. Idempotent.
    pub async fn purge(&self, report: &str, date: &str) -> Result<u64, ArtifactError> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("{report}/{date}"));
        let listed: Vec<object_store::ObjectMeta> =
            self.store.list(Some(&prefix)).try_collect().await?;
        let mut deleted = 0;
        for meta in &listed {
            self.delete(meta.location.as_ref()).await?;
            deleted += 1;
        }
        if let Some(dir) = self.job_dir(report, date) {
            match tokio::fs::remove_dir_all(&dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ArtifactError::Open {
                        url: self.url.clone(),
                        reason: format!("cannot remove {}: {e}", dir.display()),
                    });
                }
            }
        }
        Ok(deleted)
    }

    /// The folder of a job's objects on a `file://` store. Report ids and dates are checked
    /// names (no `/`, no `..`), so this stays inside the store.
    fn job_dir(&self, report: &str, date: &str) -> Option<PathBuf> {
        let safe = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\']);
        match &self.local_dir {
            Some(root) if safe(report) && safe(date) => Some(root.join(report).join(date)),
            _ => None,
        }
    }

    /// Every file under a job's prefix, staging files included (`file://`; other stores: the
    /// listed objects). What the chaos benchmark and the tests count as orphans.
    pub async fn count_files(&self, report: &str, date: &str) -> Result<usize, ArtifactError> {
        match self.job_dir(report, date) {
            Some(dir) => match std::fs::read_dir(&dir) {
                Ok(entries) => Ok(entries.filter_map(|e| e.ok()).count()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
                Err(e) => Err(ArtifactError::Open {
                    url: self.url.clone(),
                    reason: format!("cannot list {}: {e}", dir.display()),
                }),
            },
            None => self.count(report, date).await,
        }
    }

    /// How many objects exist under `report/date` (for tests and `show`).
    pub async fn count(&self, report: &str, date: &str) -> Result<usize, ArtifactError> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("{report}/{date}"));
        let listed: Vec<object_store::ObjectMeta> =
            self.store.list(Some(&prefix)).try_collect().await?;
        Ok(listed.len())
    }
}
