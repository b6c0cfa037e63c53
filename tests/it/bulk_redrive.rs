//! `dawnpost redrive --report R --class C …` as an operator runs it beside the daemon: the
//! dry run names what it would redrive (redacted) and redrives nothing; the real run redrives
//! one canary, the daemon sends it, it comes back quarantined with the same class, and the
//! runbook stops by itself before any batch — every step audited.

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Project;
use common::daemon::Daemon;
use common::peers::Receiver;

const SECRET_ENV: &str = "BULK_HOOK_SECRET";

fn command(p: &Project, args: &[&str]) -> Command {
    let mut c = common::daemon::command(p, args);
    c.env(SECRET_ENV, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .env_remove("RUST_LOG");
    c
}

fn run(p: &Project, args: &[&str]) -> (Option<i32>, String, String) {
    let out = command(p, args).output().expect("run dawnpost");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const BULK: [&str; 9] = [
    "redrive",
    "--report",
    "carrier",
    "--class",
    "permanent",
    "--by",
    "ann",
    "--reason",
    "receiver says it is fixed",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_redrive_stops_by_itself_when_its_canary_comes_back_quarantined() {
    // The receiver refuses every request: 400, a permanent failure.
    let rx = Receiver::start(Arc::new(|_, _, _| (400, None, Duration::ZERO))).await;
    let p = Project::new(&format!(
        r#"
[[report]]
id = "carrier"
title = "Carrier"
schedule = "0 0 6 1 1 *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
[[report.webhook]]
url = "{}"
secret_env = "{SECRET_ENV}"
"#,
        rx.url("hooks/secret-path-token")
    ));
    p.write("config/dawnpost.toml", "[server]\nbind = \"127.0.0.1:0\"\n");
    for date in ["2026-11-27", "2026-11-28", "2026-11-29"] {
        let (code, out, err) = run(&p, &["run", "--once", "--date", date]);
        assert_eq!(code, Some(3), "quarantined: {out}{err}");
    }
    assert_eq!(rx.hits().len(), 3);

    let mut accepted: Vec<&str> = BULK.to_vec();
    accepted[4] = "accepted";
    let (code, _, err) = run(&p, &accepted);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--class: \"accepted\" is not a dead-letter class"),
        "{err}"
    );

    let mut dry: Vec<&str> = BULK.to_vec();
    dry.push("--dry-run");
    let (code, out, err) = run(&p, &dry);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("3 quarantined deliver(ies) of carrier with class permanent"),
        "{out}"
    );
    assert!(out.contains("carrier:2026-11-27/webhook:"), "{out}");
    assert!(
        !out.contains("secret-path-token"),
        "webhook paths redacted: {out}"
    );
    assert!(out.contains("dry run: nothing redriven"), "{out}");

    let mut daemon_cmd = command(&p, &["run"]);
    daemon_cmd.env_remove("RUST_LOG");
    let daemon = Daemon::start(daemon_cmd);
    let mut real: Vec<&str> = BULK.to_vec();
    real.extend(["--canary", "1", "--batch", "50", "--wait", "2m"]);
    let (code, out, err) = run(&p, &real);
    let (stopped, log) = daemon.stop();
    assert_eq!(stopped, Some(0), "{log}");
    assert_eq!(code, Some(3), "stopped by itself: {out}{err}\n{log}");
    assert!(out.contains("step 1 (canary): redrove 1"), "{out}");
    assert!(
        out.contains("stopped: 1 of 1 deliver(ies) of the canary came back quarantined permanent"),
        "{out}"
    );
    assert!(
        !out.contains("step 2"),
        "no batch after a failed canary: {out}"
    );
    assert_eq!(
        rx.hits().len(),
        4,
        "the canary and nothing else was sent again"
    );

    let (_, show, _) = run(&p, &["show", "carrier:2026-11-27"]);
    assert!(
        show.contains("by ann via cli: runbook #2 canary: receiver says it is fixed"),
        "{show}"
    );
}
