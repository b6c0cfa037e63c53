//! Charts drawn from a report's data, with no browser: each `[[report.chart]]` is read from the
//! data (`table.rs`), drawn as SVG (`svg.rs`) and rasterised to a PNG by resvg at twice its
//! 600 × 300 CSS pixels, with the font shipped inside the binary (DejaVu Sans,
//! `assets/fonts/`): the same data gives the same PNG bytes on every node and at every render.
//! What is not a chart — a missing path, a value that is not a number, more bars than fit —
//! fails naming the chart and the field; data with nothing to draw is drawn as a "No data"
//! panel, and said so in the picture's text.

mod svg;
mod table;

use std::sync::LazyLock;

use serde_json::Value;

use crate::config::{ChartKind, ChartSpec};

pub use svg::{HEIGHT, WIDTH};

/// The font every chart's text is drawn with.
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// How many device pixels a CSS pixel is: sharp on a high-density screen.
pub const DENSITY: f32 = 2.0;

/// One chart, drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// The picture: a PNG of 1200 × 600 pixels, shown at 600 × 300.
    pub png: Vec<u8>,
    /// What the picture says, for a reader who cannot see it: its title, the series and their
    /// latest values.
    pub alt: String,
}

/// Draws `spec` from `data` (the source's JSON). An error says which field, in words; the
/// caller names the report and the chart.
pub fn draw(spec: &ChartSpec, data: &Value) -> Result<Drawn, String> {
    let table = table::read(spec, data)?;
    if matches!(spec.kind, ChartKind::Bar | ChartKind::StackedBar) && table.x.len() > svg::MAX_BARS
    {
        return Err(format!(
            "data: {} rows are more bars than 600 pixels hold (at most {}): draw a line chart or fewer rows",
            table.x.len(),
            svg::MAX_BARS
        ));
    }
    let picture = match table.is_empty() {
        true => svg::no_data(&spec.title, "No data"),
        false => svg::chart(spec.kind, &spec.title, &table),
    };
    Ok(Drawn {
        png: raster(&picture)?,
        alt: alt(spec, &table),
    })
}

/// The chart's message in words: `Late orders by hour: line chart of late and shipped by
/// hour, 24 rows from 0 to 23; latest (23): late 7, shipped 612.`
pub fn alt(spec: &ChartSpec, table: &table::Table) -> String {
    let Some((at, values)) = table.latest() else {
        return format!("{}: no data.", spec.title);
    };
    let series = spec.labels.join(" and ");
    let (first, last) = (
        table.x.first().map_or("", String::as_str),
        table.x.last().map_or("", String::as_str),
    );
    let latest: Vec<String> = (values.iter())
        .map(|(name, v)| format!("{name} {}", v.map_or("no value".to_string(), number)))
        .collect();
    format!(
        "{}: {} of {series} by {}, {} rows from {first} to {last}; latest ({at}): {}.",
        spec.title,
        spec.kind.words(),
        spec.x,
        table.x.len(),
        latest.join(", ")
    )
}

/// A value in words: an integer with its thousands grouped, else as it is.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let text = format!("{}", v.abs() as i64);
        let mut out = String::new();
        for (k, c) in text.chars().enumerate() {
            if k > 0 && (text.len() - k) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 { format!("-{out}") } else { out }
    } else {
        format!("{v}")
    }
}

/// Parsing options with the shipped font and nothing else: no system font, no file read.
static OPTIONS: LazyLock<resvg::usvg::Options<'static>> = LazyLock::new(|| {
    let mut options = resvg::usvg::Options {
        font_family: "DejaVu Sans".into(),
        ..Default::default()
    };
    options.fontdb_mut().load_font_data(FONT.to_vec());
    options
});

/// The PNG of `svg`, at [`DENSITY`].
fn raster(svg: &str) -> Result<Vec<u8>, String> {
    let tree = resvg::usvg::Tree::from_str(svg, &OPTIONS)
        .map_err(|e| format!("the chart's drawing does not parse: {e}"))?;
    let (w, h) = (WIDTH as f32 * DENSITY, HEIGHT as f32 * DENSITY);
    let mut pixmap = resvg::tiny_skia::Pixmap::new(w as u32, h as u32)
        .ok_or_else(|| "no room for the chart's pixels".to_string())?;
    let scale = resvg::tiny_skia::Transform::from_scale(DENSITY, DENSITY);
    resvg::render(&tree, scale, &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| format!("the chart's PNG cannot be written: {e}"))
}

#[cfg(test)]
mod tests;
