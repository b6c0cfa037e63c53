//! Several nodes, one bucket: three `dawnpost run` processes on one ledger and
//! one S3 API (moto's server on loopback) render each job once, into one create-only artifact,
//! and deliver each destination once; `show` reads the artifact back from the bucket and a
//! sweep deletes it there.
#![cfg(feature = "s3")]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::daemon::Daemon;
use common::moto::{self, S3};
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger};
use dawnpost::ledger::{DeliveryState, JobFilter, JobState};
use dawnpost::report::artifact::ArtifactStore;
use dawnpost::report::render::Rendered;
use object_store::ObjectStoreExt;

const REPORTS: usize = 3;
const WEBHOOKS: usize = 2;
/// Backfilled fires per report: Jan 1 of 2020 to 2026.
const YEARS: usize = 7;
const HOOK_SECRET_ENV: &str = "DAWNPOST_TEST_NODES_SECRET";

fn reports_toml(rx: &Receiver) -> String {
    let mut toml = String::new();
    for r in 0..REPORTS {
        toml.push_str(&format!(
            r#"
[[report]]
id = "carrier-{r}"
title = "Carrier {r}"
schedule = "0 0 6 1 1 *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
"#
        ));
        for h in 0..WEBHOOKS {
            toml.push_str(&format!(
                "[[report.webhook]]\nurl = \"{}\"\nsecret_env = \"{HOOK_SECRET_ENV}\"\n",
                rx.url(&format!("c{r}-h{h}"))
            ));
        }
    }
    toml
}

/// One `dawnpost` process of the project, with the bucket's credentials in its environment.
fn command(p: &Project, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"));
    c.arg("--config")
        .arg(p.config_dir())
        .args(args)
        .env(moto::KEY_ID_ENV, moto::KEY_ID)
        .env(moto::SECRET_ENV, moto::SECRET)
        .env(HOOK_SECRET_ENV, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .env_remove("DAWNPOST_DATABASE_URL")
        .env_remove("RUST_LOG");
    c
}

fn run(p: &Project, args: &[&str]) -> (bool, String, String) {
    let out = command(p, args).output().expect("run dawnpost");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The project, on the given ledger URL, sharing the bucket.
fn project(rx: &Receiver, s3: &S3, db_url: &str) -> Project {
    let p = Project::new(&reports_toml(rx));
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[database]\nurl = \"{db_url}\"\nmax_connections = 6\n{}[pool]\nconcurrency = 2\nlease = \"2m\"\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\n[server]\nbind = \"127.0.0.1:0\"\n",
            s3.artifacts_toml("reports")
        ),
    );
    p.write(
        "config/retention.toml",
        "artifact = \"1d\"\ndiagnostics = \"1d\"\nledger = \"400d\"\n",
    );
    p
}

