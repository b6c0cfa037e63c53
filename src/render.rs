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
    h.register_helper("local_time", Box::new(local_time));
    h.register_helper("number", Box::new(number));
    h
}

/// `{{local_time INSTANT}}`: an RFC 3339 instant in the report's timezone with its offset
/// (`2026-11-28 00:00 CET (UTC+01:00)`); `format="%H:%M"` picks a chrono format instead.
fn local_time(
    h: &handlebars::Helper<'_>,
    _: &Handlebars<'_>,
    ctx: &handlebars::Context,
    _: &mut handlebars::RenderContext<'_, '_>,
    out: &mut dyn handlebars::Output,
) -> handlebars::HelperResult {
    let other = |m: String| handlebars::RenderErrorReason::Other(m);
    let instant = param(h, "local_time")?
        .as_str()
        .ok_or_else(|| other("local_time needs an RFC 3339 instant".into()))?;
    let t = DateTime::parse_from_rfc3339(instant).map_err(|e| {
        other(format!(
            "local_time: {instant:?} is not an RFC 3339 instant: {e}"
        ))
    })?;
    let zone = ctx
        .data()
        .pointer("/report/timezone")
        .and_then(|v| v.as_str())
        .unwrap_or("UTC");
    let tz: chrono_tz::Tz = zone
        .parse()
        .map_err(|_| other(format!("local_time: {zone:?} is not a timezone")))?;
    let format = h
        .hash_get("format")
        .and_then(|v| v.value().as_str())
        .unwrap_or("%Y-%m-%d %H:%M %Z (UTC%:z)");
    let mut shown = String::new();
    std::fmt::Write::write_fmt(
        &mut shown,
        format_args!("{}", t.with_timezone(&tz).format(format)),
    )
    .map_err(|_| other(format!("local_time: {format:?} is not a time format")))?;
    out.write(&shown)?;
    Ok(())
}

/// `{{number X}}`: a number with thousands separators (`1,842`); `decimals=N` rounds to N
/// places (`98.8`).
fn number(
    h: &handlebars::Helper<'_>,
    _: &Handlebars<'_>,
    _: &handlebars::Context,
    _: &mut handlebars::RenderContext<'_, '_>,
    out: &mut dyn handlebars::Output,
) -> handlebars::HelperResult {
    let value = param(h, "number")?
        .as_f64()
        .ok_or_else(|| handlebars::RenderErrorReason::Other("number needs a number".into()))?;
    let decimals = h
        .hash_get("decimals")
        .and_then(|v| v.value().as_u64())
        .unwrap_or(0)
        .min(6) as usize;
    out.write(&grouped(value, decimals))?;
    Ok(())
}

/// A helper's first parameter; a missing field is refused naming it, as strict mode does.
fn param<'a>(
    h: &'a handlebars::Helper<'_>,
    helper: &str,
) -> Result<&'a Value, handlebars::RenderErrorReason> {
    let p = h.param(0).ok_or_else(|| {
        handlebars::RenderErrorReason::Other(format!("{helper} needs a parameter"))
    })?;
    if p.is_value_missing() || p.value().is_null() {
        return Err(handlebars::RenderErrorReason::MissingVariable(
            p.relative_path().cloned(),
        ));
    }
    Ok(p.value())
}

/// `value` to `decimals` places with a comma every three digits of its integer part.
pub fn grouped(value: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, value.abs());
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if value < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn render(template: &str, tz: &str, data: Value) -> String {
        let mut h = strict_registry();
        h.register_template_string("t", template).expect("template");
        let ctx = json!({ "report": { "timezone": tz }, "data": data });
        h.render("t", &ctx)
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn local_time_shows_the_reports_zone_and_offset_across_dst() {
        let t = "{{local_time data.at}}";
        let winter = json!({ "at": "2026-11-28T23:00:00Z" });
        assert_eq!(
            render(t, "Europe/Berlin", winter),
            "2026-11-29 00:00 CET (UTC+01:00)"
        );
        let summer = json!({ "at": "2026-07-01T22:00:00Z" });
        assert_eq!(
            render(t, "Europe/Berlin", summer),
            "2026-07-02 00:00 CEST (UTC+02:00)"
        );
        let sydney = json!({ "at": "2026-11-28T13:00:00Z" });
        assert_eq!(
            render(t, "Australia/Sydney", sydney),
            "2026-11-29 00:00 AEDT (UTC+11:00)"
        );
        let custom = render(
            "{{local_time data.at format=\"%H:%M\"}}",
            "Europe/Berlin",
            json!({ "at": "2026-11-28T05:30:00Z" }),
        );
        assert_eq!(custom, "06:30");
        let bad = render(t, "Europe/Berlin", json!({ "at": "yesterday" }));
        assert!(
            bad.starts_with("error:") && bad.contains("not an RFC 3339 instant"),
            "{bad}"
        );
    }

    #[test]
    fn numbers_are_grouped_and_rounded() {
        assert_eq!(grouped(1842.0, 0), "1,842");
        assert_eq!(grouped(1_234_567.0, 0), "1,234,567");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(98.76, 1), "98.8");
        assert_eq!(grouped(-12_345.5, 1), "-12,345.5");
        assert_eq!(grouped(-0.01, 1), "0.0");
        assert_eq!(
            render("{{number data.n}}", "UTC", json!({ "n": 6210 })),
            "6,210"
        );
        let missing = render("{{number data.n}}", "UTC", json!({}));
        assert!(
            missing.starts_with("error:") && missing.contains("data.n"),
            "strict, naming the field: {missing}"
        );
    }
}
