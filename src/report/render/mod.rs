//! Rendering: handlebars in strict mode, an HTML part (escaped) and a plain-text part.
//!
//! Registration only catches syntax errors; unknown helpers, unknown partials and missing fields
//! fail at render time. So `check` renders every report's template against its sample data
//! ([`check_templates`]); other commands only load what they use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use handlebars::Handlebars;
use serde_json::{Value, json};

use crate::config::Report;
use crate::domain::window::{Window, rfc3339};

mod charts;
mod check;
mod csv;
mod email_html;
mod helpers;
mod xlsx;

pub use charts::{chart_url, cids_replaced, content_id};
pub use check::check_templates;
pub(crate) use check::{FAMILY_ROWS_CHECKED, part_sizes};
pub use helpers::grouped;

/// The parts of one report template, each in its own registry: HTML escaping for the HTML
/// part, none for the text part, CSV field quoting for the CSV part.
#[derive(Debug)]
pub struct Templates {
    name: String,
    html: Handlebars<'static>,
    text: Handlebars<'static>,
    /// `<name>.csv.hbs`, escaping each value as a CSV field.
    csv: Option<Handlebars<'static>>,
    /// `<name>.<part>.hbs` of each part a kind declares that the template has, escaping each
    /// value as JSON string content; what it renders must be JSON.
    parts: Vec<(String, Handlebars<'static>)>,
}

/// A part a destination kind makes itself when a report's template has none of its own: the
/// part's name, and how it is made from the template context (what fails says why, in words).
pub type DefaultPart = (&'static str, fn(&Value) -> Result<String, String>);

/// What a report adds to its template's render: the parts the kinds it sends to make
/// themselves (when the template has none of theirs), and its charts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    pub defaults: &'a [DefaultPart],
    pub charts: &'a [crate::config::ChartSpec],
    /// Whether the CSV part is made a spreadsheet too (`attach` names `xlsx`).
    pub xlsx: bool,
}

/// What went wrong loading or rendering a template.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A template that does not parse: the file, where, and handlebars' reason.
    #[error("{}{at}: {reason}", path.display())]
    Syntax {
        path: PathBuf,
        at: String,
        reason: String,
    },
    /// A render failed: a missing field, an unknown helper or partial. The text names the
    /// part, the line and the column.
    #[error("{part}{at}: {reason}")]
    Render {
        part: String,
        at: String,
        reason: String,
    },
    #[error("cannot read sample {path}: {source}")]
    SampleRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("sample {path} is not valid JSON: {source}")]
    Sample {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("does not render against sample {path}: {source}")]
    AgainstSample {
        path: PathBuf,
        source: Box<RenderError>,
    },
    /// The rendered HTML cannot be sent: its CSS does not parse, or an image has no alt text.
    #[error("{part}: {reason}")]
    Html {
        part: String,
        reason: email_html::HtmlError,
    },
    #[error("does not render: {0}")]
    Lenient(Box<RenderError>),
    #[error("no window for the sample date")]
    NoWindow,
    /// The sample renders, but not to what a destination of the report takes.
    #[error("the sample's render cannot be sent: {0}")]
    Unsendable(String),
}

/// The rendered parts of one job: the email's HTML (CSS inlined) and text, the CSV
/// attachment when the report's template has one (`<name>.csv.hbs`), the named parts a
/// destination kind sends (a chat message: `<name>.<part>.hbs`, JSON), by name, the report's
/// charts (PNG), by chart id, and its spreadsheet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    pub html: String,
    pub text: String,
    pub csv: Option<String>,
    pub parts: BTreeMap<String, String>,
    pub images: BTreeMap<String, Vec<u8>>,
    /// The CSV part as a spreadsheet, when the report attaches one (`attach`).
    pub xlsx: Option<Vec<u8>>,
}

