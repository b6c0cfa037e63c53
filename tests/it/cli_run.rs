//! The binary's runs as an operator starts them: `run --once` on the shipped project (the
//! outbox, the exit codes, the summary's redaction, an audited redrive), `sweep`, and what
//! `run` refuses to start under. The inspecting commands are in `cli.rs`.

use std::process::Command;

use crate::cli::{stderr, stdout};
use crate::common::{run_in, shipped_copy};

#[test]
fn run_once_on_the_shipped_config_delivers_to_the_outbox_once() {
    let dir = shipped_copy();
    let first = run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}{}",
        stdout(&first),
        stderr(&first)
    );
    assert!(
        stdout(&first).contains("delivered: 3 job(s); rendered 3, sent 5"),
        "{}",
        stdout(&first)
    );
    let outbox: Vec<String> = std::fs::read_dir(dir.path().join("var/outbox"))
        .expect("outbox")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".eml"))
        .collect();
    assert_eq!(outbox.len(), 5, "{outbox:?}");
    let eml = std::fs::read_to_string(
        dir.path()
            .join("var/outbox/warehouse-17_2026-11-30_email_ops-17@example.com.eml"),
    )
    .expect("eml");
    assert!(eml.contains("Subject: Warehouse 17 daily operations"));
    assert!(eml.contains("X-Dawnpost-Delivery: warehouse-17:2026-11-30/email:ops-17@example.com"));
    // Receivers see an automated list: List-Id from the From address's domain.
    assert!(eml.contains("Auto-Submitted: auto-generated"), "{eml}");
    assert!(
        eml.contains("List-Id: <warehouse-17.dawnpost.example.com>"),
        "{eml}"
    );
    assert!(
        !eml.contains("List-Unsubscribe") && !eml.contains("Reply-To"),
        "{eml}"
    );
    // The window and numbers as the shipped template shows them: local time with its offset.
    let text = run_in(
        dir.path(),
        &["show", "warehouse-17:2026-11-30", "--artifact", "text"],
    );
    let text = stdout(&text);
    assert!(
        text.contains(
            "Data window: 2026-11-29 00:00 CET (UTC+01:00) to 2026-11-30 00:00 CET (UTC+01:00)"
        ),
        "{text}"
    );
    assert!(text.contains("Orders shipped:  1,842"), "{text}");

    // Again: nothing is enqueued or sent twice.
    let second = run_in(
        dir.path(),
        &["run", "--once", "--date", "2026-11-30", "--json"],
    );
    assert_eq!(second.status.code(), Some(0));
    let summary: serde_json::Value = serde_json::from_str(stdout(&second).trim()).expect("json");
    assert_eq!(summary["outcome"], "delivered");
    assert_eq!(summary["stats"]["sent"], 0);
    assert!(
        summary["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .all(|j| j["enqueued"] == false)
    );

    let show = run_in(dir.path(), &["show", "warehouse-17:2026-11-30", "--json"]);
    assert!(show.status.success(), "{}", stderr(&show));
    let history: serde_json::Value = serde_json::from_str(stdout(&show).trim()).expect("json");
    assert_eq!(history["state"], "done");
    assert_eq!(history["artifact_status"], "stored");
    assert_eq!(history["deliveries"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        history["deliveries"][0]["attempt_log"][0]["class"],
        "accepted"
    );
    let text = run_in(dir.path(), &["show", "warehouse-17:2026-11-30"]);
    assert!(stdout(&text).contains("artifact: warehouse-17/2026-11-30/"));
    // Addresses are masked unless asked for, in text and JSON alike.
    for out in [&show, &text] {
        assert!(
            !stdout(out).contains("ops-17@example.com"),
            "{}",
            stdout(out)
        );
        assert!(stdout(out).contains("o***@example.com"), "{}", stdout(out));
    }
    let revealed = run_in(
        dir.path(),
        &["show", "warehouse-17:2026-11-30", "--json", "--reveal"],
    );
    assert!(stdout(&revealed).contains("ops-17@example.com"));

    let dlq = run_in(dir.path(), &["dlq", "--json"]);
    let dlq: serde_json::Value = serde_json::from_str(stdout(&dlq).trim()).expect("json");
    assert_eq!(dlq["jobs"].as_array().map(Vec::len), Some(0));

    let refused = run_in(
        dir.path(),
        &[
            "redrive",
            "warehouse-17:2026-11-30",
            "--by",
            "ops",
            "--reason",
            "resend please",
        ],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused)
            .contains("job warehouse-17:2026-11-30 is done; only quarantined work can be redriven"),
        "{}",
        stderr(&refused)
    );
    let missing = run_in(dir.path(), &["show", "warehouse-17:1999-01-01"]);
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn run_once_reports_quarantine_with_exit_3_and_redrive_is_audited() {
    let dir = shipped_copy();
    // The live source lost a field the template needs; the sample `check` uses still has it.
    let reports = std::fs::read_to_string(dir.path().join("config/reports.toml")).expect("read");
    let live = reports.replacen(
        "source = { kind = \"file\", path = \"config/sample/{{row.id}}.json\" }",
        "source = { kind = \"file\", path = \"live/{{row.id}}.json\" }\nsample = \"config/sample/{{row.id}}.json\"",
        1,
    );
    assert_ne!(live, reports, "the shipped family reads its sample files");
    std::fs::write(dir.path().join("config/reports.toml"), live).expect("write");
    std::fs::create_dir_all(dir.path().join("live")).expect("mkdir");
    for site in ["harbor-east", "sydney-dc"] {
        let sample = format!("config/sample/{site}.json");
        std::fs::copy(
            dir.path().join(sample),
            dir.path().join(format!("live/{site}.json")),
        )
        .expect("copy");
    }
    std::fs::write(
        dir.path().join("live/warehouse-17.json"),
        r#"{"site": "W17", "rows": [], "hours": []}"#,
    )
    .expect("write");
    assert!(run_in(dir.path(), &["check"]).status.success());

    let first = run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(
        first.status.code(),
        Some(3),
        "{}{}",
        stdout(&first),
        stderr(&first)
    );
    assert!(
        stdout(&first).starts_with("warehouse-17:2026-11-30"),
        "{}",
        stdout(&first)
    );
    assert!(stdout(&first).contains("quarantined"));
    let dlq = run_in(dir.path(), &["dlq"]);
    assert!(
        stdout(&dlq).contains("job warehouse-17:2026-11-30"),
        "{}",
        stdout(&dlq)
    );
    assert!(
        stdout(&dlq).contains("data.summary"),
        "the reason names the field: {}",
        stdout(&dlq)
    );

    let sample =
        std::fs::read_to_string(dir.path().join("config/sample/warehouse-17.json")).expect("read");
    std::fs::write(dir.path().join("live/warehouse-17.json"), sample).expect("write");
    let redrive = run_in(
        dir.path(),
        &[
            "redrive",
            "warehouse-17:2026-11-30",
            "--by",
            "alice",
            "--reason",
            "source fixed",
        ],
    );
    assert!(redrive.status.success(), "{}", stderr(&redrive));
    assert!(stdout(&redrive).contains("redriven warehouse-17:2026-11-30"));
    let second = run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}{}",
        stdout(&second),
        stderr(&second)
    );
    let show = run_in(dir.path(), &["show", "warehouse-17:2026-11-30"]);
    assert!(
        stdout(&show).contains("by alice via cli: source fixed"),
        "{}",
        stdout(&show)
    );
    assert!(stdout(&show).contains("state done"));
}

