//! `check`'s part of rendering: every report's template against its sample data.

use std::collections::HashMap;

use chrono::NaiveDate;
use serde_json::{Value, json};

use super::{RenderError, Rendered, Templates, context, human_size};
use crate::config::{Config, ConfigError, Report};

/// How many rows of each `[[family]]` `check` renders (they share one template).
pub(crate) const FAMILY_ROWS_CHECKED: usize = 3;

/// What a report's destinations make of its sample's render: why it cannot be sent to them
/// (errors), and a warning per limit it passes (the destination kinds say; `check` hands them
/// in).
pub(crate) type SizeCheck<'a> =
    &'a dyn Fn(&Report, &Rendered, &Config) -> (Vec<String>, Vec<String>);

/// What `check` found of the templates: errors (file, report and field `template`), warnings,
/// and notes (each chart drawn from a sample, and its size).
pub type Checked = (Vec<ConfigError>, Vec<String>, Vec<String>);

/// What `check` adds to loading the configuration: every report's template rendered against
/// its sample data, each template loaded once, and what `sizes` says of each render.
/// `defaults` names the parts the kinds a report sends to make themselves.
pub fn check_templates(
    config: &Config,
    sizes: SizeCheck<'_>,
    defaults: &dyn Fn(&Report) -> Vec<super::DefaultPart>,
) -> Checked {
    let mut loaded: HashMap<&str, Result<Templates, RenderError>> = HashMap::new();
    let (mut errors, mut warnings, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let mut checked_rows: HashMap<&str, usize> = HashMap::new();
    for report in &config.reports {
        if let Some(family) = &report.family {
            // A family's rows share its template: its first rows stand for the rest.
            let n = checked_rows.entry(family.family.as_str()).or_default();
            *n += 1;
            if *n > FAMILY_ROWS_CHECKED {
                continue;
            }
        }
        let templates = loaded.entry(report.template.as_str()).or_insert_with(|| {
            Templates::load(&config.root, &report.template, &config.template_parts)
        });
        let checked = match templates {
            Ok(t) => check_report(t, report, config, (sizes, &defaults(report)))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let about = |said: String| {
            let (file, id) = (report.file.display(), report.id.as_str());
            format!("{file}: report {id:?}: {said}")
        };
        match checked {
            Ok((said, drawn)) => {
                warnings.extend(said.into_iter().map(about));
                notes.extend(drawn.into_iter().map(about));
            }
            Err(message) => errors.push(ConfigError {
                file: report.file.clone(),
                row: report.family.as_ref().map(|f| f.origin()),
                report: Some(report.id.to_string()),
                field: "template".into(),
                message,
            }),
        }
    }
    (errors, warnings, notes)
}

/// Renders a report's template against its sample data; the warnings (no sample to render
/// strictly against, or a rendering too large for its destinations) and the notes (each
/// chart drawn, and its size).
fn check_report(
    templates: &mut Templates,
    report: &Report,
    config: &Config,
    (sizes, defaults): (SizeCheck<'_>, &[super::DefaultPart]),
) -> Result<(Vec<String>, Vec<String>), RenderError> {
    let sample = (report.sample.clone())
        .or_else(|| report.source.sample().map(std::path::Path::to_path_buf));
    let date = NaiveDate::from_ymd_opt(2026, 1, 15).unwrap_or_default();
    let window = crate::report::schedule::window_of(report, date).ok_or(RenderError::NoWindow)?;
    let generated_at = window.end;
    // A link of the length a real one has: what is sent is measured as it will be.
    let report_url = (config.settings.server.public_url.as_ref()).map(|base| {
        let base = base.as_str().trim_end_matches('/');
        format!("{base}/r/{}:{date}?s={}", report.id, "0".repeat(64))
    });
    let url = report_url.as_deref();
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
            let rendered = templates
                .render(
                    context(report, (date, generated_at), &window, data, (false, url)),
                    &super::Extras {
                        defaults,
                        charts: &report.charts,
                        xlsx: report.attach.xlsx,
                    },
                )
                .map_err(|e| RenderError::AgainstSample {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
            let (refused, warned) = sizes(report, &rendered, config);
            if !refused.is_empty() {
                return Err(RenderError::Unsendable(refused.join("; ")));
            }
            let drawn = (rendered.images.iter())
                .map(|(id, png)| {
                    format!(
                        "chart {id:?} drawn from the sample: a {} × {} PNG, {}",
                        crate::report::chart::WIDTH * f64::from(crate::report::chart::DENSITY),
                        crate::report::chart::HEIGHT * f64::from(crate::report::chart::DENSITY),
                        human_size(png.len())
                    )
                })
                .collect();
            Ok((warned, drawn))
        }
        None => {
            templates
                .render_lenient(context(
                    report,
                    (date, generated_at),
                    &window,
                    json!({}),
                    (false, url),
                ))
                .map_err(|e| RenderError::Lenient(Box::new(e)))?;
            Ok((vec![
                "no sample data (set `sample = \"…json\"`): fields were not checked, only helpers and partials".into(),
            ], Vec::new()))
        }
    }
}

/// A rendering's parts and their sizes in words: `html 12.3 KB, text 4.1 KB, csv 2 KB`; and
/// their total, in bytes.
pub(crate) fn part_sizes(rendered: &Rendered) -> (String, u64) {
    let parts =
        rendered.html.len() + rendered.text.len() + rendered.csv.as_ref().map_or(0, String::len);
    let sizes = format!(
        "html {}, text {}{}",
        human_size(rendered.html.len()),
        human_size(rendered.text.len()),
        rendered
            .csv
            .as_ref()
            .map_or(String::new(), |c| format!(", csv {}", human_size(c.len())))
    );
    (sizes, u64::try_from(parts).unwrap_or(u64::MAX))
}
