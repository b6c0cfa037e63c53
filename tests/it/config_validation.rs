//! Every bad input gets an error naming the file, the report and the field, and every error of
//! a file is reported together.

use crate::common;

use common::{Project, report};
use dawnpost::Config;
use dawnpost::config::ConfigError;

use crate::config_cases::{Edit, cases};

fn base() -> Project {
    let p = Project::new(&report("warehouse-17", "0 30 6 * * *", "Europe/Berlin"));
    p.write(
        "config/retention.toml",
        "artifact = \"7d\"\ndiagnostics = \"14d\"\nledger = \"30d\"\nsweep_every = \"10m\"\n",
    );
    p
}

fn apply(p: &Project, edits: &[Edit]) {
    for e in edits {
        match e {
            Edit::Replace(file, from, to) => {
                let path = p.root().join(file);
                let text = std::fs::read_to_string(&path).expect("read");
                assert!(text.contains(from), "{file} should contain {from:?}");
                std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
            }
            Edit::Append(file, more) => {
                let path = p.root().join(file);
                let mut text = std::fs::read_to_string(&path).unwrap_or_default();
                text.push_str(more);
                std::fs::write(&path, text).expect("write");
            }
            Edit::Write(file, text) => p.write(file, text),
        }
    }
}

/// What `check` refuses: the configuration's errors, then the templates' (each rendered
/// against its sample).
fn errors_of(p: &Project) -> Vec<ConfigError> {
    match Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
        Ok(config) => {
            dawnpost::report::render::check_templates(
                &config,
                &dawnpost::delivery::checked,
                &dawnpost::delivery::default_parts,
            )
            .0
        }
        Err(e) => e.0,
    }
}

#[test]
fn the_base_project_is_valid() {
    let p = base();
    assert!(errors_of(&p).is_empty(), "{:?}", errors_of(&p));
}

