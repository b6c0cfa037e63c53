//! Charts drawn from a report's data, end to end: `[[report.chart]]` rendered to PNG once, kept
//! in the job's artifact (listed and verified by `show`), sent inline by `cid:` in a
//! multipart/related part of the email with its message as `alt`, written by `preview`; the
//! pixels read back by Pillow (a decoder dawnpost does not use) where the data says bars and
//! lines are; what is not a chart refused by `check`, naming the report, the chart and the
//! field.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Project, TestLedger, jk, run_date, run_in, text};
use mail_parser::MimeHeaders;

const DATE: &str = "2026-11-30";
const BLUE: [u8; 3] = [0, 114, 178];
const ORANGE: [u8; 3] = [230, 159, 0];
const WHITE: [u8; 3] = [255, 255, 255];

/// A report with a line chart (`flat`: two constant series) and a bar chart (`bars`: 10, 0, 5),
/// placed by its own template.
fn project(data: &str) -> Project {
    let p = Project::new(
        r#"
[[report]]
id = "charted"
title = "Charted"
schedule = "0 30 6 * * *"
timezone = "UTC"
template = "charted"
source = { kind = "file", path = "config/sample/charted.json" }
email = ["ops@example.com"]
[[report.chart]]
id = "flat"
kind = "line"
title = "Two levels"
data = "data.points"
x = "at"
y = ["low", "high"]
[[report.chart]]
id = "bars"
kind = "bar"
title = "Three shifts"
data = "data.shifts"
x = "shift"
y = "late"
"#,
    );
    p.write("config/sample/charted.json", data);
    p.write(
        "templates/charted.html.hbs",
        "<!DOCTYPE html><html lang=\"en\"><head><title>{{report.title}}</title></head><body>\
         <h1>{{report.title}}</h1>{{chart \"flat\"}}<p>Shifts</p>{{chart \"bars\"}}</body></html>",
    );
    p.write(
        "templates/charted.txt.hbs",
        "{{report.title}}\n{{chart \"flat\"}}\n{{chart \"bars\"}}\n",
    );
    p
}

const DATA: &str = r#"{
  "points": [{"at": "a", "low": 2, "high": 8}, {"at": "b", "low": 2, "high": 8},
             {"at": "c", "low": 2, "high": 8}, {"at": "d", "low": 2, "high": 8}],
  "shifts": [{"shift": "Early", "late": 10}, {"shift": "Late", "late": 0}, {"shift": "Night", "late": 5}]
}"#;

/// Pillow's reading of `png`: its size and the colour at each CSS pixel (device pixels are
/// twice as many).
fn pixels(png: &[u8], at: &[(u32, u32)]) -> (Vec<u64>, Vec<[u8; 3]>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("chart.png");
    std::fs::write(&file, png).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/png_pixels.py");
    let points: Vec<String> = at
        .iter()
        .map(|(x, y)| format!("{},{}", x * 2, y * 2))
        .collect();
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&file)
        .args(&points)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["format"], "PNG");
    let size = v["size"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_u64())
        .collect();
    let colours = (v["pixels"].as_array().into_iter().flatten())
        .map(|p| {
            let c: Vec<u8> = p
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_u64())
                .map(|n| n as u8)
                .collect();
            [c[0], c[1], c[2]]
        })
        .collect();
    (size, colours)
}

