//! `dawnpost preview`: what one report would send for one date, written to files and nothing
//! else — the source fetched, the template rendered (CSS inlined, attachments), the email built
//! as the pool builds it (same Message-ID, headers and parts), but no job, no artifact, no send.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};

use crate::config::{Config, Report};
use crate::report::render::{RenderError, Rendered, Templates, human_size};
use crate::report::schedule::Fire;
use crate::report::source::SourceError;

/// What stopped a preview; each names the report (and the file where there is one).
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error("no report {0:?} in the configuration")]
    NoReport(String),
    #[error("report {report}: {date} has no window in its timezone")]
    NoWindow { report: String, date: NaiveDate },
    #[error("report {report}: {source}")]
    Source { report: String, source: SourceError },
    #[error("report {report}: {source}")]
    Render { report: String, source: RenderError },
    #[error("report {report}: {reason}")]
    Message { report: String, reason: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files a preview wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewFiles {
    pub html: PathBuf,
    pub text: PathBuf,
    pub csv: Option<PathBuf>,
    /// The message one destination of each kind that has one would get (the report's first
    /// recipient's `.eml`).
    pub messages: Vec<PathBuf>,
    /// How large each part is, and what that means for the report's destinations.
    pub sizes: PartSizes,
    /// What a person should know before this goes out: a destination's limit the report passes.
    pub warnings: Vec<String>,
}

/// The sizes of what a report sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartSizes {
    pub html: usize,
    pub text: usize,
    pub csv: Option<usize>,
    /// What each kind the report sends to would send, in words (`email 12.3 KB encoded`).
    pub destinations: Vec<String>,
}

impl PartSizes {
    /// One line: each part's size.
    pub fn summary(&self) -> String {
        let mut parts = vec![
            format!("html {}", human_size(self.html)),
            format!("text {}", human_size(self.text)),
        ];
        parts.extend(self.csv.map(|n| format!("csv {}", human_size(n))));
        parts.extend(self.destinations.iter().cloned());
        format!("sizes: {}", parts.join(", "))
    }
}

impl PreviewFiles {
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.html), Some(&self.text), self.csv.as_ref()]
            .into_iter()
            .flatten()
            .chain(&self.messages)
            .map(PathBuf::as_path)
    }
}

