//! The embedded ledger on a full filesystem (a 16 MiB tmpfs, so the real SQLITE_FULL): the
//! daemon stays up, `/readyz` says the ledger cannot write, and once space is freed every
//! delivery is made without a restart — no connection is left stuck in a transaction SQLite
//! already rolled back.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Project;
use common::daemon::{self, Daemon};
use common::peers::{HttpRule, Receiver};
use dawnpost::Ledger;
use dawnpost::ledger::DeliveryState;

const WEBHOOKS: usize = 20;
/// Backfilled fires: Jan 1 of 2020 to 2026.
const YEARS: usize = 7;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` where this process may not mount (not root, or no CAP_SYS_ADMIN).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("mount point");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Writes zeros into `path` until the filesystem is full.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0;
    while f.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    let _ = f.sync_all();
    written
}

/// Polls `/readyz` until it answers `status`, within `limit`: the last answer.
async fn readyz_until(addr: &str, status: u16, limit: Duration) -> (u16, String) {
    let until = Instant::now() + limit;
    loop {
        let got = daemon::get(addr, "/readyz").await;
        if got.0 == status || Instant::now() >= until {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn project(rx: &Receiver, ledger: &Path) -> Project {
    let p = Project::new(&common::hooked_report("full", &rx.url(""), WEBHOOKS, None));
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[database]\nurl = \"sqlite://{}\"\n[pool]\nconcurrency = 4\n[retry]\nbase = \"100ms\"\ncap = \"500ms\"\nmax_age = \"1h\"\n[server]\nbind = \"127.0.0.1:0\"\n",
            ledger.display()
        ),
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_reported_and_the_daemon_recovers_without_a_restart() {
    let Some(fs) = Tmpfs::mount("16m") else {
        crate::common::skip("cannot mount a tmpfs here (needs root)");
        return;
    };
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::from_millis(150)));
    let rx = Receiver::start(rule).await;
    let db: PathBuf = fs.path().join("dawnpost.db");
    let p = project(&rx, &db);
    let out = daemon::command(
        &p,
        &["backfill", "--from", "2020-01-01", "--to", "2026-01-02"],
    )
    .output()
    .expect("backfill");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let total = WEBHOOKS * YEARS;

    let node = Daemon::start(daemon::run_command(&p));
    rx.wait_for(10, Duration::from_secs(60)).await;
    let filler = fs.path().join("filler");
    let filled = fill(&filler);
    assert!(filled > 0, "the filesystem had room to fill");
    let (status, body) = readyz_until(&node.addr, 503, Duration::from_secs(30)).await;
    // The disk stays full for two seconds more: the daemon's own writes fail meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = rx.delivered().len();
    std::fs::remove_file(&filler).expect("free the space");
    let (after, after_body) = readyz_until(&node.addr, 200, Duration::from_secs(30)).await;
    let all = rx.keys_reached(total, 1, Duration::from_secs(90)).await;
    let (code, log) = node.stop();
    assert_eq!(status, 503, "/readyz on a full disk: {body}\n{log}");
    assert!(
        body.contains("the ledger cannot write") && body.contains("full"),
        "/readyz says why: {body}"
    );
    assert!(
        during < total,
        "the disk filled before the work was done ({during} of {total})"
    );
    assert_eq!(
        after, 200,
        "/readyz once space is freed: {after_body}\n{log}"
    );
    assert!(all, "every delivery made after the space was freed:\n{log}");
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("database or disk is full"),
        "the writes did fail:\n{log}"
    );
    assert!(
        !log.contains("transaction depth"),
        "no connection stuck in a transaction after the failed commits:\n{log}"
    );
    let ledger = Ledger::connect(&format!("sqlite://{}", db.display()), p.root())
        .await
        .expect("ledger");
    let states = ledger.deliveries().count_by_state().await.expect("states");
    assert_eq!(
        states,
        vec![(DeliveryState::Sent, total as i64)],
        "nothing lost"
    );
    ledger.close().await;
}
