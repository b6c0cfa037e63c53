//! Python peers from `tests/support` (aiosmtpd relays, an HTTPS server, croniter): whether the
//! modules they need are installed (CI must have them), and a peer started and ready.

use std::ffi::OsStr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

/// Whether python3 imports `modules` (`"aiosmtpd, trustme"`). A missing module is a
/// [`super::skip`]: under CI it fails the test; elsewhere the caller returns.
pub fn has(modules: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        super::skip(&format!("python3 cannot import {modules}"));
    }
    ok
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `tests/support/<script>` with `args` and waits (at most 20 s) for the `READY` line
/// it prints once listening. It stops when dropped (stdin closes, and it is killed).
pub async fn peer<I, S>(script: &str, args: I) -> tokio::process::Child
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let path = format!("{}/tests/support/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut child = tokio::process::Command::new("python3")
        .arg(path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{script} starts"))
        .expect("read");
    assert_eq!(ready.as_deref(), Some("READY"), "{script}");
    child
}
