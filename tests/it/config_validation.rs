//! Every bad input gets an error naming the file, the report and the field, and every error of
//! a file is reported together.

use crate::common;

use common::{Project, report};
use dawnpost::Config;
use dawnpost::config::ConfigError;

/// How a case spoils the valid base project.
enum Edit {
    /// Replace text in a file (the text must be there).
    Replace(&'static str, &'static str, &'static str),
    /// Append text to a file.
    Append(&'static str, &'static str),
    /// Write a file.
    Write(&'static str, &'static str),
}

struct Case {
    name: &'static str,
    edits: Vec<Edit>,
    file: &'static str,
    report: Option<&'static str>,
    field: &'static str,
    message: &'static str,
}

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
    match Config::load(&p.config_dir()) {
        Ok(config) => dawnpost::render::check_templates(&config).0,
        Err(e) => e.0,
    }
}

const R: &str = "config/reports.toml";
const S: &str = "config/dawnpost.toml";
const P: &str = "config/retention.toml";

fn cases() -> Vec<Case> {
    use Edit::*;
    vec![
        Case {
            name: "report id pattern",
            edits: vec![Replace(R, "id = \"warehouse-17\"", "id = \"Warehouse_17\"")],
            file: "reports.toml",
            report: Some("Warehouse_17"),
            field: "id",
            message: "does not match [a-z0-9][a-z0-9-]*",
        },
        Case {
            name: "report id too long",
            edits: vec![Replace(
                R,
                "id = \"warehouse-17\"",
                "id = \"warehouse-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
            )],
            file: "reports.toml",
            report: Some(
                "warehouse-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ),
            field: "id",
            message: "longer than 63 characters",
        },
        Case {
            name: "duplicate report id",
            edits: vec![Append(R, DUPLICATE)],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "id",
            message: "duplicate report id",
        },
        Case {
            name: "five-field cron",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"30 6 * * *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "has 5 field(s); write six",
        },
        Case {
            name: "cron out of range",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"0 61 6 * * *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "is not a valid cron expression",
        },
        Case {
            name: "cron that never fires",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"0 30 6 31 2 *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "never fires",
        },
        Case {
            name: "unknown timezone",
            edits: vec![Replace(R, "\"Europe/Berlin\"", "\"Europe/Berln\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "timezone",
            message: "\"Europe/Berln\" is not an IANA timezone",
        },
        Case {
            name: "template file missing",
            edits: vec![Replace(
                R,
                "template = \"daily_ops\"",
                "template = \"weekly_ops\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "weekly_ops.html.hbs",
        },
        Case {
            name: "template with an unknown helper",
            edits: vec![Append(
                "templates/daily_ops.txt.hbs",
                "{{shout data.site}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "shout",
        },
        Case {
            name: "template with an unknown partial",
            edits: vec![Append("templates/daily_ops.html.hbs", "{{> footer}}\n")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "footer",
        },
        Case {
            name: "template field missing from the sample data",
            edits: vec![Append(
                "templates/daily_ops.html.hbs",
                "{{data.summary.returns}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "data.summary.returns",
        },
        Case {
            name: "template syntax error",
            edits: vec![Append(
                "templates/daily_ops.txt.hbs",
                "{{#each data.rows}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "daily_ops.txt.hbs",
        },
        Case {
            name: "unknown source kind",
            edits: vec![Replace(R, "kind = \"file\"", "kind = \"ftp\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.kind",
            message: "\"ftp\" is not a source kind",
        },
        Case {
            name: "source file missing",
            edits: vec![Replace(R, "sample/warehouse-17.json", "sample/nope.json")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "cannot read",
        },
        Case {
            name: "source file a device",
            edits: vec![Replace(R, "config/sample/warehouse-17.json", "/dev/zero")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "/dev/zero is not a regular file",
        },
        Case {
            name: "source file not JSON",
            edits: vec![Write("config/sample/warehouse-17.json", "{ rows: [ }")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "is not valid JSON",
        },
        Case {
            name: "http source with a bad URL",
            edits: vec![Replace(
                R,
                "{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "{ kind = \"http\", url = \"gopher://ops/{{window.start}}\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.url",
            message: "is not an http or https URL",
        },
        Case {
            name: "sql source without its query file",
            edits: vec![Replace(
                R,
                "{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "{ kind = \"sql\", url_env = \"OPS_DB_URL\", query = \"config/queries/missing.sql\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.query",
            message: "does not exist",
        },
        Case {
            name: "email address that does not parse",
            edits: vec![Replace(
                R,
                "\"ops@example.com\"",
                "\"ops@example.com\", \"not-an-address\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "email[1]",
            message: "\"not-an-address\" is not an email address",
        },
        Case {
            name: "webhook URL with another scheme",
            edits: vec![Append(
                R,
                "[[report.webhook]]\nurl = \"ftp://carrier.example/hooks\"\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "webhook[0].url",
            message: "scheme \"ftp\" is not http or https",
        },
        Case {
            name: "unknown key in a report",
            edits: vec![Append(R, "shedule = \"0 0 7 * * *\"\n")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "shedule",
            message: "unknown key",
        },
        Case {
            name: "missing title",
            edits: vec![Replace(R, "title = \"Report warehouse-17\"\n", "")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "title",
            message: "missing required field",
        },
        Case {
            name: "unknown key in a settings section",
            edits: vec![Write(S, "[pool]\nconcurency = 4\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.concurency",
            message: "unknown key",
        },
        Case {
            name: "a service interval too short",
            edits: vec![Write(S, "[services]\nrunbooks_every = \"10ms\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "services.runbooks_every",
            message: "10ms is too short: at least 100ms",
        },
        Case {
            name: "unknown key in [services]",
            edits: vec![Write(S, "[services]\nsweep_every = \"1m\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "services.sweep_every",
            message: "unknown key",
        },
        Case {
            name: "duration with an unknown unit",
            edits: vec![Write(S, "[retry]\ncap = \"15x\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "retry.cap",
            message: "invalid duration \"15x\": unknown unit",
        },
        Case {
            name: "huge lease",
            edits: vec![Write(S, "[pool]\nlease = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.lease",
            message: "longer than 100 years",
        },
        Case {
            name: "huge catch_up",
            edits: vec![Write(S, "[schedule]\ncatch_up = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "schedule.catch_up",
            message: "longer than 100 years",
        },
        Case {
            name: "huge max_age",
            edits: vec![Write(S, "[retry]\nmax_age = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "retry.max_age",
            message: "longer than 100 years",
        },
        Case {
            name: "huge drain_timeout",
            edits: vec![Write(S, "[pool]\ndrain_timeout = \"5300w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.drain_timeout",
            message: "longer than 100 years",
        },
        Case {
            name: "retention duration over 100 years",
            edits: vec![Replace(P, "ledger = \"30d\"", "ledger = \"100000000w\"")],
            file: "retention.toml",
            report: None,
            field: "ledger",
            message: "longer than 100 years",
        },
        Case {
            name: "artifact store run cannot open",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"ftp://files.example/reports\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.url",
            message: "is not an object store",
        },
        Case {
            name: "database pool of one connection",
            edits: vec![Write(S, "[database]\nmax_connections = 1\n")],
            file: "dawnpost.toml",
            report: None,
            field: "database.max_connections",
            message: "out of range: 2 to 1000",
        },
        Case {
            name: "s3 setting on a file store",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"file://var/artifacts\"\nendpoint = \"http://127.0.0.1:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "only applies to an s3:// store",
        },
        Case {
            name: "s3 endpoint not a URL",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\nendpoint = \"minio:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "is not an http(s) URL",
        },
        Case {
            name: "s3 plain http endpoint without allow_http",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\nendpoint = \"http://127.0.0.1:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "set allow_http = true",
        },
        Case {
            name: "s3 credentials variable not a name",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\naccess_key_id_env = \"MY KEY\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.access_key_id_env",
            message: "is not an environment variable name",
        },
        Case {
            name: "source limit over 1GiB",
            edits: vec![Replace(
                R,
                "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\", limit = \"2GiB\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.limit",
            message: "is not a size from 1 byte to 1GiB",
        },
        Case {
            name: "zero lease",
            edits: vec![Write(S, "[pool]\nlease = \"0s\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.lease",
            message: "must be longer than zero",
        },
        Case {
            name: "zero clock offset",
            edits: vec![Write(S, "[pool]\nmax_clock_offset = \"0s\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.max_clock_offset",
            message: "must be longer than zero",
        },
        Case {
            name: "smtp URL with another scheme",
            edits: vec![Write(S, "[email]\nsmtp_url = \"http://127.0.0.1:2525\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.smtp_url",
            message: "is not an smtp:// or smtps:// URL",
        },
        Case {
            name: "reply-to not an address",
            edits: vec![Write(S, "[email]\nreply_to = \"ops at example\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.reply_to",
            message: "invalid address \"ops at example\"",
        },
        Case {
            name: "list domain not a domain",
            edits: vec![Write(S, "[email]\nlist_domain = \"reports/example\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.list_domain",
            message: "is not a domain name",
        },
        Case {
            name: "EHLO name without a dot",
            edits: vec![Write(S, "[email]\nhelo_name = \"vm\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.helo_name",
            message: "is not a fully qualified domain name",
        },
        Case {
            name: "CA bundle missing",
            edits: vec![Write(S, "[tls]\nca_file = \"config/no-such-ca.pem\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "tls.ca_file",
            message: "cannot read",
        },
        Case {
            name: "CA bundle without a certificate",
            edits: vec![Write(S, "[tls]\nca_file = \"config/reports.toml\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "tls.ca_file",
            message: "holds no PEM certificate",
        },
        Case {
            name: "server limits of zero",
            edits: vec![Write(
                S,
                "[server]\nheader_timeout = \"0s\"\nmax_connections = 0\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "server.header_timeout",
            message: "must be longer than zero",
        },
        Case {
            name: "list-unsubscribe not mailto",
            edits: vec![Replace(
                R,
                "id = \"warehouse-17\"",
                "id = \"warehouse-17\"\nlist_unsubscribe = \"https://example.com/unsub\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "list_unsubscribe",
            message: "is not a mailto: URL with an address",
        },
        Case {
            name: "wrong type",
            edits: vec![Write(S, "[pool]\nconcurrency = \"many\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.concurrency",
            message: "invalid type",
        },
        Case {
            name: "retention ledger shorter than artifacts",
            edits: vec![Replace(P, "ledger = \"30d\"", "ledger = \"3d\"")],
            file: "retention.toml",
            report: None,
            field: "ledger",
            message: "ledger (3d) must be at least artifact (7d)",
        },
        Case {
            name: "retention override shorter ledger",
            edits: vec![Append(
                P,
                "[[override]]\nreports = \"warehouse-*\"\ndiagnostics = \"60d\"\n",
            )],
            file: "retention.toml",
            report: None,
            field: "override[0].ledger",
            message: "must be at least diagnostics (60d) (override \"warehouse-*\")",
        },
        Case {
            name: "retention override with a bad glob",
            edits: vec![Append(P, "[[override]]\nreports = \"warehouse-[\"\n")],
            file: "retention.toml",
            report: None,
            field: "override[0].reports",
            message: "is not a glob",
        },
        Case {
            name: "retention negative duration",
            edits: vec![Replace(P, "artifact = \"7d\"", "artifact = \"-7d\"")],
            file: "retention.toml",
            report: None,
            field: "artifact",
            message: "negative durations are not allowed",
        },
        Case {
            name: "TOML syntax error",
            edits: vec![Append(R, "[[report]\n")],
            file: "reports.toml",
            report: None,
            field: "(syntax)",
            message: "invalid TOML",
        },
    ]
}

const DUPLICATE: &str = r#"
[[report]]
id = "warehouse-17"
title = "Again"
schedule = "0 0 7 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
"#;

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
    let rendered = errors[2].to_string();
    assert!(
        rendered.contains("reports.toml: report \"a\": schedule: "),
        "{rendered}"
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
    let config = Config::load(&dir).unwrap_or_else(|e| panic!("{e}"));
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
