//! Rendering: handlebars in strict mode, an HTML part (escaped) and a plain-text part.
//!
//! Registration only catches syntax errors; unknown helpers, unknown partials and missing fields
//! fail at render time. So `check` renders every report's template against its sample data.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use handlebars::Handlebars;
use serde_json::{Value, json};

use crate::config::{Report, SourceSpec};
use crate::window::{Window, rfc3339};

/// The two parts of one report template, each in its own registry: HTML escaping is on for the
/// HTML part and off for the text part.
#[derive(Debug)]
pub struct Templates {
    name: String,
    html: Handlebars<'static>,
    text: Handlebars<'static>,
}

/// The rendered parts of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub html: String,
    pub text: String,
}

impl Templates {
    /// Loads `templates/<name>.html.hbs`, `templates/<name>.txt.hbs`, and any partials in
    /// `templates/partials/*.hbs`.
    pub fn load(root: &Path, name: &str) -> Result<Templates, String> {
        let dir = root.join("templates");
        let mut html = strict_registry();
        let mut text = strict_registry();
        text.register_escape_fn(handlebars::no_escape);
        for (registry, ext) in [(&mut html, "html.hbs"), (&mut text, "txt.hbs")] {
            let path = dir.join(format!("{name}.{ext}"));
            let source = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            registry
                .register_template_string(name, source)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("partials")) {
            let mut partials: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            partials.sort();
            for path in partials
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "hbs"))
            {
                let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                let source = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                for registry in [&mut html, &mut text] {
                    registry
                        .register_partial(stem, source.clone())
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
            }
        }
        Ok(Templates {
            name: name.to_string(),
            html,
            text,
        })
    }

    /// Renders both parts; a missing field is an error that names it.
    pub fn render(&self, context: &Value) -> Result<Rendered, String> {
        let html = self
            .html
            .render(&self.name, context)
            .map_err(|e| format!("{}.html.hbs: {}", self.name, describe(&e)))?;
        let text = self
            .text
            .render(&self.name, context)
            .map_err(|e| format!("{}.txt.hbs: {}", self.name, describe(&e)))?;
        Ok(Rendered { html, text })
    }

    /// Renders without strict mode: used when no sample data exists, to still catch unknown
    /// helpers and partials.
    fn render_lenient(&mut self, context: &Value) -> Result<Rendered, String> {
        self.html.set_strict_mode(false);
        self.text.set_strict_mode(false);
        let result = self.render(context);
        self.html.set_strict_mode(true);
        self.text.set_strict_mode(true);
        result
    }
}

fn strict_registry() -> Handlebars<'static> {
    let mut h = Handlebars::new();
    h.set_strict_mode(true);
    h
}

fn describe(e: &handlebars::RenderError) -> String {
    // The error's text already carries the template name, line and column.
    e.to_string()
}

/// The template context (DESIGN §10).
pub fn context(
    report: &Report,
    date: NaiveDate,
    window: &Window,
    data: Value,
    generated_at: DateTime<Utc>,
) -> Value {
    json!({
        "report": { "id": report.id.as_str(), "title": report.title, "timezone": report.timezone().name() },
        "date": date.format("%Y-%m-%d").to_string(),
        "window": { "start": rfc3339(window.start), "end": rfc3339(window.end) },
        "data": data,
        "generated_at": rfc3339(generated_at),
    })
}

/// Renders a report's template against its sample data. `Ok(Some(warning))` when there is no
/// sample to render strictly against.
pub fn check_report(root: &Path, report: &Report) -> Result<Option<String>, String> {
    let mut templates = Templates::load(root, &report.template)?;
    let sample = report.sample.clone().or_else(|| match &report.source {
        SourceSpec::File { path } => Some(path.clone()),
        _ => None,
    });
    let date = NaiveDate::from_ymd_opt(2026, 1, 15).unwrap_or_default();
    let window = Window::previous_local_day(date, report.timezone())
        .ok_or("no window for the sample date")?;
    let generated_at = window.end;
    match sample {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read sample {}: {e}", path.display()))?;
            let data: Value = serde_json::from_str(&text)
                .map_err(|e| format!("sample {} is not valid JSON: {e}", path.display()))?;
            templates
                .render(&context(report, date, &window, data, generated_at))
                .map_err(|e| format!("does not render against sample {}: {e}", path.display()))?;
            Ok(None)
        }
        None => {
            templates
                .render_lenient(&context(report, date, &window, json!({}), generated_at))
                .map_err(|e| format!("does not render: {e}"))?;
            Ok(Some(
                "no sample data (set `sample = \"…json\"`): fields were not checked, only helpers and partials".into(),
            ))
        }
    }
}
