//! The shipped Prometheus alerting rules (`deploy/prometheus/alerts.yml`): valid, their unit
//! tests pass under `promtool test rules`, and every dawnpost series they read is one
//! `/metrics` exports. Needs `promtool` (Debian's `prometheus`; `.ci/run` installs it).

use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str]) -> (bool, String) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus");
    let out = Command::new("promtool")
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("promtool (Debian's prometheus package) is needed: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let (ok, text) = promtool(&["check", "rules", "alerts.yml"]);
    assert!(ok, "{text}");
    assert!(text.contains("11 rules found"), "{text}");
    let (ok, text) = promtool(&["test", "rules", "alerts_test.yml"]);
    assert!(ok, "{text}");
}

#[test]
fn the_alert_rules_read_only_series_dawnpost_exports() {
    let rules = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml"),
    )
    .expect("alerts.yml");
    let mut exported: Vec<&str> = dawnpost::runtime::metrics::NAMES.to_vec();
    // Exported once a report has an accepted delivery (a family without series is not).
    exported.push("dawnpost_report_last_accepted_timestamp_seconds");
    // Exported while a report is late (no series while none is).
    exported.push("dawnpost_report_late");
    let used: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("dawnpost_"))
        .collect();
    assert!(used.len() >= 7, "{used:?}");
    for name in used {
        assert!(
            exported.contains(&name),
            "{name} is not a series /metrics exports"
        );
    }
}
