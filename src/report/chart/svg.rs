//! A chart drawn as SVG, 600 × 300 CSS pixels: its title, a legend, a y axis of round steps
//! with grid lines (and the zero line when values go below it), up to eight x labels, and the
//! series. Colours are the Okabe–Ito palette ordered so that neighbours differ in lightness
//! (they stay apart in grayscale and for colour-blind readers); lines also differ by dash and
//! bars by lightness. A line of more points than the chart has pixels is thinned to each pixel
//! column's lowest and highest value, so no peak is lost.

use std::fmt::Write as _;

use super::table::Table;
use crate::config::ChartKind;

pub const WIDTH: f64 = 600.0;
pub const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 64.0;
const BOTTOM: f64 = 40.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// The series' colours, in order.
pub const COLORS: [&str; 8] = [
    "#0072B2", "#E69F00", "#000000", "#56B4E9", "#D55E00", "#009E73", "#CC79A7", "#999999",
];
/// The series' dashes (lines), in order.
const DASHES: [&str; 4] = ["", "7 4", "2 3", "9 3 2 3"];
/// The most bars a chart draws (600 pixels hold no more, readably).
pub const MAX_BARS: usize = 100;
/// Past this many points, a line is thinned to its extremes per pixel column.
const MAX_POINTS: usize = 1200;
const TEXT: &str = "font-family=\"DejaVu Sans\" fill=\"#222\"";

/// The SVG of `table` drawn as `kind` under `title`.
pub fn chart(kind: ChartKind, title: &str, table: &Table) -> String {
    let mut s = open(title);
    let scale = Scale::of(kind, table);
    legend(&mut s, kind, table);
    axes(&mut s, &scale, kind, table);
    match kind {
        ChartKind::Line => lines(&mut s, &scale, table, false),
        ChartKind::Area => lines(&mut s, &scale, table, true),
        ChartKind::Bar => bars(&mut s, &scale, table, false),
        ChartKind::StackedBar => bars(&mut s, &scale, table, true),
    }
    s.push_str("</svg>");
    s
}

/// A panel that says there is nothing to draw, under `title`.
pub fn no_data(title: &str, why: &str) -> String {
    let mut s = open(title);
    let _ = write!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"#f4f4f4\" stroke=\"#bbb\"/>\
         <text x=\"{}\" y=\"{}\" font-size=\"16\" text-anchor=\"middle\" {TEXT}>{}</text>",
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H / 2.0 + 6.0,
        escape(why)
    );
    s.push_str("</svg>");
    s
}

fn open(title: &str) -> String {
    let mut s = String::with_capacity(8 * 1024);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\">\
         <rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#ffffff\"/>\
         <text x=\"12\" y=\"26\" font-size=\"17\" {TEXT}>{}</text>",
        escape(&cut(title, 60))
    );
    s
}

/// The y axis: from `lo` to `hi` in steps of `step`, each a round number.
struct Scale {
    lo: f64,
    hi: f64,
    step: f64,
}

impl Scale {
    fn of(kind: ChartKind, table: &Table) -> Scale {
        let (mut lo, mut hi) = (0.0_f64, 0.0_f64);
        let values = |i: usize| table.series.iter().filter_map(move |(_, v)| v[i]);
        for i in 0..table.x.len() {
            if kind == ChartKind::StackedBar {
                hi = hi.max(values(i).filter(|v| *v > 0.0).sum());
                lo = lo.min(values(i).filter(|v| *v < 0.0).sum());
            } else {
                values(i).for_each(|v| (lo, hi) = (lo.min(v), hi.max(v)));
            }
        }
        if (hi - lo).abs() < f64::EPSILON {
            hi = lo + 1.0;
        }
        let step = nice((hi - lo) / 5.0);
        Scale {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            step,
        }
    }

    fn y(&self, v: f64) -> f64 {
        TOP + PLOT_H * (self.hi - v) / (self.hi - self.lo)
    }

