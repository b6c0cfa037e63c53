//! How large a report is before it goes out: `preview` says each part's size (the `.eml` as
//! encoded, base64 included), warns when the HTML passes Gmail's clipping size, and when the
//! email or a webhook body passes `[email] max_message_bytes` or `[webhook] max_body_bytes`;
//! `check` warns the same of each report's sample.

use crate::common;

use common::{Project, run_in};

/// A report with `rows` rows of the sample's shape, an email recipient and a webhook.
fn project(rows: usize, limits: &str) -> Project {
    let p = Project::new(
        r#"
[[report]]
id = "big"
title = "A big night"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = { kind = "file", path = "config/sample/big.json" }
email = ["ops@example.com"]
[[report.webhook]]
url = "http://127.0.0.1:9/hook"
"#,
    );
    p.write_sample_rows("config/sample/big.json", rows);
    p.write("config/dawnpost.toml", limits);
    p
}

fn preview(p: &Project) -> (String, u64) {
    let out = run_in(p.root(), &["preview", "big", "--date", "2026-11-30"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    let eml = p.root().join("var/preview/big-2026-11-30.eml");
    let bytes = std::fs::metadata(&eml).expect("the .eml").len();
    (said, bytes)
}

#[test]
fn a_small_report_gets_its_sizes_and_no_warning() {
    let p = project(3, "");
    let (said, eml) = preview(&p);
    let sizes = said
        .lines()
        .find(|l| l.starts_with("sizes: "))
        .expect(&said);
    assert!(sizes.contains("html ") && sizes.contains("csv "), "{sizes}");
    let shown = dawnpost::report::render::human_size(usize::try_from(eml).expect("size"));
    assert!(
        sizes.contains(&format!("email {shown} encoded")),
        "{sizes} ({eml} bytes)"
    );
    assert!(!said.contains("warning:"), "{said}");
}

#[test]
fn a_large_report_is_warned_about_before_it_goes_out() {
    let p = project(
        4_000,
        "[email]\nmax_message_bytes = \"256KiB\"\n[webhook]\nmax_body_bytes = \"64KiB\"\n",
    );
    let (said, eml) = preview(&p);
    assert!(eml > 256 * 1024, "the test's report is large ({eml} bytes)");
    assert!(
        said.contains("over Gmail's clipping size (102 KB)"),
        "{said}"
    );
    assert!(
        said.contains("is over [email] max_message_bytes (256KiB)"),
        "{said}"
    );
    assert!(
        said.contains("is over [webhook] max_body_bytes (64KiB)"),
        "{said}"
    );
}

#[test]
fn check_warns_about_a_sample_too_large_for_its_destinations() {
    let small = project(3, "");
    let check = run_in(small.root(), &["check"]);
    let said = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(check.status.success(), "{said}");
    assert!(!said.contains("over "), "{said}");
    let p = project(
        4_000,
        "[email]\nmax_message_bytes = \"256KiB\"\n[webhook]\nmax_body_bytes = \"64KiB\"\n",
    );
    let check = run_in(p.root(), &["check"]);
    let said = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(check.status.success(), "a warning, not an error: {said}");
    for expected in [
        "report \"big\": the sample's HTML part",
        "over Gmail's clipping size (102 KB)",
        "is over [email] max_message_bytes (256KiB)",
        "is over [webhook] max_body_bytes (64KiB)",
    ] {
        assert!(said.contains(expected), "{expected}: {said}");
    }
}

#[test]
fn a_limit_that_is_not_a_size_is_refused_naming_file_and_field() {
    let p = project(3, "[email]\nmax_message_bytes = \"ten megabytes\"\n");
    let check = run_in(p.root(), &["check"]);
    let said = String::from_utf8_lossy(&check.stderr).to_string()
        + &String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("dawnpost.toml")
            && said.contains("email.max_message_bytes")
            && said.contains("not a size"),
        "{said}"
    );
}
