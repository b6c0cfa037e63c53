//! Messages a person reads, as outside tools found them: a missing job named by its debug form,
//! a template error printed three times, a strict-mode error quoting an `Option`, a source error
//! said twice. Each now says its thing once, in words (the binary, on a copy of the shipped
//! project).

use crate::common;

use common::{run_in, shipped_copy};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The messages outside tools found repeated or in Rust's debug form: each says its thing once,
/// in words.
#[test]
fn messages_say_each_thing_once_and_never_in_debug_form() {
    let dir = shipped_copy();
    let once = |text: &str, needle: &str| text.matches(needle).count() == 1;
    let out = run_in(dir.path(), &["show", "nosuch:2026-11-01"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("no job nosuch:2026-11-01"), "{err}");
    assert!(
        !err.contains("JobKey") && !err.contains("ReportId"),
        "{err}"
    );

    let template = dir.path().join("templates/daily_ops.txt.hbs");
    let original = std::fs::read_to_string(&template).expect("template");
    std::fs::write(&template, format!("{original}{{{{#if x}}}} broken\n")).expect("write");
    let out = run_in(dir.path(), &["run", "--once", "--date", "2026-11-30"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(once(&err, "invalid handlebars syntax"), "said once: {err}");
    assert!(
        err.contains("daily_ops.txt.hbs line "),
        "names the file and line: {err}"
    );

    std::fs::write(
        &template,
        format!("{original}{{{{data.summary.no_such_field}}}}\n"),
    )
    .expect("write");
    let out = run_in(dir.path(), &["check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no field data.summary.no_such_field in the data"),
        "{err}"
    );
    assert!(
        !err.contains("Some(") && !err.contains("strict mode Some"),
        "{err}"
    );
    std::fs::write(&template, original).expect("restore");

    let reports = dir.path().join("config/reports.toml");
    let text = std::fs::read_to_string(&reports).expect("reports");
    let http = text.replacen(
        "source = { kind = \"file\", path = \"config/sample/{{row.id}}.json\" }",
        "source = { kind = \"http\", url = \"http://127.0.0.1:9/{{row.id}}\", timeout = \"2s\" }\nsample = \"config/sample/{{row.id}}.json\"",
        1,
    );
    assert_ne!(http, text, "the shipped warehouse-17 reads a file");
    std::fs::write(&reports, http).expect("write");
    let out = run_in(
        dir.path(),
        &["preview", "warehouse-17", "--date", "2026-11-30"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(once(&err, "source failed"), "said once: {err}");
    assert!(once(&err, "Connection refused"), "said once: {err}");
}