async fn three_nodes(t: &TestLedger, db_url: &str) {
    let s3 = S3::start().await;
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(30)));
    let rx = Receiver::start(rule).await;
    let p = project(&rx, &s3, db_url);
    let (ok, out, err) = run(&p, &["check"]);
    assert!(ok, "check: {out}{err}");
    let (ok, out, err) = run(
        &p,
        &["backfill", "--from", "2020-01-01", "--to", "2026-01-02"],
    );
    assert!(ok, "backfill: {out}{err}");
    let jobs = REPORTS * YEARS;
    assert!(
        out.contains(&format!("{jobs} of {jobs} jobs inserted")),
        "{out}"
    );

    let nodes: Vec<Daemon> = (0..3)
        .map(|_| Daemon::start(command(&p, &["run"])))
        .collect();
    let deliveries = jobs * WEBHOOKS;
    if !rx.reached(deliveries, Duration::from_secs(120)).await {
        let logs: Vec<String> = nodes.into_iter().map(|n| n.stop().1).collect();
        panic!(
            "{} of {deliveries} deliveries arrived; the nodes' logs:\n{}",
            rx.hits().len(),
            logs.join("\n----\n")
        );
    }
    // (renders, sends) per node, from each one's log once it drained.
    let mut per_node = Vec::new();
    for n in nodes {
        let (code, log) = n.stop();
        assert_eq!(code, Some(0), "a node drains and exits 0:\n{log}");
        assert!(!log.contains("panicked"), "{log}");
        let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
        per_node.push((
            count("dawnpost::pool::work: rendered job="),
            count("dawnpost::pool::work: sent delivery="),
        ));
    }
    let (renders, sends) = per_node
        .iter()
        .fold((0, 0), |(r, s), (nr, ns)| (r + nr, s + ns));
    assert_eq!(renders, jobs, "each job rendered once: {per_node:?}");
    assert_eq!(sends, deliveries, "each delivery sent once: {per_node:?}");
    assert!(
        per_node.iter().filter(|(r, s)| r + s > 0).count() >= 2,
        "the work spread over the nodes: {per_node:?}"
    );

    // Zero duplicate deliveries: each Idempotency-Key arrived once.
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    for hit in rx.hits() {
        *by_key
            .entry(hit.header("idempotency-key").expect("key"))
            .or_default() += 1;
    }
    assert_eq!(by_key.len(), deliveries, "every delivery arrived");
    let dup: Vec<_> = by_key.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dup.is_empty(), "sent twice: {dup:?}");

    // Exactly one artifact per job, written where the ledger says.
    let l = &t.ledger;
    let all = l
        .jobs()
        .list(&JobFilter {
            limit: Some(1000),
            ..JobFilter::default()
        })
        .await
        .expect("jobs");
    assert_eq!(all.len(), jobs);
    let keys: BTreeSet<String> = s3.keys("reports").await.into_iter().collect();
    assert_eq!(
        keys.len(),
        3 * jobs,
        "an .html, a .txt and a .csv per job: {keys:?}"
    );
    for j in &all {
        assert_eq!(j.state, JobState::Done, "{}", j.key);
        let a = j.artifact.as_ref().expect("artifact");
        assert!(
            keys.contains(&format!("reports/{}", a.html_key)),
            "{}",
            a.html_key
        );
        assert!(
            keys.contains(&format!("reports/{}", a.text_key)),
            "{}",
            a.text_key
        );
        let csv_key = a
            .csv_key
            .as_ref()
            .expect("the shipped template attaches a CSV");
        assert!(keys.contains(&format!("reports/{csv_key}")), "{csv_key}");
        let sent = l.deliveries().list(&j.key).await.expect("deliveries");
        assert_eq!(sent.len(), WEBHOOKS);
        assert!(sent.iter().all(|d| d.state == DeliveryState::Sent));
    }

    show_reads_the_bucket(&p, &s3, &all[0]).await;
    sweep_deletes_from_the_bucket(&p, &s3, &all[0]).await;
}

async fn show_reads_the_bucket(p: &Project, s3: &S3, job: &dawnpost::ledger::Job) {
    let key = job.key.to_string();
    let a = job.artifact.as_ref().expect("artifact");
    let (ok, out, err) = run(p, &["show", &key]);
    assert!(ok, "show: {out}{err}");
    let line = format!(
        "in store s3://{}/reports: intact (sha256 verified",
        s3.bucket
    );
    assert!(out.contains(&line), "{out}");
    let (ok, html, err) = run(p, &["show", &key, "--artifact", "html"]);
    assert!(ok, "show --artifact: {err}");
    let stored = s3
        .client()
        .get(&object_store::path::Path::from(format!(
            "reports/{}",
            a.html_key
        )))
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    assert_eq!(html.trim_end(), String::from_utf8_lossy(&stored).trim_end());
    assert!(html.contains("Carrier"), "the report's HTML: {html}");

    // Bytes changed behind dawnpost's back are reported, not shown as the artifact.
    s3.client()
        .put(
            &object_store::path::Path::from(format!("reports/{}", a.text_key)),
            "tampered".into(),
        )
        .await
        .expect("overwrite");
    let (ok, out, _) = run(p, &["show", &key]);
    assert!(ok);
    assert!(out.contains(": altered (the stored bytes hash to"), "{out}");
    let (ok, _, err) = run(p, &["show", &key, "--artifact", "text"]);
    assert!(!ok, "no text printed from an altered artifact");
    assert!(err.contains("altered"), "{err}");
}

