//! The spreadsheet beside the CSV (`attach`): the CSV part's rows as an XLSX of typed cells,
//! read back by openpyxl (an implementation dawnpost does not use) and compared cell by cell
//! with the CSV; attached beside the CSV or instead of it; the same bytes at every render.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Project, TestLedger, jk, run_date, run_in, text};
use mail_parser::MimeHeaders;
use serde_json::{Value, json};

const DATE: &str = "2026-11-30";

/// A report whose CSV part has text, numbers, a code with leading zeros, a date and an
/// instant, attaching `attach`.
fn project(attach: &str) -> Project {
    let p = Project::new(&format!(
        r#"
[[report]]
id = "sheet"
title = "Shipments"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "sheet"
source = {{ kind = "file", path = "config/sample/sheet.json" }}
email = ["ops@example.com"]
attach = {attach}
"#
    ));
    p.write(
        "config/sample/sheet.json",
        r#"{"rows": [
            {"carrier": "DHL, Express", "parcels": 17, "weight": 2.5, "code": "007", "day": "2026-11-29", "at": "2026-11-29T05:30:00Z"},
            {"carrier": "=cmd", "parcels": -3, "weight": 0, "code": "A1", "day": "2026-11-30", "at": "2026-11-30T23:15:00Z"}
        ]}"#,
    );
    p.write("templates/sheet.html.hbs", "<!DOCTYPE html><html lang=\"en\"><head><title>x</title></head><body><p>{{report.title}}</p></body></html>");
    p.write("templates/sheet.txt.hbs", "{{report.title}}\n");
    p.write(
        "templates/sheet.csv.hbs",
        "carrier,parcels,weight,code,day,at\n{{#each data.rows}}{{this.carrier}},{{this.parcels}},{{this.weight}},{{this.code}},{{this.day}},{{this.at}}\n{{/each}}",
    );
    p.write(
        "config/dawnpost.toml",
        "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"file\"\n",
    );
    p
}

/// openpyxl's reading of `xlsx`.
fn cells(xlsx: &[u8]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sheet.xlsx");
    std::fs::write(&file, xlsx).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/xlsx_cells.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&file)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The attachments of the one email in the outbox: (file name, bytes).
fn attachments(p: &Project) -> Vec<(String, Vec<u8>)> {
    let outbox = p.root().join("var/outbox");
    let eml = std::fs::read_dir(&outbox)
        .expect("outbox")
        .flatten()
        .next()
        .expect("an email")
        .path();
    let raw = std::fs::read(eml).expect("read");
    let message = mail_parser::MessageParser::default()
        .parse(&raw)
        .expect("a message");
    (message.attachments())
        .filter_map(|a| Some((a.attachment_name()?.to_string(), a.contents().to_vec())))
        .collect()
}

async fn the_spreadsheet_has_the_csvs_rows_as_typed_cells(t: &TestLedger) {
    if !common::python::has("openpyxl") {
        return;
    }
    let p = project("[\"csv\", \"xlsx\"]");
    let summary = run_date(&p.load(), &t.ledger, DATE, Duration::from_secs(60)).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let sent = attachments(&p);
    let names: Vec<&str> = sent.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["sheet-2026-11-30.csv", "sheet-2026-11-30.xlsx"]);
    let (csv, xlsx) = (
        String::from_utf8_lossy(&sent[0].1).replace("\r\n", "\n"),
        &sent[1].1,
    );

    // The artifact keeps it, as sent.
    let job = t
        .ledger
        .jobs()
        .get(&jk(&format!("sheet:{DATE}")))
        .await
        .expect("job")
        .expect("a job");
    let artifact = job.artifact.expect("an artifact");
    assert!(
        artifact.parts.contains(&"report.xlsx".to_string()),
        "{:?}",
        artifact.parts
    );
    let store = dawnpost::report::artifact::ArtifactStore::open("file://var/artifacts", p.root())
        .expect("store");
    assert_eq!(
        store
            .read_rendered(&artifact)
            .await
            .expect("read")
            .xlsx
            .as_ref(),
        Some(xlsx)
    );

    // Cell by cell against the CSV: the header in bold, numbers as numbers, a code as text,
    // dates and instants (in Berlin) as dates.
    let read = cells(xlsx);
    assert_eq!(read["title"], "Shipments");
    assert_eq!(read["sheet"], "Report");
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        ["carrier", "parcels", "weight", "code", "day", "at"]
    );
    let header: Vec<Value> = rows[0]
        .iter()
        .map(|h| json!({"type": "text", "value": h}))
        .collect();
    assert_eq!(read["rows"][0], json!(header));
    assert_eq!(read["bold"], json!([true, true, true, true, true, true]));
    let expected = json!([
        [
            {"type": "text", "value": "DHL, Express"}, {"type": "number", "value": 17},
            {"type": "number", "value": 2.5}, {"type": "text", "value": "007"},
            {"type": "datetime", "value": "2026-11-29T00:00:00"},
            {"type": "datetime", "value": "2026-11-29T06:30:00"}
        ],
        [
            {"type": "text", "value": "'=cmd"}, {"type": "number", "value": -3},
            {"type": "number", "value": 0}, {"type": "text", "value": "A1"},
            {"type": "datetime", "value": "2026-11-30T00:00:00"},
            {"type": "datetime", "value": "2026-12-01T00:15:00"}
        ]
    ]);
    assert_eq!(
        read["rows"].as_array().map(|r| r[1..].to_vec()),
        expected.as_array().cloned()
    );
    assert!(
        csv.contains("\"DHL, Express\",17,2.5,007,2026-11-29,2026-11-29T05:30:00Z"),
        "{csv}"
    );
    let widths: Vec<f64> = read["widths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .collect();
    assert!(
        widths[0] >= 12.0 && widths[1] < widths[0],
        "as wide as their content: {widths:?}"
    );
}

crate::on_both_backends!(the_spreadsheet_has_the_csvs_rows_as_typed_cells);

#[test]
fn a_spreadsheet_alone_replaces_the_csv_and_every_render_writes_the_same_bytes() {
    let p = project("[\"xlsx\"]");
    let out = run_in(p.root(), &["run", "--once", "--date", DATE]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let names: Vec<String> = attachments(&p).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["sheet-2026-11-30.xlsx"]);
    let once = |dir: &str| {
        let o = run_in(
            p.root(),
            &["preview", "sheet", "--date", DATE, "--out", dir],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        std::fs::read(p.root().join(dir).join(format!("sheet-{DATE}.xlsx")))
            .expect("the spreadsheet")
    };
    assert_eq!(once("first"), once("second"), "byte for byte");
}
