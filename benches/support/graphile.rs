//! graphile-worker beside dawnpost (`cargo bench --bench pipeline -- --graphile`): its POST job
//! (`benches/graphile/post.mjs`), installed from npm by the bench itself into
//! `target/graphile-bench/` (graphile-worker pinned in `benches/graphile/package.json`), run on
//! the same PostgreSQL and against the same sink, in the same run as dawnpost's drain, so the
//! ratio between the two is measured rather than quoted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::sinks;

/// What graphile-worker did: `posts` jobs enqueued and drained, its rate, its process's CPU and
/// the server's commits and WAL for it. `None` (and why, on stderr) when Node, npm or the
/// install is not there.
pub async fn run(url: &str, http: SocketAddr, posts: usize, concurrency: u32) -> Option<Line> {
    let dir = install()
        .map_err(|e| eprintln!("# graphile-worker skipped: {e}"))
        .ok()?;
    sinks::pg_checkpoint(url).await;
    let before = sinks::pg_mark(url).await?;
    let out = tokio::process::Command::new("node")
        .arg(dir.join("post.mjs"))
        .arg(url)
        .arg(format!("http://{http}/graphile/"))
        .arg(posts.to_string())
        .arg(concurrency.to_string())
        .output()
        .await
        .map_err(|e| eprintln!("# graphile-worker skipped: node: {e}"))
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "# graphile-worker failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    // Its connections are closed with its process: every backend has reported its commits.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = sinks::pg_mark(url).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Report = serde_json::from_str(stdout.lines().last()?).ok()?;
    let per = |n: i64| n as f64 / report.jobs.max(1) as f64;
    Some(Line {
        system: "graphile-worker",
        jobs: report.jobs,
        seconds: report.seconds,
        jobs_per_s: report.jobs_per_s,
        cpu_us_per_job: report.cpu_us_per_job,
        commits_per_job: (per(after.commits - before.commits) * 1000.0).round() / 1000.0,
        wal_bytes_per_job: per(after.wal_bytes - before.wal_bytes).round(),
    })
}

/// What `post.mjs` prints.
#[derive(serde::Deserialize)]
struct Report {
    jobs: i64,
    seconds: f64,
    jobs_per_s: f64,
    cpu_us_per_job: f64,
}

/// graphile-worker's line, beside dawnpost's.
#[derive(serde::Serialize)]
pub struct Line {
    pub system: &'static str,
    pub jobs: i64,
    pub seconds: f64,
    pub jobs_per_s: f64,
    pub cpu_us_per_job: f64,
    pub commits_per_job: f64,
    pub wal_bytes_per_job: f64,
}

/// `target/graphile-bench/` with the script, its package.json and graphile-worker installed
/// (once; `npm install` again when the pinned version changes).
fn install() -> Result<PathBuf, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/graphile-bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut changed = false;
    for name in ["package.json", "post.mjs"] {
        let from = root.join("benches/graphile").join(name);
        let text = std::fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        let to = dir.join(name);
        if std::fs::read(&to).ok().as_deref() != Some(&text[..]) {
            std::fs::write(&to, &text).map_err(|e| format!("{}: {e}", to.display()))?;
            changed |= name == "package.json";
        }
    }
    if changed || !dir.join("node_modules/graphile-worker").is_dir() {
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .map_err(|e| format!("npm: {e}"))?;
        if !status.success() {
            return Err(format!("npm install in {} failed", dir.display()));
        }
    }
    Ok(dir)
}