/// Renders `report_id` for `date` (default: today in its timezone, as `run --once`) at `now`
/// and writes `REPORT-DATE.html`, `.txt`, `.csv` (when it attaches one), `.eml`, each chart as
/// `.<chart>.png` and each named part as `.<part>.json` into `out`.
pub async fn preview(
    config: &Config,
    report_id: &str,
    date: Option<NaiveDate>,
    out: &Path,
    now: DateTime<Utc>,
) -> Result<PreviewFiles, PreviewError> {
    let report = config
        .reports
        .iter()
        .find(|r| r.id.as_str() == report_id)
        .ok_or_else(|| PreviewError::NoReport(report_id.to_string()))?;
    let name = report.id.to_string();
    let date = date.unwrap_or_else(|| now.with_timezone(&report.timezone()).date_naive());
    let fire = Fire::for_date(report, date).ok_or_else(|| PreviewError::NoWindow {
        report: name.clone(),
        date,
    })?;
    // Generated at the fire's instant, as its job would be (near it), not at `now`: two
    // previews of one date write the same bytes (a spreadsheet's creation time among them).
    let rendered = render(config, report, &fire, fire.fire_at).await?;
    let stem = format!("{name}-{}", crate::domain::keys::IsoDate(date));
    let write = |ext: &str, bytes: &[u8]| -> Result<PathBuf, PreviewError> {
        let path = out.join(format!("{stem}.{ext}"));
        std::fs::write(&path, bytes).map_err(|source| PreviewError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    std::fs::create_dir_all(out).map_err(|source| PreviewError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let shown = crate::delivery::destination::Shown {
        report,
        job: &fire.key,
        rendered: &rendered,
        config,
        now,
    };
    let previews = crate::delivery::previews(&shown).map_err(|reason| PreviewError::Message {
        report: report.id.to_string(),
        reason,
    })?;
    let mut messages = Vec::new();
    for (_, p) in &previews {
        if let Some((ext, bytes)) = &p.file {
            messages.push(write(ext, bytes)?);
        }
    }
    // The spreadsheet, when the report attaches one.
    if let Some(xlsx) = &rendered.xlsx {
        messages.push(write("xlsx", xlsx)?);
    }
    // Each chart as the email carries it.
    for (id, png) in &rendered.images {
        messages.push(write(&format!("{id}.png"), png)?);
    }
    // Each named part as the artifact would hold it, unless its kind wrote the message it
    // would send under that name (a chat message in its envelope, or in its bounded form).
    for (name, body) in &rendered.parts {
        let ext = format!("{name}.json");
        if !previews
            .iter()
            .any(|(_, p)| p.file.as_ref().is_some_and(|(e, _)| *e == ext))
        {
            messages.push(write(&ext, body.as_bytes())?);
        }
    }
    let sizes = PartSizes {
        html: rendered.html.len(),
        text: rendered.text.len(),
        csv: rendered.csv.as_ref().map(String::len),
        destinations: previews.iter().map(|(_, p)| p.size.clone()).collect(),
    };
    Ok(PreviewFiles {
        html: write("html", rendered.html.as_bytes())?,
        text: write("txt", rendered.text.as_bytes())?,
        csv: match &rendered.csv {
            Some(csv) => Some(write("csv", csv.as_bytes())?),
            None => None,
        },
        messages,
        sizes,
        warnings: previews.into_iter().flat_map(|(_, p)| p.warnings).collect(),
    })
}

/// Fetches the source within the job's bound and renders, as a work item does.
async fn render(
    config: &Config,
    report: &Report,
    fire: &Fire,
    now: DateTime<Utc>,
) -> Result<Rendered, PreviewError> {
    let name = report.id.to_string();
    let templates = Templates::load(&config.root, &report.template, &config.template_parts)
        .map_err(|source| PreviewError::Render {
            report: name.clone(),
            source,
        })?;
    let http =
        crate::report::source::http_client(config.settings.tls.ca.as_deref()).map_err(|e| {
            PreviewError::Source {
                report: name.clone(),
                source: SourceError::Transient(e.to_string()),
            }
        })?;
    let links = crate::delivery::links::Links::from_settings(&config.settings.server);
    let kit = RenderKit {
        templates: &templates,
        http: &http,
        // The bound of a work item: its lease.
        deadline: config.settings.pool.lease.as_std(),
        links: links.ok().flatten(),
    };
    render_with(&kit, report, fire, now).await
}

/// What a render outside the pool needs beside the report: its templates, an HTTP client for
/// its source, the bound of its fetch and where its link points.
pub(super) struct RenderKit<'a> {
    pub(super) templates: &'a Templates,
    pub(super) http: &'a reqwest::Client,
    pub(super) deadline: std::time::Duration,
    pub(super) links: Option<crate::delivery::links::Links>,
}

/// Fetches `report`'s source for `fire`'s window and renders it with `kit`, as a work item does.
pub(super) async fn render_with(
    kit: &RenderKit<'_>,
    report: &Report,
    fire: &Fire,
    now: DateTime<Utc>,
) -> Result<Rendered, PreviewError> {
    let name = report.id.to_string();
    let data = crate::report::source::fetch_within(
        &report.source,
        &fire.window,
        kit.http,
        kit.deadline,
        report.source_limit,
    )
    .await
    .map_err(|source| PreviewError::Source {
        report: name.clone(),
        source,
    })?;
    let report_url = kit.links.as_ref().map(|l| l.report(&fire.key));
    let when = (fire.key.date(), now);
    let context = crate::report::render::context(
        report,
        when,
        &fire.window,
        data,
        (false, report_url.as_deref()),
    );
    let defaults = crate::delivery::default_parts(report);
    let extras = crate::report::render::Extras {
        defaults: &defaults,
        charts: &report.charts,
        xlsx: report.attach.xlsx,
    };
    kit.templates
        .render(context, &extras)
        .map_err(|source| PreviewError::Render {
            report: name,
            source,
        })
}