impl Templates {
    /// Loads `templates/<name>.html.hbs`, `templates/<name>.txt.hbs`, `templates/<name>.csv.hbs`
    /// when it exists (the report then attaches its data as CSV), `templates/<name>.<part>.hbs`
    /// for each of `parts` that exists, and any partials in `templates/partials/*.hbs`.
    pub fn load(root: &Path, name: &str, parts: &[&str]) -> Result<Templates, RenderError> {
        let dir = root.join("templates");
        let mut html = strict_registry();
        let mut text = strict_registry();
        text.register_escape_fn(handlebars::no_escape);
        html.register_helper("chart", Box::new(charts::Chart { html: true }));
        text.register_helper("chart", Box::new(charts::Chart { html: false }));
        for (registry, ext) in [(&mut html, "html.hbs"), (&mut text, "txt.hbs")] {
            let path = dir.join(format!("{name}.{ext}"));
            registry
                .register_template_string(name, read(&path)?)
                .map_err(|e| syntax(&path, e))?;
        }
        let csv_path = dir.join(format!("{name}.csv.hbs"));
        let csv = match std::fs::metadata(&csv_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            _ => {
                let mut registry = escaping_registry(csv::escape);
                registry
                    .register_template_string(name, read(&csv_path)?)
                    .map_err(|e| syntax(&csv_path, e))?;
                Some(registry)
            }
        };
        let mut templates = Templates {
            name: name.to_string(),
            html,
            text,
            csv,
            parts: load_parts(&dir, name, parts)?,
        };
        for (stem, path, source) in partials(&dir)? {
            for registry in templates.registries() {
                registry
                    .register_partial(&stem, source.clone())
                    .map_err(|e| syntax(&path, e))?;
            }
        }
        Ok(templates)
    }

    /// Every part's registry: HTML, text, and CSV when there is one.
    fn registries(&mut self) -> impl Iterator<Item = &mut Handlebars<'static>> {
        [
            Some(&mut self.html),
            Some(&mut self.text),
            self.csv.as_mut(),
        ]
        .into_iter()
        .flatten()
        .chain(self.parts.iter_mut().map(|(_, r)| r))
    }

    /// Renders every part; a missing field is an error that names it. The HTML part then has
    /// its `<style>` rules inlined on each element (the block is kept for clients that read it)
    /// and every image must carry alt text. The context is taken as it is, for all the parts:
    /// handlebars' `render` would copy it into a value of its own for each.
    ///
    /// `extras`: the report's charts, drawn first (the templates place them), and the parts
    /// the kinds it sends to make themselves from the context when the template has no
    /// `<name>.<part>.hbs` of theirs.
    pub fn render(&self, mut context: Value, extras: &Extras<'_>) -> Result<Rendered, RenderError> {
        let images = charts::draw_all(extras.charts, &mut context)?;
        let context = handlebars::Context::from(context);
        let part = |ext: &str, e: handlebars::RenderError| RenderError::Render {
            part: format!("{}.{ext}", self.name),
            at: position(e.line_no.zip(e.column_no)),
            reason: render_reason(&e),
        };
        let html = self
            .html
            .render_with_context(&self.name, &context)
            .map_err(|e| part("html.hbs", e))?;
        let html = email_html::prepare(&html).map_err(|reason| RenderError::Html {
            part: format!("{}.html.hbs", self.name),
            reason,
        })?;
        let text = self
            .text
            .render_with_context(&self.name, &context)
            .map_err(|e| part("txt.hbs", e))?;
        let csv = match &self.csv {
            Some(registry) => Some(
                registry
                    .render_with_context(&self.name, &context)
                    .map_err(|e| part("csv.hbs", e))?,
            ),
            None => None,
        };
        let xlsx =
            match (&csv, extras.xlsx) {
                (Some(csv), true) => Some(spreadsheet(csv, context.data()).map_err(|reason| {
                    RenderError::Render {
                        part: format!("{}.csv.hbs as a spreadsheet", self.name),
                        at: String::new(),
                        reason,
                    }
                })?),
                _ => None,
            };
        let mut parts = BTreeMap::new();
        for (name, registry) in &self.parts {
            let ext = format!("{name}.hbs");
            let json =
                (registry.render_with_context(&self.name, &context)).map_err(|e| part(&ext, e))?;
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&json) {
                return Err(RenderError::Render {
                    part: format!("{}.{ext}", self.name),
                    at: position(Some((e.line(), e.column()))),
                    reason: format!("does not render to JSON: {e}"),
                });
            }
            parts.insert(name.clone(), json);
        }
        for (name, make) in extras.defaults {
            if parts.contains_key(*name) {
                continue;
            }
            let made = make(context.data()).map_err(|reason| RenderError::Render {
                part: format!("the default {name} message"),
                at: String::new(),
                reason,
            })?;
            parts.insert((*name).to_string(), made);
        }
        Ok(Rendered {
            html,
            text,
            csv,
            parts,
            images,
            xlsx,
        })
    }

    /// Renders without strict mode: used when no sample data exists, to still catch unknown
    /// helpers and partials.
    pub(super) fn render_lenient(&mut self, context: Value) -> Result<Rendered, RenderError> {
        self.registries().for_each(|r| r.set_strict_mode(false));
        let result = self.render(context, &Extras::default());
        self.registries().for_each(|r| r.set_strict_mode(true));
        result
    }
}