    /// Where bars stand: zero, or the axis's end nearest it.
    fn base(&self) -> f64 {
        self.y(0.0_f64.clamp(self.lo, self.hi))
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 {
        raw
    } else {
        1.0
    };
    let power = 10f64.powf(raw.log10().floor());
    let m = raw / power;
    let f = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    f * power
}

fn legend(s: &mut String, kind: ChartKind, table: &Table) {
    let mut x = 12.0;
    for (k, (name, _)) in table.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        match kind {
            ChartKind::Line | ChartKind::Area => {
                let _ = write!(
                    s,
                    "<line x1=\"{x}\" y1=\"44\" x2=\"{}\" y2=\"44\" stroke=\"{color}\" stroke-width=\"3\"{}/>",
                    x + 22.0,
                    dash(k)
                );
            }
            _ => {
                let _ = write!(
                    s,
                    "<rect x=\"{x}\" y=\"38\" width=\"14\" height=\"12\" fill=\"{color}\"/>"
                );
            }
        }
        let name = cut(name, 24);
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"48\" font-size=\"12\" {TEXT}>{}</text>",
            x + 28.0,
            escape(&name)
        );
        // DejaVu Sans at 12 px averages about 7 px a character.
        x += 40.0 + 7.0 * name.chars().count() as f64;
    }
}

fn axes(s: &mut String, scale: &Scale, kind: ChartKind, table: &Table) {
    let steps = ((scale.hi - scale.lo) / scale.step).round() as usize;
    for k in 0..=steps {
        let v = scale.lo + scale.step * k as f64;
        let y = scale.y(v);
        let stroke = if v.abs() < scale.step / 1e6 && scale.lo < 0.0 {
            "#555"
        } else {
            "#e2e2e2"
        };
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{y:.2}\" x2=\"{}\" y2=\"{y:.2}\" stroke=\"{stroke}\" stroke-width=\"1\"/>\
             <text x=\"{}\" y=\"{:.2}\" font-size=\"11\" text-anchor=\"end\" {TEXT}>{}</text>",
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0,
            tick(v, scale.step)
        );
    }
    let bottom = TOP + PLOT_H;
    let _ = write!(
        s,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#555\"/>",
        LEFT + PLOT_W
    );
    let n = table.x.len();
    let every = n.div_ceil(8).max(1);
    for i in (0..n).step_by(every) {
        let _ = write!(
            s,
            "<text x=\"{:.2}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" {TEXT}>{}</text>",
            x_of(kind, i, n),
            bottom + 18.0,
            escape(&cut(&table.x[i], 14))
        );
    }
}

/// Where row `i` of `n` sits: a point's x, or the middle of a bar's band.
fn x_of(kind: ChartKind, i: usize, n: usize) -> f64 {
    match kind {
        ChartKind::Bar | ChartKind::StackedBar => LEFT + PLOT_W * (i as f64 + 0.5) / n as f64,
        _ if n <= 1 => LEFT + PLOT_W / 2.0,
        _ => LEFT + PLOT_W * i as f64 / (n - 1) as f64,
    }
}

fn lines(s: &mut String, scale: &Scale, table: &Table, area: bool) {
    let n = table.x.len();
    for (k, (_, values)) in table.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let kept = thinned(values);
        // Runs of points between gaps.
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        let mut last = None;
        for i in kept {
            let Some(v) = values[i] else {
                continue;
            };
            if last.is_some_and(|l: usize| (l + 1..i).any(|j| values[j].is_none())) {
                runs.push(Vec::new());
            }
            if let Some(run) = runs.last_mut() {
                run.push((x_of(ChartKind::Line, i, n), scale.y(v)));
            }
            last = Some(i);
        }
        let shown: usize = runs.iter().map(Vec::len).sum();
        for run in runs.iter().filter(|r| !r.is_empty()) {
            if area && run.len() > 1 {
                let base = scale.base();
                let mut d = format!("M{:.2} {base:.2}", run[0].0);
                run.iter().for_each(|(x, y)| {
                    let _ = write!(d, " L{x:.2} {y:.2}");
                });
                let _ = write!(d, " L{:.2} {base:.2} Z", run[run.len() - 1].0);
                let _ = write!(
                    s,
                    "<path d=\"{d}\" fill=\"{color}\" fill-opacity=\"0.28\"/>"
                );
            }
            if run.len() > 1 {
                let mut d = String::new();
                for (j, (x, y)) in run.iter().enumerate() {
                    let _ = write!(d, "{}{x:.2} {y:.2}", if j == 0 { "M" } else { " L" });
                }
                let _ = write!(
                    s,
                    "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2.5\" stroke-linejoin=\"round\"{}/>",
                    dash(k)
                );
            }
            // Points are marked when few, and a point alone always.
            if shown <= 40 || run.len() == 1 {
                for (x, y) in run {
                    let _ = write!(
                        s,
                        "<circle cx=\"{x:.2}\" cy=\"{y:.2}\" r=\"3.5\" fill=\"{color}\" stroke=\"#fff\" stroke-width=\"1\"/>"
                    );
                }
            }
        }
    }
}

