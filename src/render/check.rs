//! `check`'s part of rendering: every report's template against its sample data.

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::{RenderError, Templates, context};
use crate::config::{Config, ConfigError, Report, SourceSpec};
use crate::window::Window;

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