/// The spreadsheet of the rendered `csv`, titled and dated as `context` says.
fn spreadsheet(csv: &str, context: &Value) -> Result<Vec<u8>, String> {
    let title = context["report"]["title"].as_str().unwrap_or_default();
    let tz = (context["report"]["timezone"].as_str())
        .and_then(|z| z.parse::<chrono_tz::Tz>().ok())
        .unwrap_or(chrono_tz::UTC);
    let generated_at = (context["generated_at"].as_str())
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(DateTime::<Utc>::UNIX_EPOCH, |t| t.with_timezone(&Utc));
    xlsx::workbook(csv, title, tz, generated_at)
}

/// The partials in `templates/partials/*.hbs`, by file stem, in name order.
fn partials(dir: &Path) -> Result<Vec<(String, PathBuf, String)>, RenderError> {
    let Ok(entries) = std::fs::read_dir(dir.join("partials")) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "hbs"))
    {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let source = read(&path)?;
        out.push((stem.to_string(), path, source));
    }
    Ok(out)
}

/// The registries of `templates/<name>.<part>.hbs` for each of `parts` that exists.
fn load_parts(
    dir: &Path,
    name: &str,
    parts: &[&str],
) -> Result<Vec<(String, Handlebars<'static>)>, RenderError> {
    let mut out = Vec::new();
    for part in parts {
        let path = dir.join(format!("{name}.{part}.hbs"));
        if !path.is_file() {
            continue;
        }
        let mut registry = escaping_registry(json_escape);
        registry
            .register_template_string(name, read(&path)?)
            .map_err(|e| syntax(&path, e))?;
        out.push((part.to_string(), registry));
    }
    Ok(out)
}

/// A value as the content of a JSON string: quotes, backslashes and control characters
/// escaped, so a template writes `"text": "{{title}}"` whatever the title holds.
fn json_escape(s: &str) -> String {
    let quoted = serde_json::Value::String(s.to_string()).to_string();
    let inner = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
    inner.unwrap_or(&quoted).to_string()
}

/// A strict registry whose values, and what its formatting helpers print, are escaped by
/// `escape` (a CSV field, a JSON string's content).
fn escaping_registry(escape: fn(&str) -> String) -> Handlebars<'static> {
    let mut registry = strict_registry();
    registry.register_escape_fn(escape);
    registry.register_helper("local_time", helpers::local_time(escape));
    registry.register_helper("number", helpers::number(escape));
    registry
}

fn strict_registry() -> Handlebars<'static> {
    let mut h = Handlebars::new();
    h.set_strict_mode(true);
    h.register_helper("local_time", helpers::local_time(str::to_string));
    h.register_helper("number", helpers::number(str::to_string));
    h
}