async fn sweep_deletes_from_the_bucket(p: &Project, s3: &S3, job: &dawnpost::ledger::Job) {
    let (ok, out, err) = run(p, &["sweep", "--as-of", "2027-06-01"]);
    assert!(ok, "sweep: {out}{err}");
    assert!(
        out.contains(&format!("{} artifact(s)", REPORTS * YEARS)),
        "{out}"
    );
    assert_eq!(
        s3.keys("reports").await,
        Vec::<String>::new(),
        "bucket emptied"
    );
    let (ok, out, err) = run(p, &["show", &job.key.to_string()]);
    assert!(ok, "{err}");
    assert!(out.contains("deleted by retention at"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_postgres_share_one_bucket() {
    let Some(t) = TestLedger::postgres().await else {
        common::skip(&format!("{} is not set", common::POSTGRES_ENV));
        return;
    };
    let base = std::env::var(common::POSTGRES_ENV).expect("url");
    let sep = if base.contains('?') { '&' } else { '?' };
    let schema = t.schema().expect("schema").to_string();
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    three_nodes(&t, &url).await;
    t.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_on_sqlite_share_one_bucket() {
    let t = TestLedger::sqlite().await;
    let path = t.sqlite_path().expect("sqlite");
    let url = format!("sqlite://{}", path.display());
    three_nodes(&t, &url).await;
    t.cleanup().await;
}

/// Create-only on S3: racing writers of one artifact write it once; the rest reuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writes_of_one_artifact_store_it_once() {
    let s3 = S3::start().await;
    // Opened on a client with the credentials in hand: the settings read them from named
    // environment variables, which a test cannot set without racing its other threads.
    let store = ArtifactStore::with_store(s3.client(), &format!("s3://{}", s3.bucket));
    let rendered = std::sync::Arc::new(Rendered {
        html: "<html><body>Carrier 7</body></html>".into(),
        text: "Carrier 7".into(),
        csv: None,
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    });
    let writes = (0..6).map(|_| {
        let (store, rendered) = (store.clone(), rendered.clone());
        tokio::spawn(async move { store.write("carrier-7", "2026-11-30", &rendered).await })
    });
    let mut wrote = 0;
    let mut refs = BTreeSet::new();
    for w in writes {
        let (a, did) = w.await.expect("join").expect("write");
        wrote += usize::from(did);
        refs.insert(a.html_key);
    }
    assert_eq!(wrote, 1, "one writer stored it, the others found it there");
    assert_eq!(refs.len(), 1);
    assert_eq!(s3.keys("carrier-7").await.len(), 2);
    let found = store
        .find("carrier-7", "2026-11-30")
        .await
        .expect("find")
        .expect("found");
    assert!(matches!(
        store.check(&found).await.expect("check"),
        dawnpost::report::artifact::StoredArtifact::Intact(r) if r == *rendered
    ));
}

/// `check` opens a cloud store as `run` would, without a request: a setting `run` would refuse
/// is refused here, naming the field.
#[test]
fn check_refuses_a_store_run_could_not_open() {
    let p = Project::new(&common::report("warehouse-17", "0 30 6 * * *", "UTC"));
    p.write(
        "config/dawnpost.toml",
        "[artifacts]\nurl = \"s3://reports-bucket/dawnpost\"\n",
    );
    let good = command(&p, &["check"]).output().expect("check");
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = command(&p, &["check"])
        .env("AWS_ALLOW_HTTP", "maybe")
        .output()
        .expect("check");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dawnpost.toml: artifacts.url:") && err.contains("\"maybe\""),
        "{err}"
    );
}
