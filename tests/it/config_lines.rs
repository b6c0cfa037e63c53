//! Every configuration error names the line of the field it is about, in each file the loader
//! reads: settings, reports, a calendar and the retention policy.

use dawnpost::config::Config;

use crate::common::{Project, report};

/// The loader's errors about `field`, as a person reads them.
fn said(p: &Project, field: &str) -> Vec<String> {
    let Err(errors) = Config::load(&p.config_dir(), &dawnpost::delivery::readers()) else {
        panic!("the configuration should be refused");
    };
    (errors.0.iter())
        .filter(|e| e.field == field)
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_bad_field_of_a_report_names_its_line() {
    let reports = format!(
        "{}{}\nemail = [\"not an address\"]\n",
        report("first", "0 30 6 * * *", "UTC"),
        report("second", "0 30 6 * * *", "UTC").replace("email = [\"ops@example.com\"]\n", "")
    );
    let p = Project::new(&reports);
    let line = 1 + reports
        .lines()
        .position(|l| l.contains("not an address"))
        .expect("the bad line");
    let said = said(&p, "email[0]");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains(&format!(
            "reports.toml: line {line}: report \"second\": email[0]:"
        )),
        "{said:?}"
    );
}

#[test]
fn a_bad_nested_field_names_its_line() {
    let reports = report("nested", "0 30 6 * * *", "UTC")
        + "[[report.webhook]]\nurl = \"https://h.example/a\"\n\
           [[report.webhook]]\nurl = \"ftp://h.example/b\"\n";
    let p = Project::new(&reports);
    let line = 1 + reports
        .lines()
        .position(|l| l.contains("ftp:"))
        .expect("line");
    let said = said(&p, "webhook[1].url");
    assert!(
        said.iter().any(|s| s.contains(&format!("line {line}: "))),
        "{said:?}"
    );
}

#[test]
fn a_bad_setting_names_its_line() {
    let p = Project::new(&report("r", "0 30 6 * * *", "UTC"));
    let settings = "[database]\nmax_connections = 4\n\n[pool]\nconcurrency = 4\nlease = \"soon\"\n";
    p.write("config/dawnpost.toml", settings);
    let said = said(&p, "pool.lease");
    assert!(
        said.iter()
            .any(|s| s.contains("dawnpost.toml: line 6: pool.lease:")),
        "{said:?}"
    );
}

#[test]
fn a_calendars_bad_weekdays_names_its_line() {
    let reports = format!(
        "{}calendar = \"config/calendars/site.toml\"\n",
        report("site", "0 30 6 * * *", "UTC")
    );
    let p = Project::new(&reports);
    p.write(
        "config/calendars/site.toml",
        "# the site's business days\n\nweekdays = \"MON-FUNDAY\"\n",
    );
    let said = said(&p, "weekdays");
    assert!(
        said.iter()
            .any(|s| s.contains("site.toml: line 3: weekdays:")),
        "{said:?}"
    );
}

#[test]
fn a_retention_override_names_its_line() {
    let p = Project::new(&report("r", "0 30 6 * * *", "UTC"));
    p.write(
        "config/retention.toml",
        "artifact = \"7d\"\n\n[[override]]\nreports = \"r*\"\nledger = \"1d\"\n",
    );
    let Err(errors) = Config::load(&p.config_dir(), &dawnpost::delivery::readers()) else {
        panic!("refused");
    };
    let shown: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert!(
        shown
            .iter()
            .any(|s| s.contains("retention.toml: line ") && s.contains("ledger")),
        "{shown:?}"
    );
}

#[test]
fn a_bad_field_of_a_familys_own_table_names_its_line() {
    let reports = "[[family]]\nid = \"f-{{row.id}}\"\nrows = { kind = \"csv\", path = \"config/rows.csv\", sheet = 2 }\n\
                   title = \"F\"\nschedule = \"0 30 6 * * *\"\ntimezone = \"UTC\"\ntemplate = \"daily_ops\"\n\
                   source = { kind = \"file\", path = \"config/sample/warehouse-17.json\" }\n";
    let p = Project::new(reports);
    p.write("config/rows.csv", "id\nw1\n");
    let said = said(&p, "rows.sheet");
    assert!(
        said.iter()
            .any(|s| s.contains("reports.toml: family \"f-{{row.id}}\", line 3: rows.sheet:")),
        "{said:?}"
    );
}
