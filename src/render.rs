//! Rendering: handlebars in strict mode, an HTML part (escaped) and a plain-text part.
//!
//! Registration only catches syntax errors; unknown helpers, unknown partials and missing fields
//! fail at render time. So `check` renders every report's template against its sample data
//! ([`check_templates`]); other commands only load what they use.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use handlebars::Handlebars;
use serde_json::{Value, json};

use crate::config::{Config, ConfigError, Report, SourceSpec};
use crate::window::{Window, rfc3339};

/// The two parts of one report template, each in its own registry: HTML escaping is on for the
/// HTML part and off for the text part.
#[derive(Debug)]
pub struct Templates {
    name: String,
    html: Handlebars<'static>,
    text: Handlebars<'static>,
}

/// What went wrong loading or rendering a template.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Syntax {
        path: PathBuf,
        source: Box<handlebars::TemplateError>,
    },
    /// A render failed: a missing field, an unknown helper or partial. The text names the
    /// part, the line and the column.
    #[error("{part}: {source}")]
    Render {
        part: String,
        source: Box<handlebars::RenderError>,
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
    #[error("does not render: {0}")]
    Lenient(Box<RenderError>),
    #[error("no window for the sample date")]
    NoWindow,
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
    pub fn load(root: &Path, name: &str) -> Result<Templates, RenderError> {
        let dir = root.join("templates");
        let mut html = strict_registry();
        let mut text = strict_registry();
        text.register_escape_fn(handlebars::no_escape);
        for (registry, ext) in [(&mut html, "html.hbs"), (&mut text, "txt.hbs")] {
            let path = dir.join(format!("{name}.{ext}"));
            let source = read(&path)?;
            registry
                .register_template_string(name, source)
                .map_err(|e| syntax(&path, e))?;
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
                let source = read(path)?;
                for registry in [&mut html, &mut text] {
                    registry
                        .register_partial(stem, source.clone())
                        .map_err(|e| syntax(path, e))?;
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
    pub fn render(&self, context: &Value) -> Result<Rendered, RenderError> {
        let part = |ext: &str, e| RenderError::Render {
            part: format!("{}.{ext}", self.name),
            source: Box::new(e),
        };
        let html = self
            .html
            .render(&self.name, context)
            .map_err(|e| part("html.hbs", e))?;
        let text = self
            .text
            .render(&self.name, context)
            .map_err(|e| part("txt.hbs", e))?;
        Ok(Rendered { html, text })
    }

    /// Renders without strict mode: used when no sample data exists, to still catch unknown
    /// helpers and partials.
    fn render_lenient(&mut self, context: &Value) -> Result<Rendered, RenderError> {
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

fn read(path: &Path) -> Result<String, RenderError> {
    std::fs::read_to_string(path).map_err(|source| RenderError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn syntax(path: &Path, e: handlebars::TemplateError) -> RenderError {
    RenderError::Syntax {
        path: path.to_path_buf(),
        source: Box::new(e),
    }
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
        "date": crate::keys::IsoDate(date).to_string(),
        "window": { "start": rfc3339(window.start), "end": rfc3339(window.end) },
        "data": data,
        "generated_at": rfc3339(generated_at),
    })
}

/// What `check` adds to loading the configuration: every report's template rendered against
/// its sample data, each template loaded once. Returns the errors (file, report and field
/// `template`) and the warnings.
pub fn check_templates(config: &Config) -> (Vec<ConfigError>, Vec<String>) {
    let mut loaded: HashMap<&str, Result<Templates, RenderError>> = HashMap::new();
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for report in &config.reports {
        let templates = loaded
            .entry(report.template.as_str())
            .or_insert_with(|| Templates::load(&config.root, &report.template));
        let checked = match templates {
            Ok(t) => check_report(t, report).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match checked {
            Ok(None) => {}
            Ok(Some(warning)) => warnings.push(format!(
                "{}: report {:?}: {warning}",
                report.file.display(),
                report.id.as_str()
            )),
            Err(message) => errors.push(ConfigError {
                file: report.file.clone(),
                report: Some(report.id.to_string()),
                field: "template".into(),
                message,
            }),
        }
    }
    (errors, warnings)
}

/// Renders a report's template against its sample data. `Ok(Some(warning))` when there is no
/// sample to render strictly against.
fn check_report(templates: &mut Templates, report: &Report) -> Result<Option<String>, RenderError> {
    let sample = report.sample.clone().or_else(|| match &report.source {
        SourceSpec::File { path } => Some(path.clone()),
        _ => None,
    });
    let date = NaiveDate::from_ymd_opt(2026, 1, 15).unwrap_or_default();
    let window =
        Window::previous_local_day(date, report.timezone()).ok_or(RenderError::NoWindow)?;
    let generated_at = window.end;
    match sample {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|source| RenderError::SampleRead {
                    path: path.clone(),
                    source,
                })?;
            let data: Value =
                serde_json::from_str(&text).map_err(|source| RenderError::Sample {
                    path: path.clone(),
                    source,
                })?;
            templates
                .render(&context(report, date, &window, data, generated_at))
                .map_err(|e| RenderError::AgainstSample {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
            Ok(None)
        }
        None => {
            templates
                .render_lenient(&context(report, date, &window, json!({}), generated_at))
                .map_err(|e| RenderError::Lenient(Box::new(e)))?;
            Ok(Some(
                "no sample data (set `sample = \"…json\"`): fields were not checked, only helpers and partials".into(),
            ))
        }
    }
}
