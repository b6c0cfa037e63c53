//! A real DSN, from a real MTA: dawnpost sends a report through a private Postfix instance on
//! loopback (Debian's `postfix`, `tests/support/postfix_relay.sh`), whose next hop (aiosmtpd)
//! refuses one recipient; Postfix mails its bounce to the report's sender, and that message,
//! piped into `dawnpost bounce`, is matched to the delivery and stops the next night's email.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Project, run_in, text};

/// Stops the private Postfix when the test ends, however it ends.
struct Postfix(PathBuf);

impl Drop for Postfix {
    fn drop(&mut self) {
        let _ = std::process::Command::new("postfix")
            .arg("-c")
            .arg(self.0.join("etc"))
            .arg("stop")
            .output();
    }
}

/// Whether a private Postfix can run here: the binary, and root to start it.
fn can_run_postfix() -> bool {
    let installed = std::process::Command::new("postconf")
        .arg("mail_version")
        .output()
        .is_ok_and(|o| o.status.success());
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !(installed && root) {
        common::skip(
            "Postfix is not installed, or this is not root (a private Postfix needs both)",
        );
    }
    installed && root
}

/// Waits (at most 30 s) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bounce Postfix mailed to the sender, once it is in `dir`.
fn bounce_in(dir: &Path) -> Option<PathBuf> {
    (std::fs::read_dir(dir).ok()?.filter_map(Result::ok))
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-reports@dawnpost.test.eml"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounce_from_a_real_postfix_stops_the_next_send() {
    if !common::python::has("aiosmtpd") || !can_run_postfix() {
        return;
    }
    let (relay_port, next_port) = (common::python::free_port(), common::python::free_port());
    let mail = tempfile::tempdir().expect("tempdir");
    let _next = common::python::peer(
        "smtp_sink.py",
        [next_port.to_string().as_ref(), mail.path().as_os_str()],
    )
    .await;
    let pf_dir = tempfile::tempdir().expect("tempdir");
    let script = format!(
        "{}/tests/support/postfix_relay.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let started = std::process::Command::new("bash")
        .arg(script)
        .arg(pf_dir.path())
        .arg(relay_port.to_string())
        .arg(next_port.to_string())
        .output()
        .expect("postfix_relay.sh");
    let _postfix = Postfix(pf_dir.path().to_path_buf());
    assert!(started.status.success(), "{}", text(&started));
    wait_for("Postfix listening", || {
        std::net::TcpStream::connect(("127.0.0.1", relay_port)).is_ok()
    });

    let p = Project::new(&common::report("w", "0 30 6 * * *", "UTC").replace(
        "email = [\"ops@example.com\"]",
        "email = [\"ops@carrier-y.example\", \"bad@carrier-y.example\"]",
    ));
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://127.0.0.1:{relay_port}\"\n"
        ),
    );
    // Postfix takes both (250): the report is sent, as far as dawnpost can know.
    let run = run_in(p.root(), &["run", "--once", "--date", "2026-11-29"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));

    // Its next hop refuses bad@ (550 5.1.1), and Postfix mails the bounce to the sender.
    wait_for("Postfix's bounce", || bounce_in(mail.path()).is_some());
    let dsn = bounce_in(mail.path())
        .map(std::fs::read)
        .expect("bounce")
        .expect("read");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .current_dir(p.root())
        .args(["bounce", "--json"])
        .env_remove("DAWNPOST_DATABASE_URL")
        .env_remove("DAWNPOST_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write as _;
        input.write_all(&dsn).expect("stdin");
    }
    let out = child.wait_with_output().expect("bounce");
    assert!(out.status.success(), "{}", text(&out));
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(reply["kind"], "hard", "{reply}");
    assert_eq!(reply["status"], "5.1.1", "{reply}");
    assert_eq!(
        reply["delivery"], "w:2026-11-29/email:b***@carrier-y.example",
        "{reply}"
    );
    assert_eq!(reply["suppressed"]["cause"], "bounce", "{reply}");

    let shown = text(&run_in(p.root(), &["show", "w:2026-11-29"]));
    assert!(
        shown.contains("then bounced 5.1.1 (hard)") && shown.contains("via dsn"),
        "{shown}"
    );
    let run = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let shown = text(&run_in(p.root(), &["show", "w:2026-11-30"]));
    assert!(
        shown.contains("suppressed  attempts 0") && shown.contains("state done"),
        "{shown}"
    );
}
