//! Every key the configuration's loader accepts is in the configuration reference. The
//! keys are the loader's own: each table is given a key it does not know, and the loader's
//! refusal lists the keys it reads there.

use std::collections::BTreeSet;
use std::path::Path;

use dawnpost::config::Config;

use crate::common::{Project, report};

const UNKNOWN: &str = "zzz_not_a_key";

/// The configuration reference: every key with its type, default and an example.
const REFERENCE: &[&str] = &["docs/reference/configuration.md"];

/// The keys the loader lists when `file` of a project holds `text` (and the other files are
/// the minimal ones), or none when it does not complain of [`UNKNOWN`].
fn keys_read(file: &str, text: &str) -> Vec<String> {
    let p = Project::new(&report_with("calendar = \"config/calendars/c.toml\""));
    p.write("config/q.sql", "SELECT 1");
    p.write("config/rows.csv", "id\nw1\n");
    p.write("config/rows.json", r#"[{"id": "w1"}]"#);
    p.write("config/calendars/c.toml", "weekdays = \"MON-FRI\"\n");
    p.write(file, text);
    let Err(errors) = Config::load(&p.config_dir(), &dawnpost::delivery::readers()) else {
        return Vec::new();
    };
    let mut keys: Vec<String> = (errors.0.iter())
        .filter(|e| e.field.ends_with(UNKNOWN))
        .filter_map(|e| e.message.strip_prefix("unknown key (expected one of: "))
        .flat_map(|list| list.trim_end_matches(')').split(", "))
        .map(str::to_string)
        .collect();
    // A file read whole by serde (a calendar) says "unknown field `…`, expected `a` or `b`".
    let serde_said = format!("unknown field `{UNKNOWN}`, expected ");
    for e in &errors.0 {
        if let Some((_, list)) = e.message.split_once(&serde_said) {
            keys.extend(list.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    keys
}

/// A report with `extra` keys.
fn report_with(extra: &str) -> String {
    format!("{}{extra}\n", report("probe", "0 30 6 * * *", "UTC"))
}

/// Every table of every file the loader reads, each given a key it does not know.
fn probes() -> Vec<(&'static str, String)> {
    let settings = |table: &str| -> Vec<(&'static str, String)> {
        vec![
            (
                "config/dawnpost.toml",
                format!("[{table}]\n{UNKNOWN} = 1\n"),
            ),
            (
                "config/dawnpost.toml",
                format!("[[{table}]]\nhost = \"h.example\"\nper_second = 1\n{UNKNOWN} = 1\n"),
            ),
        ]
    };
    let top = keys_read("config/dawnpost.toml", &format!("{UNKNOWN} = 1\n"));
    assert!(top.len() >= 8, "dawnpost.toml's sections: {top:?}");
    let mut out: Vec<(&'static str, String)> =
        vec![("config/dawnpost.toml", format!("{UNKNOWN} = 1\n"))];
    out.extend(top.iter().flat_map(|t| settings(t)));
    let u = UNKNOWN;
    let reports = [
        report_with(&format!("{u} = 1")),
        report_with(&format!(
            "[[report.webhook]]\nurl = \"https://h.example/x\"\n{u} = 1"
        )),
        report_with(&format!(
            "owner_webhook = {{ url = \"https://h.example/o\", {u} = 1 }}"
        )),
        report_with(&format!("[[report.slack]]\nurl_env = \"S\"\n{u} = 1")),
        report_with(&format!("[[report.teams]]\nurl_env = \"T\"\n{u} = 1")),
        report_with(&format!("owner_slack = {{ url_env = \"S\", {u} = 1 }}")),
        report_with(&format!("owner_teams = {{ url_env = \"T\", {u} = 1 }}")),
        report_with(&format!(
            "figures = [{{ label = \"L\", path = \"data.x\", {u} = 1 }}]"
        )),
        report_with(&format!(
            "[[report.chart]]\nid = \"c\"\nkind = \"line\"\ntitle = \"C\"\ndata = \"data.rows\"\nx = \"shift\"\ny = \"late\"\n{u} = 1"
        )),
        report_with(&format!(
            "ready_when = {{ kind = \"file\", path = \"r.flag\", {u} = 1 }}"
        )),
        report_with(&format!(
            "ready_when = {{ kind = \"http\", url = \"http://h.example/r\", {u} = 1 }}"
        )),
        report_with(&format!(
            "ready_when = {{ kind = \"sql\", url_env = \"DB\", query = \"config/q.sql\", {u} = 1 }}"
        )),
        report_with(&format!("calendar = \"config/calendars/c.toml\"\n{u} = 1")),
        report_with(&format!(
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.x\"\nabove = 1\n{u} = 1"
        )),
    ];
    out.extend(reports.into_iter().map(|r| ("config/reports.toml", r)));
    for source in [
        "kind = \"file\", path = \"config/sample/warehouse-17.json\"",
        "kind = \"http\", url = \"http://h.example/d\"",
        "kind = \"sql\", url_env = \"DB\", query = \"config/q.sql\"",
    ] {
        let r = format!(
            "[[report]]\nid = \"s\"\ntitle = \"S\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"UTC\"\n\
             template = \"daily_ops\"\nsource = {{ {source}, {u} = 1 }}\n"
        );
        out.push(("config/reports.toml", r));
    }
    for rows in [
        "kind = \"csv\", path = \"config/rows.csv\"",
        "kind = \"json\", path = \"config/rows.json\"",
        "kind = \"sql\", url_env = \"DB\", query = \"config/q.sql\"",
    ] {
        for (rows_extra, family_extra) in [(format!(", {u} = 1"), ""), (String::new(), u)] {
            let family_key = match family_extra {
                "" => String::new(),
                k => format!("{k} = 1\n"),
            };
            let f = format!(
                "[[family]]\nid = \"f-{{{{row.id}}}}\"\nrows = {{ {rows}{rows_extra} }}\n\
                 title = \"F\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"UTC\"\n\
                 template = \"daily_ops\"\n\
                 source = {{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }}\n{family_key}"
            );
            out.push(("config/reports.toml", f));
        }
    }
    out.push(("config/reports.toml", format!("{u} = 1\n")));
    out.push(("config/calendars/c.toml", format!("{u} = 1\n")));
    out.push((
        "config/calendars/c.toml",
        format!("[[holiday]]\ndate = \"2026-12-25\"\nname = \"X\"\n{u} = 1\n"),
    ));
    out.push(("config/retention.toml", format!("{u} = 1\n")));
    let retention = keys_read("config/retention.toml", &format!("{u} = 1\n"));
    for t in retention {
        out.push(("config/retention.toml", format!("[{t}]\n{u} = 1\n")));
        out.push((
            "config/retention.toml",
            format!("[[{t}]]\nreport = \"probe\"\n{u} = 1\n"),
        ));
    }
    out
}

/// Whether the reference documents `key`: in backticks (`key`, `[key]`, `[[key]]`), or as a
/// key or table of a TOML example (`key = …`, `{ kind = …, key = … }`, `[[key]]`).
fn documented(reference: &str, key: &str) -> bool {
    let quoted = [
        format!("`{key}`"),
        format!("`[{key}]`"),
        format!("`[[{key}]]`"),
        format!("`{key} ="),
    ];
    let assigned = [format!("{{ {key} ="), format!(", {key} =")];
    let table = [format!("[{key}]"), format!("[[{key}]]"), format!("{key} =")];
    quoted.iter().any(|q| reference.contains(q.as_str()))
        || (reference.lines()).any(|l| {
            let l = l.trim_start().trim_start_matches(['#', ' ']);
            table.iter().any(|t| l.starts_with(t.as_str()))
                || assigned.iter().any(|a| l.contains(a.as_str()))
        })
}

#[test]
fn every_key_the_loader_reads_is_in_the_configuration_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference: String = (REFERENCE.iter())
        .map(|f| std::fs::read_to_string(root.join(f)).expect("reference page"))
        .collect();
    // A family's `rows` is read before its rows' reports, which list the report's keys.
    let mut keys = BTreeSet::from(["rows".to_string()]);
    for (file, text) in probes() {
        keys.extend(keys_read(file, &text));
    }
    for expected in [
        "id", "schedule", "email", "webhook", "owners", "url_env", "weekdays",
    ] {
        assert!(
            keys.contains(expected),
            "the probes read {expected}: {keys:?}"
        );
    }
    let missing: Vec<&String> = keys.iter().filter(|k| !documented(&reference, k)).collect();
    assert!(
        missing.is_empty(),
        "keys the loader reads that {REFERENCE:?} do not document: {missing:?}"
    );
}
