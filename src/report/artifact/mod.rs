//! Artifacts: the rendered report, written once and never changed, under content-addressed
//! keys `<report>/<date>/<sha256>.html`, `.txt`, (a report with a CSV attachment) `.csv`
//! and one `.<part>.json` per named part a destination kind sends (a chat message) and one
//! `.<chart>.png` per chart, with create-only writes. A render repeated
//! after a crash finds the complete artifact already stored and reuses it, so a job has exactly
//! one artifact whatever its attempts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use sha2::{Digest, Sha256};

use crate::config::ArtifactSettings;
use crate::report::render::Rendered;

mod local;

/// A job's stored artifact: references, never bytes. The ledger keeps one per rendered job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    pub html_key: String,
    pub text_key: String,
    /// The CSV attachment, when the report's template has one.
    pub csv_key: Option<String>,
    pub sha256: String,
    pub bytes: i64,
    /// The named parts a destination kind sends (a chat message), by name, and the charts, by
    /// id and `.png` (`late_by_hour.png`); each stored at [`ArtifactRef::part_key`].
    pub parts: Vec<String>,
}

impl ArtifactRef {
    /// The key of its part `name`: `<report>/<date>/<sha256>.<name>.json`, or a chart's
    /// `<report>/<date>/<sha256>.<id>.png`.
    pub fn part_key(&self, name: &str) -> String {
        let stem = self
            .html_key
            .strip_suffix(".html")
            .unwrap_or(&self.html_key);
        match is_file(name) {
            true => format!("{stem}.{name}"),
            false => format!("{stem}.{name}.json"),
        }
    }
}

/// Whether a part's name is a file's, with its extension (a chart's `<id>.png`, the
/// spreadsheet's `report.xlsx`), rather than a kind's JSON part's.
fn is_file(name: &str) -> bool {
    name.contains('.')
}

/// The spreadsheet's part name.
const XLSX: &str = "report.xlsx";

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("artifact store {url}: {reason}")]
    Open { url: String, reason: String },
    #[error("artifact store: {0}")]
    Store(#[from] object_store::Error),
    #[error("artifact file {path}: {reason}")]
    File { path: String, reason: String },
}

/// The artifact store and where it points.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    store: Arc<dyn ObjectStore>,
    url: String,
    /// The folder of a `file://` store: what a purge removes beyond the listed objects (the
    /// staging files `<key>#<n>` a crash mid-write leaves, which listings hide).
    local_dir: Option<PathBuf>,
    /// The same store as a `file://` store: its writes bypass object_store (see [`local`]).
    local: Option<Arc<object_store::local::LocalFileSystem>>,
    /// The artifacts this process wrote last, by `.html` key: a job's deliveries start right
    /// after its render, and read it from here instead of the store (a GET on S3). Keys are
    /// content hashes, so an entry can never disagree with the store.
    recent: Arc<std::sync::Mutex<Recent>>,
}

/// The artifacts written last, by `.html` key, oldest first; shared with their deliveries.
type Recent = std::collections::VecDeque<(String, Arc<Rendered>)>;

/// How many artifacts [`ArtifactStore`] keeps in memory after writing them.
const RECENT: usize = 64;

impl ArtifactStore {
    /// `file://PATH` (relative to `root` unless absolute), `memory://`, or any URL object_store
    /// understands (`s3://…` with the `s3` feature, `gs://` and `az://` with `cloud`), with
    /// their settings from the environment.
    pub fn open(url: &str, root: &Path) -> Result<ArtifactStore, ArtifactError> {
        let settings = ArtifactSettings {
            url: url.to_string(),
            ..ArtifactSettings::default()
        };
        Self::from_settings(&settings, root)
    }