fn read(path: &Path) -> Result<String, RenderError> {
    std::fs::read_to_string(path).map_err(|source| RenderError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn syntax(path: &Path, e: handlebars::TemplateError) -> RenderError {
    RenderError::Syntax {
        path: path.to_path_buf(),
        at: position(e.pos()),
        reason: e.reason().to_string(),
    }
}

/// ` line L, column C`, or nothing when handlebars does not say.
fn position(at: Option<(usize, usize)>) -> String {
    at.map_or(String::new(), |(line, column)| {
        format!(" line {line}, column {column}")
    })
}

/// Why a render failed, in words: a missing field by its path (handlebars' own text prints an
/// `Option`'s debug form), anything else as handlebars says it.
fn render_reason(e: &handlebars::RenderError) -> String {
    use handlebars::RenderErrorReason as R;
    match e.reason() {
        R::MissingVariable(Some(path)) => {
            format!(
                "no field {path} in the data (templates are strict: a missing field is an error)"
            )
        }
        R::MissingVariable(None) => {
            "a field is missing from the data (templates are strict)".to_string()
        }
        other => other.to_string(),
    }
}

/// The template context (docs/guide/templates.md): `stale` when the job rendered at its
/// deadline without its data ready (`ready_when`, `on_late = "send"`); `figures`, the report's
/// key figures with their values (null where the data has none); `report_url`, the signed link
/// to the job's report when `[server] public_url` is set; `row`, a `[[family]]` report's row.
pub fn context(
    report: &Report,
    (date, generated_at): (NaiveDate, DateTime<Utc>),
    window: &Window,
    data: Value,
    (stale, report_url): (bool, Option<&str>),
) -> Value {
    let figures: Vec<Value> = (report.figures.iter())
        .map(|f| json!({ "label": f.label, "path": f.path.to_string(), "value": f.path.resolve(&data) }))
        .collect();
    let mut context = json!({
        "report": { "id": report.id.as_str(), "title": report.title, "timezone": report.timezone().name() },
        "date": crate::domain::keys::IsoDate(date).to_string(),
        "window": window_context(report, window),
        "generated_at": rfc3339(generated_at),
        "stale": stale,
        "figures": figures,
    });
    if let Value::Object(c) = &mut context {
        // Moved in, not written into `json!`, which would copy the whole source through
        // serialization.
        c.insert("data".into(), data);
        if let Some(url) = report_url {
            c.insert("report_url".into(), Value::String(url.to_string()));
        }
        if let Some(family) = &report.family {
            c.insert("row".into(), Value::Object(family.values.clone()));
        }
    }
    context
}

/// `window` in a template: its bounds (RFC 3339), its local dates (`first` and `last`, ISO),
/// how many local days it covers, its period and how a reader names it (`week 49, 2026`).
fn window_context(report: &Report, window: &Window) -> Value {
    let (first, end) = window.local_dates(report.timezone());
    json!({
        "start": rfc3339(window.start),
        "end": rfc3339(window.end),
        "first": first.to_string(),
        "last": end.pred_opt().unwrap_or(end).to_string(),
        "days": (end - first).num_days(),
        "period": report.period.name(),
        "label": report.period.label(first, end),
    })
}

/// Gmail shows only the start of a message whose HTML is larger than this (its "clipping").
/// The artifact's part holding a `send_when = "alert"` job's headline ("Alert: late 23 > 20"),
/// a JSON string: emails lead their subject with it, chat messages their title.
pub const ALERT_PART: &str = "alert";

pub(crate) const GMAIL_CLIP_BYTES: usize = 102_000;

/// A size for a person: `812 B`, `101.6 KiB`, `24.9 MiB`.
pub fn human_size(n: usize) -> String {
    #[allow(clippy::cast_precision_loss)] // a size shown to one decimal
    let x = n as f64;
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", x / 1024.0),
        _ => format!("{:.1} MiB", x / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A template folder with the HTML and text parts and a `probe` part, `part`.
    fn templates(part: &str) -> (tempfile::TempDir, Templates) {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("templates");
        std::fs::create_dir_all(&dir).expect("templates");
        for (file, text) in [
            ("t.html.hbs", "<p>{{title}}</p>"),
            ("t.txt.hbs", "{{title}}"),
            ("t.probe.hbs", part),
            ("t.unasked.hbs", "not JSON, and never rendered"),
        ] {
            std::fs::write(dir.join(file), text).expect("template");
        }
        let t = Templates::load(root.path(), "t", &["probe", "absent"]).expect("load");
        (root, t)
    }

    /// A declared part renders to JSON, its values escaped as JSON strings; a part no kind
    /// declares, or one the template does not have, is not rendered.
    #[test]
    fn a_declared_part_renders_json_with_its_values_escaped() {
        let (_root, t) = templates(r#"{"text": "{{title}} — {{number n}}"}"#);
        let title = "Late \"north\" dock\nC:\\ops <b>";
        let rendered = t
            .render(json!({"title": title, "n": 1842}), &Extras::default())
            .expect("render");
        assert_eq!(rendered.parts.keys().collect::<Vec<_>>(), ["probe"]);
        let message: Value = serde_json::from_str(&rendered.parts["probe"]).expect("JSON");
        assert_eq!(message["text"], format!("{title} — 1,842"));
    }

    /// A part that does not render to JSON fails the render, naming its template and where.
    #[test]
    fn a_part_that_is_not_json_fails_naming_its_template() {
        let (_root, t) = templates(r#"{"text": {{n}}"#);
        let e = t
            .render(json!({"title": "x", "n": 1}), &Extras::default())
            .expect_err("not JSON");
        let said = e.to_string();
        assert!(said.starts_with("t.probe.hbs line 1, column "), "{said}");
        assert!(said.contains("does not render to JSON"), "{said}");
    }
}
