//! The binary as an operator uses it: check, plan, backfill, enqueue, jobs, migrate. Its runs
//! (`run --once`, `sweep`, what `run` refuses) are in `cli_run.rs`.

use crate::common;

use std::process::{Command, Output};

use common::{Project, report, run_in, shipped_copy};

pub(crate) fn dawnpost(p: &Project, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dawnpost"))
        .arg("--config")
        .arg(p.config_dir())
        .args(args)
        .env_remove("DAWNPOST_DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("run dawnpost")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ny_project() -> Project {
    let mut reports = report("ny-0130", "0 30 1 * * *", "America/New_York");
    reports.push_str(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    Project::new(&reports)
}

#[test]
fn check_lists_every_problem_and_fails() {
    let mut reports = report("a", "0 30 6 * * *", "Europe/Berln");
    reports.push_str(&report("b", "0 61 6 * * *", "Europe/Berlin"));
    let p = Project::new(&reports);
    p.write("config/retention.toml", "ledger = \"1d\"\n");
    let out = dawnpost(&p, &["check"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("report \"a\": timezone: \"Europe/Berln\" is not an IANA timezone"),
        "{err}"
    );
    assert!(err.contains("report \"b\": schedule:"), "{err}");
    assert!(
        err.contains("retention.toml: line 1: ledger: ledger (1d) must be at least artifact (7d)"),
        "{err}"
    );
}

#[test]
fn check_prints_the_next_three_fires_in_local_time_and_utc() {
    let p = ny_project();
    let out = dawnpost(&p, &["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let berlin: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("next warehouse-17:"))
        .collect();
    assert_eq!(berlin.len(), 3, "{text}");
    for line in berlin {
        assert!(line.contains(" 06:30:00 CE"), "local time shown: {line}");
        assert!(line.contains(":30:00Z"), "UTC shown: {line}");
    }
    assert_eq!(
        text.lines().filter(|l| l.contains("next ny-0130:")).count(),
        3
    );
}

#[test]
fn plan_json_prints_one_object_per_fire() {
    let p = ny_project();
    let out = dawnpost(
        &p,
        &[
            "plan",
            "--from",
            "2026-11-01T00:00:00Z",
            "--to",
            "2026-11-02T00:00:00Z",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["key"], "ny-0130:2026-11-01");
    assert_eq!(lines[0]["fire_at"], "2026-11-01T05:30:00Z");
    assert_eq!(lines[0]["window_start"], "2026-10-31T04:00:00Z");
    assert_eq!(lines[0]["window_end"], "2026-11-01T04:00:00Z");
    assert_eq!(lines[1]["key"], "warehouse-17:2026-11-01");
    assert_eq!(lines[1]["fire_at"], "2026-11-01T05:30:00Z");
    assert_eq!(lines[1]["report"], "warehouse-17");
}

#[test]
fn plan_rejects_bad_instants() {
    let p = ny_project();
    let out = dawnpost(&p, &["plan", "--from", "yesterday", "--to", "2026-11-02"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("\"yesterday\" is not an instant"));
}

#[test]
fn inspection_survives_a_bad_edit_and_the_rest_refuses() {
    let dir = shipped_copy();
    let first = run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // An operator breaks a sample file and the retention policy by hand.
    std::fs::write(
        dir.path().join("config/sample/warehouse-17.json"),
        "{ not json",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("config/retention.toml"),
        "[defaults]\nledger = \"-1d\"\n",
    )
    .expect("write");
    let reads: [&[&str]; 4] = [
        &["jobs", "--json"],
        &["show", "warehouse-17:2026-11-30"],
        &["dlq"],
        &[
            "redrive",
            "warehouse-17:2026-11-30",
            "--by",
            "ops",
            "--reason",
            "why not",
        ],
    ];
    for args in reads {
        let out = run_in(dir.path(), args);
        let err = stderr(&out);
        assert!(
            err.contains("warehouse-17.json") && err.contains("retention.toml"),
            "{args:?} names both files: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        if args[0] == "redrive" {
            // It reached the ledger: the job is done, so there is nothing to redrive.
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(
                err.contains("only quarantined work can be redriven"),
                "{err}"
            );
        } else {
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            assert!(
                stdout(&out).contains("warehouse-17:2026-11-30") || args[0] == "dlq",
                "{args:?}"
            );
        }
    }
    let refusers: [&[&str]; 3] = [
        &["check"],
        &["run", "--once", "--date", "2026-12-01"],
        &["sweep", "--dry-run"],
    ];
    for args in refusers {
        let out = run_in(dir.path(), args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?} refuses: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("warehouse-17.json"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn long_ranges_go_month_by_month_without_a_gap_or_a_repeat() {
    let p = ny_project();
    let range = ["--from", "2026-09-01", "--to", "2026-12-01", "--json"];
    let keys = |o: &Output| -> Vec<String> {
        stdout(o)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json")["key"].to_string())
            .collect()
    };
    let plan = dawnpost(&p, &[&["plan"][..], &range].concat());
    let backfill = dawnpost(&p, &[&["backfill"][..], &range].concat());
    assert!(backfill.status.success(), "{}", stderr(&backfill));
    let (planned, filled) = (keys(&plan), keys(&backfill));
    // 91 local dates, two daily reports.
    assert_eq!(planned.len(), 182);
    assert_eq!(filled, planned, "backfill inserts exactly what plan lists");
    let unique: std::collections::BTreeSet<_> = planned.iter().collect();
    assert_eq!(
        unique.len(),
        planned.len(),
        "no fire twice across month boundaries"
    );
}

#[test]
fn dates_take_four_digit_years_only_and_nothing_panics() {
    let p = ny_project();
    let cases: [&[&str]; 5] = [
        &["enqueue", "ny-0130", "--date", "+99999-01-01"],
        &["enqueue", "ny-0130", "--date", "99999-01-01"],
        &["plan", "--from", "+99999-01-01", "--to", "+99999-01-02"],
        &["backfill", "--from", "2026-11-01", "--to", "+99999-01-01"],
        &["show", "ny-0130:+99999-01-01"],
    ];
    for args in cases {
        let out = dawnpost(&p, args);
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: {:?}",
            out.status
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("+99999") || stderr(&out).contains("99999"),
            "{args:?} names the bad value: {}",
            stderr(&out)
        );
    }
    let jobs = dawnpost(&p, &["jobs", "--json"]);
    assert_eq!(stdout(&jobs).trim(), "", "no refused date made a job");
}

#[test]
fn backfill_is_idempotent_and_enqueue_inserts_one() {
    let p = ny_project();
    let args = [
        "backfill",
        "--from",
        "2026-10-30",
        "--to",
        "2026-11-03",
        "--json",
    ];
    let first = dawnpost(&p, &args);
    assert!(first.status.success(), "{}", stderr(&first));
    let inserted = |o: &Output| {
        stdout(o)
            .lines()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l).expect("json")["inserted"] == true
            })
            .count()
    };
    assert_eq!(inserted(&first), 8);
    let second = dawnpost(&p, &args);
    assert_eq!(stdout(&second).lines().count(), 8);
    assert_eq!(inserted(&second), 0, "a second backfill inserts nothing");

    let enq = dawnpost(
        &p,
        &["enqueue", "warehouse-17", "--date", "2026-11-30", "--json"],
    );
    assert!(enq.status.success(), "{}", stderr(&enq));
    let line: serde_json::Value = serde_json::from_str(stdout(&enq).trim()).expect("json");
    assert_eq!(line["key"], "warehouse-17:2026-11-30");
    assert_eq!(line["inserted"], true);
    assert_eq!(line["state"], "ready");
    assert_eq!(line["window_start"], "2026-11-28T23:00:00Z");
    let again = dawnpost(&p, &["enqueue", "warehouse-17", "--date", "2026-11-30"]);
    assert!(stdout(&again).contains("already exists (ready); nothing inserted"));

    let unknown = dawnpost(&p, &["enqueue", "nope", "--date", "2026-11-30"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stderr(&unknown).contains("no report \"nope\""));

    let jobs = dawnpost(&p, &["jobs", "--json", "--state", "ready"]);
    assert!(jobs.status.success(), "{}", stderr(&jobs));
    let keys: Vec<String> = stdout(&jobs)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["key"]
                .as_str()
                .expect("key")
                .to_string()
        })
        .collect();
    assert_eq!(keys.len(), 9);
    assert_eq!(keys[0], "warehouse-17:2026-11-30", "newest date first");
    let bad_state = dawnpost(&p, &["jobs", "--state", "finished"]);
    assert_eq!(bad_state.status.code(), Some(1));
    assert!(stderr(&bad_state).contains("is not a job state"));
}

#[test]
fn migrate_creates_the_sqlite_ledger_under_the_project_root() {
    let p = ny_project();
    let out = dawnpost(&p, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(p.root().join("var/dawnpost.db").is_file());
    let again = dawnpost(&p, &["migrate"]);
    assert!(again.status.success(), "migrations apply once");
}