    /// The store `[artifacts]` of dawnpost.toml describes.
    pub fn from_settings(
        settings: &ArtifactSettings,
        root: &Path,
    ) -> Result<ArtifactStore, ArtifactError> {
        let url = settings.url.as_str();
        let open_err = |reason: String| ArtifactError::Open {
            url: url.to_string(),
            reason,
        };
        let (mut local_dir, mut local) = (None, None);
        let store: Arc<dyn ObjectStore> = if let Some(path) = url.strip_prefix("file://") {
            let dir = crate::config::resolve(root, Path::new(path));
            local_dir = Some(dir.clone());
            std::fs::create_dir_all(&dir)
                .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
            let fs = Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| open_err(e.to_string()))?,
            );
            local = Some(fs.clone());
            fs
        } else if url.starts_with("memory://") {
            Arc::new(InMemory::new())
        } else {
            let parsed = url::Url::parse(url).map_err(|e| open_err(e.to_string()))?;
            let (store, prefix) = object_store::parse_url_opts(&parsed, store_options(settings))
                .map_err(|e| open_err(e.to_string()))?;
            Arc::new(object_store::prefix::PrefixStore::new(store, prefix))
        };
        Ok(ArtifactStore {
            store,
            url: url.to_string(),
            local_dir,
            local,
            recent: Arc::default(),
        })
    }

    /// A store already built (an S3 client with its credentials in hand, say), under `url`.
    pub fn with_store(store: Arc<dyn ObjectStore>, url: &str) -> ArtifactStore {
        ArtifactStore {
            store,
            url: url.to_string(),
            local_dir: None,
            local: None,
            recent: Arc::default(),
        }
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
                    let csv_key = format!("{stem}.csv");
                    let csv = listed.iter().find(|m| m.location.as_ref() == csv_key);
                    let named: Vec<(String, u64)> = (listed.iter())
                        .filter_map(|m| {
                            let rest = m.location.as_ref().strip_prefix(stem)?;
                            let rest = rest.strip_prefix('.')?;
                            let name = match rest.strip_suffix(".json") {
                                Some(name) => name,
                                None if rest.ends_with(".png") || rest == XLSX => rest,
                                None => return None,
                            };
                            Some((name.to_string(), m.size))
                        })
                        .collect();
                    let size = meta.size
                        + text.size
                        + csv.map_or(0, |c| c.size)
                        + named.iter().map(|(_, n)| n).sum::<u64>();
                    let mut parts: Vec<String> = named.into_iter().map(|(n, _)| n).collect();
                    parts.sort();
                    html = Some(ArtifactRef {
                        html_key: key.clone(),
                        text_key,
                        csv_key: csv.map(|_| csv_key),
                        sha256,
                        bytes: i64::try_from(size).unwrap_or(i64::MAX),
                        parts,
                    });
                    break;
                }
            }
        }
        Ok(html)
    }

    /// Writes every part create-only; an object already there is the "already rendered" signal
    /// and is reused. Returns the reference and whether this call wrote anything.
    pub async fn write(
        &self,
        report: &str,
        date: &str,
        rendered: &Arc<Rendered>,
    ) -> Result<(ArtifactRef, bool), ArtifactError> {
        if self.local.is_some() {
            // A `file://` store writes every part on one blocking thread.
            let (me, at) = (self.clone(), (report.to_string(), date.to_string()));
            let owned = Arc::clone(rendered);
            let written =
                tokio::task::spawn_blocking(move || me.write_blocking(&at.0, &at.1, &owned));
            match written.await {
                Ok(Some(result)) => return result,
                Ok(None) => {}
                Err(e) => return Err(self.open_error(format!("the write stopped: {e}"))),
            }
        }
        let artifact = reference(report, date, rendered);
        let mut wrote = false;
        for (key, body) in parts(&artifact, rendered) {
            wrote |= self.put_create(&key, Bytes::copy_from_slice(body)).await?;
        }
        self.remember(&artifact.html_key, rendered);
        Ok((artifact, wrote))
    }

    fn open_error(&self, reason: String) -> ArtifactError {
        ArtifactError::Open {
            url: self.url.clone(),
            reason,
        }
    }

    /// [`ArtifactStore::write`] on a `file://` store, done on the caller's thread (a blocking
    /// one: a render that reads a file and writes its artifact hands off once). `None` for
    /// other stores.
    pub(crate) fn write_blocking(
        &self,
        report: &str,
        date: &str,
        rendered: &Arc<Rendered>,
    ) -> Option<Result<(ArtifactRef, bool), ArtifactError>> {
        let fs = self.local.as_ref()?;
        let artifact = reference(report, date, rendered);
        let written = local::files(fs, &artifact, rendered).and_then(|f| local::write_files(&f));
        Some(written.map(|wrote| {
            self.remember(&artifact.html_key, rendered);
            (artifact, wrote)
        }))
    }

    /// Whether this is a `file://` store (see [`ArtifactStore::write_blocking`]).
    pub(crate) fn is_local(&self) -> bool {
        self.local.is_some()
    }

    async fn put_create(&self, key: &str, body: Bytes) -> Result<bool, ArtifactError> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&ObjectPath::from(key), PutPayload::from(body), opts)
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

    /// Reads every part of an artifact.
    pub async fn read_rendered(
        &self,
        artifact: &ArtifactRef,
    ) -> Result<Arc<Rendered>, ArtifactError> {
        if let Some(r) = self.recalled(&artifact.html_key) {
            return Ok(r);
        }
        let html = self.read(&artifact.html_key).await?;
        let text = self.read(&artifact.text_key).await?;
        let csv = match &artifact.csv_key {
            Some(key) => Some(self.read(key).await?),
            None => None,
        };
        let mut named = Vec::with_capacity(artifact.parts.len());
        for name in &artifact.parts {
            named.push((name.as_str(), self.read(&artifact.part_key(name)).await?));
        }
        Ok(Arc::new(decoded(&html, &text, csv.as_deref(), &named)))
    }

    /// Keeps the artifact just written (shared, not copied) for its deliveries.
    fn remember(&self, html_key: &str, rendered: &Arc<Rendered>) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.iter().any(|(k, _)| k == html_key) {
            return;
        }
        if recent.len() >= RECENT {
            recent.pop_front();
        }
        recent.push_back((html_key.to_string(), Arc::clone(rendered)));
    }

    fn forget(&self, gone: impl Fn(&str) -> bool) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(k, _)| !gone(k));
    }

    fn recalled(&self, html_key: &str) -> Option<Arc<Rendered>> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .iter()
            .find(|(k, _)| k == html_key)
            .map(|(_, r)| Arc::clone(r))
    }

    /// Reads an artifact the ledger names back from the store and checks it against its
    /// sha256: what `show` reports, so an operator sees the bytes recipients were sent exist.
    pub async fn check(&self, artifact: &ArtifactRef) -> Result<StoredArtifact, ArtifactError> {
        let read = |key: String| async move {
            match self.read(&key).await {
                Ok(b) => Ok(Some(b)),
                Err(ArtifactError::Store(object_store::Error::NotFound { .. })) => Ok(None),
                Err(e) => Err(e),
            }
        };
        let html = read(artifact.html_key.clone()).await?;
        let text = read(artifact.text_key.clone()).await?;
        let csv = match &artifact.csv_key {
            Some(key) => match read(key.clone()).await? {
                Some(csv) => Some(csv),
                None => return Ok(StoredArtifact::Missing),
            },
            None => None,
        };
        let mut named = Vec::with_capacity(artifact.parts.len());
        for name in &artifact.parts {
            match read(artifact.part_key(name)).await? {
                Some(body) => named.push((name.as_str(), body)),
                None => return Ok(StoredArtifact::Missing),
            }
        }
        let (Some(html), Some(text)) = (html, text) else {
            return Ok(StoredArtifact::Missing);
        };
        let bodies: Vec<(&str, &[u8])> = named.iter().map(|(n, b)| (*n, b.as_ref())).collect();
        let sha256 = digest(&html, &text, csv.as_deref(), &bodies);
        if sha256 != artifact.sha256 {
            return Ok(StoredArtifact::Altered { sha256 });
        }
        Ok(StoredArtifact::Intact(decoded(
            &html,
            &text,
            csv.as_deref(),
            &named,
        )))
    }

    /// Deletes one object; one already gone counts as deleted.
    pub async fn delete(&self, key: &str) -> Result<(), ArtifactError> {
        let stem = key
            .strip_suffix(".html")
            .or_else(|| key.strip_suffix(".txt"))
            .or_else(|| key.strip_suffix(".csv"))
            .or_else(|| {
                key.strip_suffix(".json")
                    .and_then(|k| Some(k.rsplit_once('.')?.0))
            })
            .unwrap_or(key);
        self.forget(|html_key| html_key.strip_suffix(".html") == Some(stem));
        match self.store.delete(&ObjectPath::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes everything under a job's prefix `report/date/`: its artifact, any artifact a
    /// crash left beside it, and (on `file://`) staging files of interrupted writes. Idempotent.
    pub(crate) async fn purge(&self, report: &str, date: &str) -> Result<u64, ArtifactError> {
        use futures_util::TryStreamExt;
        let prefix = ObjectPath::from(format!("{report}/{date}"));
        let job_prefix = format!("{report}/{date}/");
        self.forget(|html_key| html_key.starts_with(&job_prefix));
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
                    return Err(self.open_error(format!("cannot remove {}: {e}", dir.display())));
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
                Err(e) => Err(self.open_error(format!("cannot list {}: {e}", dir.display()))),
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

/// The options of a cloud store's builder: the provider's own environment variables
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`, as its SDKs read them), then what `[artifacts]` sets, which
/// wins. Credentials stay in the environment; the file names the variables.
fn store_options(settings: &ArtifactSettings) -> Vec<(String, String)> {
    let mut options: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            ["AWS_", "GOOGLE_", "AZURE_"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .collect();
    let mut set = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            options.push((key.to_string(), v));
        }
    };
    set("aws_endpoint", settings.endpoint.clone());
    set("aws_region", settings.region.clone());
    if settings.allow_http {
        set("aws_allow_http", Some("true".into()));
    }
    let from_env = |name: &Option<String>| name.as_ref().and_then(|n| std::env::var(n).ok());
    set("aws_access_key_id", from_env(&settings.access_key_id_env));
    set(
        "aws_secret_access_key",
        from_env(&settings.secret_access_key_env),
    );
    options
}

/// What [`ArtifactStore::check`] found in the store.
#[derive(Debug, Clone)]
pub enum StoredArtifact {
    /// Both parts are there and hash to the ledger's sha256.
    Intact(Rendered),
    /// A part is gone.
    Missing,
    /// Both parts are there but hash to something else.
    Altered { sha256: String },
}

/// An artifact's stored parts as text (bytes that are not UTF-8 are replaced, never refused:
/// the store holds what dawnpost wrote).
fn decoded(
    html: &[u8],
    text: &[u8],
    csv: Option<&[u8]>,
    named: &[(&str, impl AsRef<[u8]>)],
) -> Rendered {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (files, texts): (Vec<_>, Vec<_>) = named.iter().partition(|(name, _)| is_file(name));
    let (sheet, images): (Vec<_>, Vec<_>) = files.into_iter().partition(|(n, _)| *n == XLSX);
    Rendered {
        html: lossy(html),
        text: lossy(text),
        csv: csv.map(lossy),
        parts: (texts.iter())
            .map(|(name, body)| (name.to_string(), lossy(body.as_ref())))
            .collect(),
        images: (images.iter())
            .map(|(name, body)| {
                let id = name.strip_suffix(".png").unwrap_or(name);
                (id.to_string(), body.as_ref().to_vec())
            })
            .collect(),
        xlsx: sheet.first().map(|(_, body)| body.as_ref().to_vec()),
    }
}

/// A render's named parts and charts as the artifact names them, in name order.
fn named(rendered: &Rendered) -> Vec<(String, &[u8])> {
    let mut named: Vec<(String, &[u8])> = (rendered.parts.iter())
        .map(|(n, b)| (n.clone(), b.as_bytes()))
        .chain((rendered.images.iter()).map(|(id, png)| (format!("{id}.png"), png.as_slice())))
        .chain((rendered.xlsx.iter()).map(|x| (XLSX.to_string(), x.as_slice())))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

/// The reference of `rendered` stored for `report` and `date`: its content-addressed keys.
fn reference(report: &str, date: &str, rendered: &Rendered) -> ArtifactRef {
    let csv = rendered.csv.as_deref().map(str::as_bytes);
    let all = named(rendered);
    let named: Vec<(&str, &[u8])> = all.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let sha256 = digest(
        rendered.html.as_bytes(),
        rendered.text.as_bytes(),
        csv,
        &named,
    );
    let size = rendered.html.len()
        + rendered.text.len()
        + csv.map_or(0, <[u8]>::len)
        + named.iter().map(|(_, b)| b.len()).sum::<usize>();
    ArtifactRef {
        html_key: format!("{report}/{date}/{sha256}.html"),
        text_key: format!("{report}/{date}/{sha256}.txt"),
        csv_key: csv.map(|_| format!("{report}/{date}/{sha256}.csv")),
        sha256,
        bytes: i64::try_from(size).unwrap_or(i64::MAX),
        parts: all.into_iter().map(|(n, _)| n).collect(),
    }
}

/// An artifact's parts by key, in the order they are written: the others first, since `find`
/// treats an artifact as complete once its .html exists.
fn parts<'a>(artifact: &'a ArtifactRef, rendered: &'a Rendered) -> Vec<(String, &'a [u8])> {
    let mut parts = Vec::with_capacity(4 + rendered.parts.len() + rendered.images.len());
    for (name, body) in named(rendered) {
        parts.push((artifact.part_key(&name), body));
    }
    if let (Some(key), Some(csv)) = (&artifact.csv_key, &rendered.csv) {
        parts.push((key.clone(), csv.as_bytes()));
    }
    parts.push((artifact.text_key.clone(), rendered.text.as_bytes()));
    parts.push((artifact.html_key.clone(), rendered.html.as_bytes()));
    parts
}

/// The sha256 of an artifact: its HTML, a zero byte, its text; when it attaches a CSV, a zero
/// byte and the CSV; then, for each named part in name order, a zero byte, its name, a zero
/// byte and its body (an artifact without CSV or named parts hashes as before they existed).
fn digest(html: &[u8], text: &[u8], csv: Option<&[u8]>, named: &[(&str, &[u8])]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(html);
    hasher.update([0u8]);
    hasher.update(text);
    if let Some(csv) = csv {
        hasher.update([0u8]);
        hasher.update(csv);
    }
    for (name, body) in named {
        hasher.update([0u8]);
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        hasher.update(body);
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests;