#[test]
fn each_bad_input_gets_its_own_message() {
    let all = cases();
    assert!(all.len() >= 15);
    let mut failures = Vec::new();
    for case in &all {
        let p = base();
        apply(&p, &case.edits);
        let errors = errors_of(&p);
        let hit = errors.iter().any(|e| {
            e.file.ends_with(case.file)
                && e.report.as_deref() == case.report
                && e.field == case.field
                && e.message.contains(case.message)
        });
        if !hit {
            failures.push(format!(
                "{}: expected {}: report {:?}: {}: …{}…\n   got: {:#?}",
                case.name,
                case.file,
                case.report,
                case.field,
                case.message,
                errors.iter().map(ToString::to_string).collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The binary refuses every case of the table as an operator meets it: `check` exits 1 naming
/// the file and the field, `run --once` refuses (or quarantines what cannot render), and no
/// process panics.
#[test]
fn the_binary_refuses_every_case_without_a_panic() {
    let mut failures = Vec::new();
    for case in &cases() {
        let p = base();
        apply(&p, &case.edits);
        let dawnpost = |args: &[&str]| common::run_in(p.root(), args);
        let check = dawnpost(&["check"]);
        let err = String::from_utf8_lossy(&check.stderr);
        if check.status.code() != Some(1)
            || !err.contains(case.file)
            || !err.contains(&format!("{}: ", case.field))
            || err.contains("panicked")
        {
            failures.push(format!("{}: check: {:?}: {err}", case.name, check.status));
        }
        let run = dawnpost(&["run", "--once", "--date", "2026-11-30", "--max-wait", "0s"]);
        let err = String::from_utf8_lossy(&run.stderr);
        if !matches!(run.status.code(), Some(1 | 3 | 4)) || err.contains("panicked") {
            failures.push(format!(
                "{}: run --once: {:?}: {err}",
                case.name, run.status
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_error_of_a_file_is_reported_together() {
    let mut reports = report("a", "30 6 * * *", "Europe/Berlin");
    reports.push_str(&report("b", "0 30 6 * * *", "Mars/Olympus"));
    reports.push_str(
        &report("c", "0 30 6 * * *", "Europe/Berlin").replace("ops@example.com", "nobody"),
    );
    let p = Project::new(&reports);
    p.write(
        "config/dawnpost.toml",
        "[pool]\nconcurrency = 0\n[retry]\nmax_attempts = 0\n",
    );
    let errors = errors_of(&p);
    let summary: Vec<(Option<&str>, &str)> = errors
        .iter()
        .map(|e| (e.report.as_deref(), e.field.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (None, "pool.concurrency"),
            (None, "retry.max_attempts"),
            (Some("a"), "schedule"),
            (Some("b"), "timezone"),
            (Some("c"), "email[0]"),
        ]
    );
    // Each names its line: report a's schedule is the first `schedule` of the file.
    let line = 1
        + (reports.lines())
            .position(|l| l.starts_with("schedule"))
            .expect("a schedule");
    let rendered = errors[2].to_string();
    assert!(
        rendered.contains(&format!(
            "reports.toml: line {line}: report \"a\": schedule: "
        )),
        "{rendered}"
    );
    let settings = errors[0].to_string();
    assert!(
        settings.contains("dawnpost.toml: line 2: pool.concurrency: "),
        "{settings}"
    );
}

#[test]
fn reports_may_be_split_across_files() {
    let p = Project::new(&report("a", "0 30 6 * * *", "Europe/Berlin"));
    p.write(
        "config/reports/b.toml",
        &report("b", "0 0 7 * * *", "Asia/Tokyo"),
    );
    p.write(
        "config/reports/c.toml",
        &report("a", "0 0 7 * * *", "Asia/Tokyo"),
    );
    let errors = errors_of(&p);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].file.ends_with("reports/c.toml"));
    assert!(errors[0].message.contains("first defined in"));
    std::fs::remove_file(p.root().join("config/reports/c.toml")).expect("rm");
    let config = p.load();
    assert_eq!(
        config
            .reports
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[test]
fn the_shipped_config_is_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let config =
        Config::load(&dir, &dawnpost::delivery::readers()).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.reports.len() >= 3);
    let w17 = config.report("warehouse-17").expect("warehouse-17 ships");
    assert_eq!(w17.timezone().name(), "Europe/Berlin");
    let zones: std::collections::BTreeSet<&str> =
        config.reports.iter().map(|r| r.timezone().name()).collect();
    assert!(zones.len() >= 3, "reports in different timezones");
    assert_eq!(
        config
            .retention
            .for_report("warehouse-17")
            .artifact
            .to_string(),
        "30d"
    );
    assert_eq!(
        config
            .retention
            .for_report("sydney-dc")
            .artifact
            .to_string(),
        "7d"
    );
}

#[test]
fn a_timeout_longer_than_the_lease_is_flagged() {
    let p = base();
    p.write(
        "config/dawnpost.toml",
        "[pool]\nlease = \"30s\"\n[email]\ntimeout = \"2m\"\n",
    );
    p.write(
        "config/reports.toml",
        &report("warehouse-17", "0 30 6 * * *", "Europe/Berlin").replace(
            "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
            "source = { kind = \"http\", url = \"http://127.0.0.1:9/data\", timeout = \"45s\" }\nsample = \"config/sample/warehouse-17.json\"",
        ),
    );
    let config = p.load();
    let flagged: Vec<&String> = config
        .warnings
        .iter()
        .filter(|w| w.contains("pool.lease"))
        .collect();
    assert_eq!(flagged.len(), 2, "{:?}", config.warnings);
    assert!(
        flagged[0].contains("dawnpost.toml") && flagged[0].contains("email.timeout (2m)"),
        "{}",
        flagged[0]
    );
    assert!(
        flagged[1].contains("reports.toml")
            && flagged[1].contains("\"warehouse-17\"")
            && flagged[1].contains("source.timeout (45s)"),
        "{}",
        flagged[1]
    );
}

#[test]
fn timeouts_within_the_lease_are_not_flagged() {
    let config = base().load();
    assert!(
        config.warnings.iter().all(|w| !w.contains("pool.lease")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn service_intervals_come_from_the_services_table() {
    let p = base();
    let defaults = p.load().settings.services;
    assert_eq!(defaults.runbooks_every.to_string(), "2s");
    assert_eq!(defaults.clock_every.to_string(), "10s");
    assert_eq!(
        defaults.rescue_every, None,
        "a quarter of the lease by default"
    );
    p.write(
        "config/dawnpost.toml",
        "[services]\nrescue_every = \"1s\"\nrunbooks_every = \"500ms\"\nclock_every = \"30s\"\n",
    );
    let s = p.load().settings.services;
    assert_eq!(s.rescue_every.map(|t| t.to_string()), Some("1s".into()));
    assert_eq!(s.runbooks_every.to_string(), "500ms");
    assert_eq!(s.clock_every.to_string(), "30s");
}
