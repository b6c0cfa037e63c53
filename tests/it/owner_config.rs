//! The owners' keys in the configuration (`deliver_by`, `owners`, `owner_webhook`): deadlines
//! are local times on the fire's date, bad keys are named, a family's owners come from its rows,
//! and the shipped example's commented keys load. The notices themselves are in `owners.rs`.

use chrono::{DateTime, Utc};
use dawnpost::config::Config;

use crate::common::{Project, at};
use crate::owners::owned_report;

/// `deliver_by` is a local time on the fire's date (its next date when the fire is at or after
/// it); a time a DST gap swallows is the gap's end; a calendar's moved fire is due on the day
/// it fires and keeps its key; a skipped one is not expected.
#[test]
fn deadlines_are_local_on_the_fires_date() {
    let p = Project::new(
        &(report_in("berlin", "0 30 6 * * *", "Europe/Berlin", "08:00", "")
            + &report_in("gap", "0 0 1 * * *", "Europe/Berlin", "02:30", "")
            + &report_in("night", "0 0 23 * * *", "UTC", "08:00", "")
            + &report_in(
                "moved",
                "0 30 6 * * *",
                "UTC",
                "08:00",
                "calendar = \"config/cal.toml\"\non_holiday = \"next_business_day\"",
            )
            + &report_in(
                "skipped",
                "0 30 6 * * *",
                "UTC",
                "08:00",
                "calendar = \"config/cal.toml\"",
            )),
    );
    p.write(
        "config/cal.toml",
        "weekdays = \"MON-FRI\"\n[[holiday]]\ndate = \"2026-12-25\"\nname = \"Christmas Day\"\n",
    );
    let config = p.load();
    let expected = |id: &str, now: DateTime<Utc>| -> Vec<(String, DateTime<Utc>)> {
        let r = config.reports.iter().filter(|r| r.id.as_str() == id);
        dawnpost::delivery::notice::expected(r, now)
            .into_iter()
            .map(|e| (e.key.to_string(), e.deadline))
            .collect()
    };
    // 08:00 CEST on the day the clocks went forward: 06:00 UTC.
    let on_dst_day = expected("berlin", at(2026, 3, 29, 6, 0));
    assert_eq!(
        on_dst_day.last(),
        Some(&("berlin:2026-03-29".to_string(), at(2026, 3, 29, 6, 0)))
    );
    // 02:30 does not exist in Berlin on 2026-03-29: due at 03:00 CEST, 01:00 UTC.
    let gap = expected("gap", at(2026, 3, 29, 1, 0));
    assert_eq!(
        gap.last(),
        Some(&("gap:2026-03-29".to_string(), at(2026, 3, 29, 1, 0)))
    );
    // Fired at 23:00: due at 08:00 the next morning.
    let night = expected("night", at(2026, 11, 30, 8, 0));
    assert_eq!(
        night.last(),
        Some(&("night:2026-11-29".to_string(), at(2026, 11, 30, 8, 0)))
    );
    // Christmas (a Friday) and the weekend after it moved to Monday 28th 06:30: each due then
    // at 08:00, under its own key.
    let moved = expected("moved", at(2026, 12, 28, 8, 0));
    for key in [
        "moved:2026-12-25",
        "moved:2026-12-26",
        "moved:2026-12-27",
        "moved:2026-12-28",
    ] {
        assert!(
            moved.contains(&(key.to_string(), at(2026, 12, 28, 8, 0))),
            "{key}: {moved:?}"
        );
    }
    let skipped = expected("skipped", at(2026, 12, 26, 7, 59));
    assert_eq!(
        skipped.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["skipped:2026-12-24"]
    );
}

fn report_in(id: &str, schedule: &str, tz: &str, deliver_by: &str, extra: &str) -> String {
    owned_report(id, schedule, deliver_by, extra)
        .replace("timezone = \"UTC\"", &format!("timezone = \"{tz}\""))
}

/// Bad owners' keys are refused naming the file, the report and the field.
#[test]
fn bad_owner_keys_are_named() {
    let p = Project::new(
        r#"
[[report]]
id = "wh"
title = "Report wh"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
deliver_by = "8am"
owners = ["lead@example.com", "not an address", "lead@example.com"]
owner_webhook = { url = "ftp://owners.example/hook" }
"#,
    );
    let errors = match Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
        Ok(_) => panic!("refused"),
        Err(e) => e.to_string(),
    };
    for said in [
        "report \"wh\": deliver_by: \"8am\" is not a local time HH:MM",
        "report \"wh\": owners[1]: \"not an address\" is not an email address",
        "report \"wh\": owners[2]: \"lead@example.com\" is listed twice",
        "report \"wh\": owner_webhook.url: \"ftp://owners.example/hook\": scheme \"ftp\" is not http or https",
    ] {
        assert!(errors.contains(said), "{said} in {errors}");
    }
    assert!(errors.contains("reports.toml"), "{errors}");
}

/// A family's owners come from its rows; a row with an empty owner column has none.
#[test]
fn a_familys_owners_come_from_its_rows() {
    let p = Project::new(
        r#"
[[family]]
id = "w-{{row.id}}"
rows = { kind = "csv", path = "config/w.csv" }
title = "W {{row.id}}"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
email = ["ops@example.com"]
deliver_by = "{{row.due}}"
owners = ["{{row.lead}}"]
"#,
    );
    p.write(
        "config/w.csv",
        "id,due,lead\n1,08:00,lead-1@example.com\n2,09:30,\n",
    );
    let config = p.load();
    let owners: Vec<(String, String, usize)> = config
        .reports
        .iter()
        .map(|r| {
            let by = r
                .owners
                .deliver_by
                .map(|t| t.format("%H:%M").to_string())
                .unwrap_or_default();
            (
                r.id.to_string(),
                by,
                r.owners
                    .destinations
                    .to(dawnpost::delivery::email::KIND)
                    .len(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("w-1".to_string(), "08:00".to_string(), 1),
            ("w-2".to_string(), "09:30".to_string(), 0)
        ]
    );
}

/// The shipped family's commented owners' keys are valid once uncommented.
#[test]
fn the_shipped_owner_keys_load_uncommented() {
    let dir = crate::common::shipped_copy();
    let path = dir.path().join("config/reports.toml");
    let text = std::fs::read_to_string(&path).expect("read");
    let mut uncommented = text.clone();
    for key in ["deliver_by", "owners", "owner_webhook"] {
        uncommented = uncommented.replacen(&format!("# {key} = "), &format!("{key} = "), 1);
    }
    assert_ne!(uncommented, text);
    std::fs::write(&path, uncommented).expect("write");
    let config = Config::load(&dir.path().join("config"), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let w17 = config.report("warehouse-17").expect("warehouse-17");
    assert_eq!(
        w17.owners.deliver_by.map(|t| t.to_string()),
        Some("08:00:00".to_string())
    );
    assert_eq!(
        w17.owners
            .destinations
            .to(dawnpost::delivery::email::KIND)
            .len(),
        1
    );
    assert_eq!(
        w17.owners
            .destinations
            .to(dawnpost::delivery::webhook::KIND)
            .len(),
        1
    );
    // harbor-east's row has no lead: no owner by email, the webhook still.
    let harbor = config.report("harbor-east").expect("harbor-east");
    assert!(
        harbor
            .owners
            .destinations
            .to(dawnpost::delivery::email::KIND)
            .is_empty()
    );
    assert!(harbor.owners.notified());
    assert!(harbor.calendar.is_some() && w17.calendar.is_none());
}