async fn charts_are_drawn_stored_and_sent_inline(t: &TestLedger) {
    if !common::python::has("PIL") {
        return;
    }
    let p = project(DATA);
    p.write(
        "config/dawnpost.toml",
        "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"file\"\n",
    );
    let summary = run_date(&p.load(), &t.ledger, DATE, Duration::from_secs(60)).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");

    // The artifact keeps each chart as a part, counted in its size and its digest.
    let job = t
        .ledger
        .jobs()
        .get(&jk(&format!("charted:{DATE}")))
        .await
        .expect("job")
        .expect("a job");
    let artifact = job.artifact.expect("an artifact");
    assert_eq!(artifact.parts, ["bars.png", "flat.png"]);
    let store = dawnpost::report::artifact::ArtifactStore::open("file://var/artifacts", p.root())
        .expect("store");
    let stored = store.read_rendered(&artifact).await.expect("read back");
    let (bars, flat) = (&stored.images["bars"], &stored.images["flat"]);
    let total = stored.html.len() + stored.text.len() + bars.len() + flat.len();
    assert_eq!(artifact.bytes as usize, total);

    // The bars: blue where the data puts a bar, white where it puts none.
    let (size, colours) = pixels(bars, &[(150, 200), (324, 200), (497, 200), (497, 120)]);
    assert_eq!(size, [1200, 600]);
    assert_eq!(
        colours,
        [BLUE, WHITE, BLUE, WHITE],
        "10, 0 and 5 against 0 to 10"
    );
    // The lines: the low series solid blue at 2, the high one dashed orange at 8.
    let (_, low) = pixels(flat, &[(300, 211)]);
    assert_eq!(low, [BLUE]);
    let along: Vec<(u32, u32)> = (200..216).map(|x| (x, 64)).collect();
    let (_, high) = pixels(flat, &along);
    assert!(high.contains(&ORANGE), "{high:?}");

    // The email: its HTML and the charts it shows in multipart/related, by Content-ID.
    let outbox = p.root().join("var/outbox");
    let eml = std::fs::read_dir(&outbox)
        .expect("outbox")
        .flatten()
        .next()
        .expect("an email")
        .path();
    let raw = std::fs::read(&eml).expect("read");
    let message = mail_parser::MessageParser::default()
        .parse(&raw)
        .expect("a message");
    let html = message.body_html(0).expect("an HTML part").to_string();
    assert!(html.contains("src=\"cid:chart-flat@dawnpost\""), "{html}");
    assert!(html.contains("width=\"600\" height=\"300\""), "{html}");
    assert!(
        html.contains("alt=\"Three shifts: bar chart of late by shift, 3 rows from Early to Night; latest (Night): late 5.\""),
        "{html}"
    );
    let text = message.body_text(0).expect("a text part").to_string();
    assert!(
        text.contains("Two levels: line chart of low and high by at"),
        "{text}"
    );
    let inline: Vec<(String, Vec<u8>)> = (message.parts.iter())
        .filter(|part| part.content_type().is_some_and(|c| c.ctype() == "image"))
        .map(|part| {
            (
                part.content_id().unwrap_or_default().to_string(),
                part.contents().to_vec(),
            )
        })
        .collect();
    assert_eq!(inline.len(), 2);
    assert!(inline.contains(&("chart-bars@dawnpost".to_string(), bars.clone())));
    assert!(inline.contains(&("chart-flat@dawnpost".to_string(), flat.clone())));
    let raw = String::from_utf8_lossy(&raw);
    assert!(
        raw.contains("multipart/related"),
        "the HTML and its pictures are related"
    );
    assert!(
        !raw.contains("data:image") && !raw.contains("<svg"),
        "no data: URI, no SVG"
    );

    // `show` lists and verifies the charts with the rest.
    let history =
        dawnpost::views::history::JobHistory::load(&t.ledger, &jk(&format!("charted:{DATE}")))
            .await
            .expect("show")
            .expect("a job")
            .render_text();
    assert!(
        history.contains(".bars.png") && history.contains(".flat.png"),
        "{history}"
    );
}

crate::on_both_backends!(charts_are_drawn_stored_and_sent_inline);

#[test]
fn preview_writes_the_same_pictures_at_every_render() {
    let p = project(DATA);
    let once = |out: &str| {
        let o = run_in(
            p.root(),
            &["preview", "charted", "--date", DATE, "--out", out],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        std::fs::read(p.root().join(out).join(format!("charted-{DATE}.bars.png")))
            .expect("the chart")
    };
    assert_eq!(once("first"), once("second"), "byte for byte");
}

#[test]
fn check_draws_every_chart_and_says_its_size() {
    let p = project(DATA);
    let out = run_in(p.root(), &["check"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    for id in ["bars", "flat"] {
        let line =
            format!("report \"charted\": chart \"{id}\" drawn from the sample: a 1200 × 600 PNG, ");
        assert!(said.contains(&line), "{said}");
    }
    assert!(
        !said.contains("WARN"),
        "a drawing the renderer reads without a complaint: {said}"
    );
}

#[test]
fn check_refuses_what_is_not_a_chart_naming_report_chart_and_field() {
    let p = project(&DATA.replace("\"late\": 0", "\"late\": \"none\""));
    let out = run_in(p.root(), &["check"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("report \"charted\": template:")
            && said.contains(
                "chart \"bars\": y: data.shifts[1].late is the text \"none\", not a number"
            ),
        "{said}"
    );
    let p = project(&DATA.replace("\"shifts\"", "\"shift_rows\""));
    let said = text(&run_in(p.root(), &["check"]));
    assert!(
        said.contains("chart \"bars\": data: data.shifts is missing"),
        "{said}"
    );
}