/// The rows a line draws: all, or past [`MAX_POINTS`] each pixel column's lowest and highest.
fn thinned(values: &[Option<f64>]) -> Vec<usize> {
    let n = values.len();
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let columns = MAX_POINTS / 2;
    let mut kept = Vec::with_capacity(MAX_POINTS);
    for c in 0..columns {
        let (from, to) = (c * n / columns, (c + 1) * n / columns);
        let column = (from..to).filter(|&i| values[i].is_some());
        let by = |i: &usize| values[*i].unwrap_or(0.0);
        let low = column.clone().min_by(|a, b| by(a).total_cmp(&by(b)));
        let high = column.max_by(|a, b| by(a).total_cmp(&by(b)));
        match (low, high) {
            (Some(l), Some(h)) if l == h => kept.push(l),
            (Some(l), Some(h)) => kept.extend([l.min(h), l.max(h)]),
            // A column with no value keeps one gap.
            _ => kept.push(from),
        }
    }
    kept
}

fn bars(s: &mut String, scale: &Scale, table: &Table, stacked: bool) {
    let n = table.x.len().max(1);
    let band = PLOT_W / n as f64;
    let series = table.series.len().max(1);
    let width = if stacked {
        band * 0.7
    } else {
        band * 0.8 / series as f64
    };
    for i in 0..table.x.len() {
        let (mut up, mut down) = (0.0, 0.0);
        for (k, (_, values)) in table.series.iter().enumerate() {
            let Some(v) = values[i] else {
                continue;
            };
            let (from, to, x) = match stacked {
                true if v >= 0.0 => {
                    up += v;
                    (up - v, up, LEFT + band * i as f64 + band * 0.15)
                }
                true => {
                    down += v;
                    (down - v, down, LEFT + band * i as f64 + band * 0.15)
                }
                false => (
                    0.0,
                    v,
                    LEFT + band * i as f64 + band * 0.1 + width * k as f64,
                ),
            };
            let (y0, y1) = (scale.y(from.max(to)), scale.y(from.min(to)));
            if y1 - y0 < 0.01 {
                // A zero draws nothing (and a rect of no height is no rect).
                continue;
            }
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"{y0:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\"/>",
                (width - 0.5).max(0.5),
                y1 - y0,
                COLORS[k % COLORS.len()]
            );
        }
    }
}

fn dash(k: usize) -> String {
    match DASHES[k % DASHES.len()] {
        "" => String::new(),
        d => format!(" stroke-dasharray=\"{d}\""),
    }
}

/// A tick's label: grouped thousands, as many decimals as the step needs.
fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    let text = format!(
        "{:.*}",
        decimals,
        if v.abs() < step / 1e6 { 0.0 } else { v }
    );
    let (sign, digits) = text
        .strip_prefix('-')
        .map_or(("", text.as_str()), |d| ("−", d));
    let (whole, fraction) = digits
        .split_once('.')
        .map_or((digits, None), |(w, f)| (w, Some(f)));
    let mut grouped = String::new();
    for (k, c) in whole.chars().enumerate() {
        if k > 0 && (whole.len() - k) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match fraction {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// At most `max` characters, an ellipsis ending one that was cut.
fn cut(s: &str, max: usize) -> String {
    match s.chars().count() > max {
        true => format!("{}…", s.chars().take(max - 1).collect::<String>()),
        false => s.to_string(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round_and_ticks_read_as_numbers() {
        assert_eq!(nice(0.7), 1.0);
        assert_eq!(nice(1.3), 2.0);
        assert_eq!(nice(33.0), 50.0);
        assert_eq!(nice(1800.0), 2000.0);
        assert_eq!(tick(12_000.0, 2000.0), "12,000");
        assert_eq!(tick(-1500.0, 500.0), "−1,500");
        assert_eq!(tick(0.25, 0.05), "0.25");
        assert_eq!(tick(-0.0000001, 0.5), "0.0");
    }

    #[test]
    fn a_long_line_keeps_every_peak() {
        let mut values: Vec<Option<f64>> = (0..10_000).map(|i| Some((i % 7) as f64)).collect();
        values[5_003] = Some(1_000.0);
        values[7_777] = Some(-50.0);
        let kept = thinned(&values);
        assert!(kept.len() <= MAX_POINTS, "{}", kept.len());
        assert!(kept.contains(&5_003) && kept.contains(&7_777));
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "in order");
    }
}