#[test]
fn run_once_summary_hides_addresses_and_webhook_paths_unless_revealed() {
    let dir = shipped_copy();
    // A webhook whose path and query carry a token; nothing listens on port 9 of loopback, so
    // the attempt fails with an error that quotes the URL and the delivery stays pending.
    let reports = std::fs::read_to_string(dir.path().join("config/reports.toml")).expect("read");
    let reports = reports.replacen(
        "# [[family.webhook]]\n# url = \"https://carrier.example/hooks/reports\"",
        "[[family.webhook]]\nurl = \"http://127.0.0.1:9/hooks/tok-8f3a?sig=tok-8f3a\"",
        1,
    );
    std::fs::write(dir.path().join("config/reports.toml"), reports).expect("write");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--once", "--date", "2026-11-30", "--max-wait", "2s"];
        args.extend_from_slice(extra);
        run_in(dir.path(), &args)
    };
    let text = run(&[]);
    assert_eq!(text.status.code(), Some(4), "{}", stderr(&text));
    let json = run(&["--json"]);
    for out in [&text, &json] {
        let s = stdout(out);
        assert!(!s.contains("tok-8f3a"), "{s}");
        assert!(!s.contains("ops-17@example.com"), "{s}");
        assert!(s.contains("o***@example.com"), "{s}");
        assert!(s.contains("webhook:http://127.0.0.1:9/"), "{s}");
    }
    let revealed = run(&["--json", "--reveal"]);
    let s = stdout(&revealed);
    assert!(
        s.contains("webhook:http://127.0.0.1:9/hooks/tok-8f3a?sig=tok-8f3a"),
        "{s}"
    );
    assert!(s.contains("ops-17@example.com"), "{s}");
}

