//! Artifacts: the rendered report, written once and never changed, under content-addressed
//! keys `<report>/<date>/<sha256>.html` and `.txt`, with create-only writes. A render repeated
//! after a crash finds the complete artifact already stored and reuses it, so a job has exactly
//! one artifact whatever its attempts.

use std::path::Path;
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
}

impl ArtifactStore {
    /// `file://PATH` (relative to `root` unless absolute), `memory://`, or any URL object_store
    /// understands (`s3://…` and friends with the `cloud` feature).
    pub fn open(url: &str, root: &Path) -> Result<ArtifactStore, ArtifactError> {
        let open_err = |reason: String| ArtifactError::Open {
            url: url.to_string(),
            reason,
        };
        let store: Arc<dyn ObjectStore> = if let Some(path) = url.strip_prefix("file://") {
            let dir = crate::config::resolve(root, Path::new(path));
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

    /// How many objects exist under `report/date` (for tests and `show`).
    pub async fn count(&self, report: &str, date: &str) -> Result<usize, ArtifactError> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("{report}/{date}"));
        let listed: Vec<object_store::ObjectMeta> =
            self.store.list(Some(&prefix)).try_collect().await?;
        Ok(listed.len())
    }
}
