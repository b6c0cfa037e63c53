//! `skip_if_empty`: a report whose data is empty at the named path ends `skipped` with the
//! reason, sends nothing, and counts as finished (for `run --once` and retention); while a node
//! of an older version (which does not know the state) is live, it is sent as before. The
//! transition on both backends; the binary for real.

use crate::common;
use common::text;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{params, ready_jobs, t0};
use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger, run_in};
use dawnpost::Ledger;
use dawnpost::ledger::{JobState, LedgerError, Node, SKIPPED_FORMAT};

async fn a_skip_ends_the_job_with_its_reason_and_is_fenced(t: &TestLedger) {
    let l = &t.ledger;
    ready_jobs(t, &["w:2026-10-25"]).await;
    let leased = l
        .leases()
        .jobs(&params("n1", t0(), 1))
        .await
        .expect("lease");
    let lease = &leased[0].lease;
    let at = t0() + chrono::Duration::seconds(3);
    l.jobs()
        .skip(lease, "data.rows is empty", at)
        .await
        .expect("skip");
    let job = l
        .jobs()
        .get(&common::jk("w:2026-10-25"))
        .await
        .expect("get")
        .expect("job");
    assert_eq!(job.state, JobState::Skipped);
    assert!(job.state.is_terminal());
    assert_eq!(job.last_error.as_deref(), Some("data.rows is empty"));
    assert_eq!(job.terminal_at, Some(at));
    // The lease is spent: a second skip (or any late write of the render) is refused.
    let again = l.jobs().skip(lease, "again", at).await;
    assert!(
        matches!(again, Err(LedgerError::LeaseLost { .. })),
        "{again:?}"
    );
    // Finished work, as retention sees it.
    let later = at + chrono::Duration::days(1);
    let terminal = l
        .retention()
        .terminal_before(later, 10)
        .await
        .expect("terminal");
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].key.to_string(), "w:2026-10-25");
}

on_both_backends!(a_skip_ends_the_job_with_its_reason_and_is_fenced);

/// A project with one report on a file source whose `rows` are empty, `skip_if_empty =
/// "data.rows"`, and a webhook to `rx`.
fn project(rx: &Receiver) -> Project {
    let p = Project::new(&format!(
        r#"
[[report]]
id = "quiet"
title = "A quiet night"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/quiet.json" }}
skip_if_empty = "data.rows"
[[report.webhook]]
url = "{}"
"#,
        rx.url("hook")
    ));
    p.write_sample_rows("config/sample/quiet.json", 0);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_report_is_skipped_and_sends_nothing() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&rx);
    let run = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "skipped counts as finished: {}",
        text(&run)
    );
    assert!(text(&run).contains("skipped 1"), "{}", text(&run));
    assert!(rx.hits().is_empty(), "nothing sent");
    let show = run_in(p.root(), &["show", "quiet:2026-11-30"]);
    let said = text(&show);
    assert!(
        said.contains("skipped: data.rows is empty; nothing was sent"),
        "{said}"
    );
    let listed = run_in(p.root(), &["jobs", "--state", "skipped"]);
    assert!(
        text(&listed).contains("quiet:2026-11-30"),
        "{}",
        text(&listed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_an_older_node_is_live_an_empty_report_is_sent_as_before() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let p = project(&rx);
    let url = format!("sqlite://{}", p.root().join("var/dawnpost.db").display());
    let l = Ledger::connect(&url, p.root()).await.expect("ledger");
    let now = chrono::Utc::now();
    l.nodes()
        .heartbeat(&Node {
            id: "old-node:1".into(),
            version: "0.1.0".into(),
            schema_version: 10,
            formats: (SKIPPED_FORMAT - 1).to_string(),
            started_at: now,
            heartbeat_at: now,
        })
        .await
        .expect("an older node's heartbeat");
    l.close().await;
    let run = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert_eq!(
        rx.hits().len(),
        1,
        "sent: the older node would not read `skipped`"
    );
    let show = run_in(p.root(), &["show", "quiet:2026-11-30"]);
    assert!(!text(&show).contains("skipped"), "{}", text(&show));
}

#[test]
fn a_path_outside_the_data_is_refused_naming_file_report_and_field() {
    let p = Project::new(
        &common::report("warehouse-17", "0 30 6 * * *", "UTC")
            .replace("email =", "skip_if_empty = \"rows\"\nemail ="),
    );
    let check = run_in(p.root(), &["check"]);
    let said = text(&check);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("reports.toml")
            && said.contains("warehouse-17")
            && said.contains("skip_if_empty")
            && said.contains("starts with `data`"),
        "{said}"
    );
}

/// `send_when = "results"` without a path asks the source's whole data: an empty list (a query
/// that found no rows) is skipped, data with results is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_when_results_skips_a_source_without_results() {
    let rule: HttpRule = Arc::new(|_: &str, _, _| (204, None, Duration::ZERO));
    let rx = Receiver::start(rule).await;
    let report = |id: &str, file: &str| {
        format!(
            "[[report]]\nid = \"{id}\"\ntitle = \"{id}\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"UTC\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"{file}\" }}\nsend_when = \"results\"\n[[report.webhook]]\nurl = \"{}\"\n",
            rx.url(id)
        )
    };
    let p = Project::new(&format!(
        "{}{}",
        report("none-found", "config/sample/none.json"),
        report("found", "config/sample/found.json")
    ));
    p.write("config/sample/none.json", "[]");
    p.write_sample_rows("config/sample/found.json", 3);
    let run = run_in(p.root(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert_eq!(rx.hits().len(), 1, "only the report with results is sent");
    assert_eq!(rx.hits_for("found").len(), 1);
    let show = run_in(p.root(), &["show", "none-found:2026-11-30"]);
    assert!(
        text(&show).contains("skipped: data is empty; nothing was sent"),
        "{}",
        text(&show)
    );
}