#[test]
fn sweep_previews_with_dry_run_then_deletes_and_show_says_so() {
    let dir = shipped_copy();
    assert!(
        run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"])
            .status
            .success()
    );
    let now = chrono::Utc::now();
    let in_10_days = dawnpost::domain::window::rfc3339(now + chrono::Duration::days(10));
    let preview = run_in(
        dir.path(),
        &["sweep", "--dry-run", "--as-of", &in_10_days, "--json"],
    );
    assert!(preview.status.success(), "{}", stderr(&preview));
    let plan: serde_json::Value = serde_json::from_str(stdout(&preview).trim()).expect("json");
    let artifact_jobs: Vec<&str> = plan["artifact"]
        .as_array()
        .expect("artifact")
        .iter()
        .map(|i| i["job"].as_str().expect("job"))
        .collect();
    // warehouse-* keeps artifacts 30 days (the shipped override); the others 7.
    assert_eq!(artifact_jobs.len(), 2, "{artifact_jobs:?}");
    assert!(!artifact_jobs.contains(&"warehouse-17:2026-11-30"));
    assert_eq!(plan["ledger"].as_array().map(Vec::len), Some(0));
    let text = run_in(dir.path(), &["sweep", "--dry-run", "--as-of", &in_10_days]);
    assert!(stdout(&text).contains("nothing deleted"));
    let objects = |d: &std::path::Path| {
        std::fs::read_dir(d.join("var/artifacts/sydney-dc/2026-11-30"))
            .map(|r| r.count())
            .unwrap_or(0)
    };
    // One artifact: its HTML, text and CSV parts and its chart.
    assert_eq!(objects(dir.path()), 4, "the dry run deleted nothing");

    let swept = run_in(dir.path(), &["sweep", "--as-of", &in_10_days, "--json"]);
    assert!(swept.status.success(), "{}", stderr(&swept));
    let counts: serde_json::Value = serde_json::from_str(stdout(&swept).trim()).expect("json");
    assert_eq!(counts["artifacts_deleted"], 2);
    assert_eq!(objects(dir.path()), 0);
    let show = run_in(dir.path(), &["show", "sydney-dc:2026-11-30"]);
    assert!(
        stdout(&show).contains("deleted by retention at"),
        "{}",
        stdout(&show)
    );
    let json = run_in(dir.path(), &["show", "sydney-dc:2026-11-30", "--json"]);
    let history: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("json");
    assert_eq!(history["artifact_status"], "deleted");
}

#[test]
fn run_refuses_to_start_under_an_invalid_retention_policy() {
    let dir = shipped_copy();
    std::fs::write(
        dir.path().join("config/retention.toml"),
        "artifact = \"7d\"\nledger = \"1d\"\n",
    )
    .expect("write");
    let out = run_in(dir.path(), &["run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("retention.toml: line 2: ledger: ledger (1d) must be at least artifact (7d)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn run_refuses_a_public_bind_without_credentials() {
    let dir = shipped_copy();
    let settings = std::fs::read_to_string(dir.path().join("config/dawnpost.toml")).expect("read");
    std::fs::write(
        dir.path().join("config/dawnpost.toml"),
        settings.replace("bind = \"127.0.0.1:8080\"", "bind = \"0.0.0.0:0\""),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .current_dir(dir.path())
        .arg("run")
        .env_remove("DAWNPOST_OPS_TOKEN")
        .env_remove("DAWNPOST_INGEST_SECRET")
        .env_remove("DAWNPOST_DATABASE_URL")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a loopback address"),
        "{}",
        stderr(&out)
    );
}
