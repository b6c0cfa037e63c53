//! `dawnpost run` as a child process: started with its log on a pipe, its ops address read
//! from the "dawnpost running … listen=ADDR" line, stopped with SIGTERM.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Daemon {
    child: Child,
    /// Where its HTTP server listens (`server.bind = "127.0.0.1:0"` picks a port).
    pub addr: String,
    log: Option<JoinHandle<String>>,
}

/// `dawnpost --config <project>/config ARGS…`, with no database URL inherited (the ledger is
/// the one the project's configuration names).
pub fn command(p: &super::Project, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dawnpost"));
    c.arg("--config")
        .arg(p.config_dir())
        .args(args)
        .env_remove("DAWNPOST_DATABASE_URL");
    c
}

/// `dawnpost --config <project>/config run` (see [`command`]).
pub fn run_command(p: &super::Project) -> Command {
    command(p, &["run"])
}

impl Daemon {
    /// Starts `command` (a `dawnpost … run` with its environment set) with `RUST_LOG=info`,
    /// and waits until it says where it listens.
    pub fn start(mut command: Command) -> Daemon {
        let mut child = command
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dawnpost run");
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        let log = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(addr) = line.split("listen=").nth(1) {
                    let _ = tx.send(addr.split_whitespace().next().unwrap_or("").to_string());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(60)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon never said where it listens: {:?}", log.join());
        };
        Daemon {
            child,
            addr,
            log: Some(log),
        }
    }

    /// Its process id (the `hostname:pid` in the leases it holds).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a `kill` name: `STOP`, `CONT`, `HUP`) to the process.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "SIG{signal} delivered");
    }

    /// SIGTERM, then its exit code and everything it logged.
    pub fn stop(mut self) -> (Option<i32>, String) {
        self.signal("TERM");
        let status = self.child.wait().expect("wait");
        let log = self.log.take().map(|l| l.join().unwrap_or_default());
        (status.code(), log.unwrap_or_default())
    }
}

/// A test that panics still kills its daemon (after `stop`, the child has exited already).
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET of `path` on a daemon at `addr`: its status and body (status 0 and the error if it
/// did not answer).
pub async fn get(addr: &str, path: &str) -> (u16, String) {
    match reqwest::get(format!("http://{addr}{path}")).await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// Polls `/metrics` of the daemon at `addr` until it holds `line` (what the daemon does runs
/// on its own; at most 30 s).
pub async fn wait_for_metric(addr: &str, line: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = get(addr, "/metrics").await;
        if body.contains(line) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {line:?} in {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
