use serde_json::json;

use super::*;

fn spec(kind: ChartKind, y: &[&str]) -> ChartSpec {
    ChartSpec {
        id: "late_by_hour".into(),
        kind,
        title: "Late orders by hour".into(),
        data: "data.hours".parse().expect("a path"),
        x: "hour".into(),
        y: y.iter().map(|s| s.to_string()).collect(),
        labels: y.iter().map(|s| s.to_string()).collect(),
    }
}

fn hours(n: usize) -> Value {
    let rows: Vec<Value> = (0..n)
        .map(|h| json!({"hour": h, "late": (h * 7) % 11, "shipped": 100 + h * 3}))
        .collect();
    json!({ "hours": rows })
}

/// The width and height a PNG's header gives.
fn size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let word = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    (word(16), word(20))
}

#[test]
fn the_same_data_draws_the_same_bytes_at_twice_the_css_size() {
    for kind in [
        ChartKind::Line,
        ChartKind::Bar,
        ChartKind::StackedBar,
        ChartKind::Area,
    ] {
        let s = spec(kind, &["late", "shipped"]);
        let a = draw(&s, &hours(24)).expect("drawn");
        let b = draw(&s, &hours(24)).expect("drawn");
        assert_eq!(a.png, b.png, "{kind:?}: byte for byte");
        assert_eq!(size(&a.png), (1200, 600));
        assert!(
            a.png.len() > 5_000,
            "{kind:?}: {} bytes is no picture",
            a.png.len()
        );
    }
    let other = draw(&spec(ChartKind::Line, &["late"]), &hours(23)).expect("drawn");
    let one = draw(&spec(ChartKind::Line, &["late"]), &hours(24)).expect("drawn");
    assert_ne!(other.png, one.png, "other data, another picture");
}

#[test]
fn the_alt_text_states_the_series_and_their_latest_values() {
    let d = draw(&spec(ChartKind::Line, &["late", "shipped"]), &hours(24)).expect("drawn");
    assert_eq!(
        d.alt,
        "Late orders by hour: line chart of late and shipped by hour, 24 rows from 0 to 23; latest (23): late 7, shipped 169."
    );
}

#[test]
fn data_with_nothing_to_draw_is_said_so() {
    let s = spec(ChartKind::Bar, &["late"]);
    let empty = draw(&s, &json!({"hours": []})).expect("a panel");
    assert_eq!(empty.alt, "Late orders by hour: no data.");
    assert_eq!(size(&empty.png), (1200, 600));
    let nulls =
        json!({"hours": [{"hour": 1, "late": null}, {"hour": 2}, {"hour": 3, "late": null}]});
    assert_eq!(
        draw(&s, &nulls).expect("a panel").alt,
        "Late orders by hour: no data."
    );
    assert_ne!(empty.png, draw(&s, &hours(3)).expect("drawn").png);
}

#[test]
fn what_is_not_a_chart_fails_naming_the_field() {
    let s = spec(ChartKind::Line, &["late"]);
    let fails = |data: Value| draw(&s, &data).expect_err("refused");
    assert_eq!(fails(json!({})), "data: data.hours is missing");
    assert_eq!(
        fails(json!({"hours": 3})),
        "data: data.hours is not a list of rows"
    );
    assert_eq!(
        fails(json!({"hours": [1]})),
        "data: data.hours[0] is not an object"
    );
    assert_eq!(
        fails(json!({"hours": [{"hour": 1, "late": 2}, {"hour": 2, "late": "n/a"}]})),
        "y: data.hours[1].late is the text \"n/a\", not a number"
    );
    assert_eq!(
        fails(json!({"hours": [{"late": 2}]})),
        "x: data.hours[0] has no \"hour\""
    );
    assert_eq!(
        fails(json!({"hours": [{"hour": 1, "lates": 2}]})),
        "y: no row of data.hours has a field \"late\""
    );
    let bars = draw(&spec(ChartKind::Bar, &["late"]), &hours(101)).expect_err("too many");
    assert!(bars.starts_with("data: 101 rows are more bars"), "{bars}");
}

#[test]
fn hard_data_draws_without_a_panic() {
    let s = spec(ChartKind::Line, &["late", "shipped"]);
    draw(&s, &hours(10_000)).expect("a thinned line");
    draw(&s, &hours(1)).expect("one point");
    let negative = json!({"hours": [{"hour": "a", "late": -5, "shipped": -1e9}, {"hour": "b", "late": 3, "shipped": 2.5}]});
    for kind in [
        ChartKind::Line,
        ChartKind::Bar,
        ChartKind::StackedBar,
        ChartKind::Area,
    ] {
        draw(&spec(kind, &["late", "shipped"]), &negative).expect("negative values");
    }
    let flat = json!({"hours": [{"hour": 1, "late": 0}, {"hour": 2, "late": 0}]});
    draw(&spec(ChartKind::Area, &["late"]), &flat).expect("all zero");
    let gaps = json!({"hours": [{"hour": 1, "late": 1}, {"hour": 2}, {"hour": 3, "late": 4}, {"hour": 4, "late": 2}]});
    draw(&spec(ChartKind::Line, &["late"]), &gaps).expect("gaps");
    let markup = json!({"hours": [{"hour": "<b>&", "late": 1}]});
    let mut titled = spec(ChartKind::Bar, &["late"]);
    titled.title = "Orders <late> & \"lost\"".into();
    draw(&titled, &markup).expect("text with markup is text");
}

/// Writes each kind's picture of the sample hours to `DAWNPOST_CHART_DIR`, to look at.
#[test]
fn pictures_to_look_at() {
    let Some(dir) = std::env::var_os("DAWNPOST_CHART_DIR") else {
        return;
    };
    for (name, kind) in [
        ("line", ChartKind::Line),
        ("bar", ChartKind::Bar),
        ("stacked", ChartKind::StackedBar),
        ("area", ChartKind::Area),
    ] {
        let d = draw(&spec(kind, &["late", "shipped"]), &hours(24)).expect("drawn");
        std::fs::write(
            std::path::Path::new(&dir).join(format!("{name}.png")),
            d.png,
        )
        .expect("write");
    }
}
