//! A real S3 API on loopback: moto's server (`pip install 'moto[server]'`), one fresh bucket
//! per test. Uses the server at `DAWNPOST_TEST_S3_ENDPOINT` when `.ci/run` started one, and
//! otherwise starts `python3 -m moto.server` itself on a free port.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use tokio::io::{AsyncBufReadExt, BufReader};

pub const ENDPOINT_ENV: &str = "DAWNPOST_TEST_S3_ENDPOINT";
/// What moto accepts as credentials (it checks none); the daemons read them from these.
pub const KEY_ID_ENV: &str = "DAWNPOST_TEST_S3_KEY_ID";
pub const SECRET_ENV: &str = "DAWNPOST_TEST_S3_SECRET";
pub const KEY_ID: &str = "testing";
pub const SECRET: &str = "testing-secret";

pub struct S3 {
    pub endpoint: String,
    pub bucket: String,
    _server: Option<tokio::process::Child>,
}

impl S3 {
    /// A new, empty bucket on moto's server.
    pub async fn start() -> S3 {
        let (endpoint, server) = match std::env::var(ENDPOINT_ENV) {
            Ok(e) => (e.trim_end_matches('/').to_string(), None),
            Err(_) => {
                let (endpoint, child) = start_moto().await;
                (endpoint, Some(child))
            }
        };
        let bucket = format!("dawnpost-{}", super::unique_suffix().replace('_', "-"));
        let created = reqwest::Client::new()
            .put(format!("{endpoint}/{bucket}"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("moto at {endpoint}: {e}"));
        assert!(
            created.status().is_success(),
            "create bucket {bucket}: {}",
            created.status()
        );
        S3 {
            endpoint,
            bucket,
            _server: server,
        }
    }

    /// The `[artifacts]` section of dawnpost.toml for this bucket under `prefix`.
    pub fn artifacts_toml(&self, prefix: &str) -> String {
        format!(
            "[artifacts]\nurl = \"s3://{}/{prefix}\"\nendpoint = \"{}\"\nregion = \"us-east-1\"\nallow_http = true\naccess_key_id_env = \"{KEY_ID_ENV}\"\nsecret_access_key_env = \"{SECRET_ENV}\"\n",
            self.bucket, self.endpoint
        )
    }

    /// The bucket, as the test reads it behind dawnpost's back.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_bucket_name(&self.bucket)
                .with_endpoint(&self.endpoint)
                .with_region("us-east-1")
                .with_allow_http(true)
                .with_access_key_id(KEY_ID)
                .with_secret_access_key(SECRET)
                .build()
                .expect("s3 client"),
        )
    }

    /// Every key in the bucket under `prefix`.
    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        use futures_util::TryStreamExt;
        let listed: Vec<object_store::ObjectMeta> = self
            .client()
            .list(Some(&object_store::path::Path::from(prefix)))
            .try_collect()
            .await
            .expect("list the bucket");
        let mut keys: Vec<String> = listed.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        keys
    }
}

/// moto's server (`python3 -m moto.server`) on a free loopback port, once it listens.
async fn start_moto() -> (String, tokio::process::Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = tokio::process::Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start python3 -m moto.server ({e}): pip install 'moto[server]', \
                 or set {ENDPOINT_ENV} to a running S3 API on loopback"
            )
        });
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Running on") {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(ready, Ok(true)),
        "moto_server did not start on port {port}"
    );
    // Keep reading its log so a full pipe never blocks it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (format!("http://127.0.0.1:{port}"), child)
}
