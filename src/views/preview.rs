//! `dawnpost preview`: what one report would send for one date, written to files and nothing
//! else — the source fetched, the template rendered (CSS inlined, attachments), the email built
//! as the pool builds it (same Message-ID, headers and parts), but no job, no artifact, no send.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};

use crate::config::{Config, Report};
use crate::delivery::email::message::{ListHeaders, build_message, subject};
use crate::domain::keys::DeliveryKey;
use crate::report::render::{GMAIL_CLIP_BYTES, RenderError, Rendered, Templates, human_size};
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
    #[error("report {report}: cannot build the email: {reason}")]
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
    /// The message to the report's first recipient; `None` for a report without email.
    pub eml: Option<PathBuf>,
    /// How large each part is, and what that means for the report's destinations.
    pub sizes: PartSizes,
}

/// The sizes of what a report sends, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSizes {
    pub html: usize,
    pub text: usize,
    pub csv: Option<usize>,
    /// The whole encoded message to one recipient (base64 included); `None` without email.
    pub email: Option<usize>,
    /// The least a webhook body is: its inlined parts, JSON-escaped; `None` without webhooks.
    pub webhook: Option<usize>,
}

impl PartSizes {
    /// One line: each part's size.
    pub fn summary(&self) -> String {
        let mut parts = vec![
            format!("html {}", human_size(self.html)),
            format!("text {}", human_size(self.text)),
        ];
        parts.extend(self.csv.map(|n| format!("csv {}", human_size(n))));
        parts.extend(
            self.email
                .map(|n| format!("email {} encoded", human_size(n))),
        );
        parts.extend(
            self.webhook
                .map(|n| format!("webhook body at least {}", human_size(n))),
        );
        format!("sizes: {}", parts.join(", "))
    }

    /// What a person should know before this goes out: Gmail's clipping, and a destination
    /// whose limit the report passes.
    pub fn warnings(&self, config: &Config) -> Vec<String> {
        let mut out = Vec::new();
        if self.html > GMAIL_CLIP_BYTES {
            out.push(format!(
                "the HTML part ({}) is over Gmail's clipping size (102 KB): Gmail shows its start \
                 and a \"View entire message\" link",
                human_size(self.html)
            ));
        }
        let email_limit = config.settings.email.max_message_bytes;
        if let Some(n) = self
            .email
            .filter(|n| u64::try_from(*n).unwrap_or(u64::MAX) > email_limit)
        {
            out.push(format!(
                "the email ({} encoded) is over [email] max_message_bytes ({}): {}",
                human_size(n),
                crate::config::shown_size(email_limit),
                config.settings.server.too_large_fate("its recipients")
            ));
        }
        let body_limit = config.settings.webhook.max_body_bytes;
        if let Some(n) = self
            .webhook
            .filter(|n| u64::try_from(*n).unwrap_or(u64::MAX) > body_limit)
        {
            out.push(format!(
                "a webhook body (at least {}) is over [webhook] max_body_bytes ({}): {}",
                human_size(n),
                crate::config::shown_size(body_limit),
                config.settings.server.too_large_fate("its webhooks")
            ));
        }
        out
    }
}

impl PreviewFiles {
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        [
            Some(&self.html),
            Some(&self.text),
            self.csv.as_ref(),
            self.eml.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
    }
}

/// Renders `report_id` for `date` (default: today in its timezone, as `run --once`) at `now`
/// and writes `REPORT-DATE.html`, `.txt`, `.csv` (when it attaches one) and `.eml` into `out`.
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
    let rendered = render(config, report, &fire, now).await?;
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
    let message = email(config, report, &fire, &rendered, now)?;
    let sizes = PartSizes {
        html: rendered.html.len(),
        text: rendered.text.len(),
        csv: rendered.csv.as_ref().map(String::len),
        email: message.as_ref().map(Vec::len),
        webhook: (!report.webhooks.is_empty()).then(|| escaped_len(&rendered)),
    };
    let eml = match message {
        Some(message) => Some(write("eml", &message)?),
        None => None,
    };
    Ok(PreviewFiles {
        html: write("html", rendered.html.as_bytes())?,
        text: write("txt", rendered.text.as_bytes())?,
        csv: match &rendered.csv {
            Some(csv) => Some(write("csv", csv.as_bytes())?),
            None => None,
        },
        eml,
        sizes,
    })
}

/// The length of a rendering's parts as a webhook body inlines them (JSON strings).
fn escaped_len(rendered: &Rendered) -> usize {
    let json = |s: &str| serde_json::to_string(s).map_or(s.len(), |j| j.len());
    json(&rendered.html) + json(&rendered.text) + rendered.csv.as_deref().map_or(0, json)
}

/// Fetches the source within the job's bound and renders, as a work item does.
async fn render(
    config: &Config,
    report: &Report,
    fire: &Fire,
    now: DateTime<Utc>,
) -> Result<Rendered, PreviewError> {
    let name = report.id.to_string();
    let templates =
        Templates::load(&config.root, &report.template).map_err(|source| PreviewError::Render {
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
    // The bound of a work item: its lease.
    let deadline = config.settings.pool.lease.as_std();
    let data = crate::report::source::fetch_within(
        &report.source,
        &fire.window,
        &http,
        deadline,
        report.source_limit,
    )
    .await
    .map_err(|source| PreviewError::Source {
        report: name.clone(),
        source,
    })?;
    let context =
        crate::report::render::context(report, (fire.key.date(), now), &fire.window, data, false);
    templates
        .render(context)
        .map_err(|source| PreviewError::Render {
            report: name,
            source,
        })
}

/// The message the pool would send to the report's first recipient, as bytes.
fn email(
    config: &Config,
    report: &Report,
    fire: &Fire,
    rendered: &Rendered,
    now: DateTime<Utc>,
) -> Result<Option<Vec<u8>>, PreviewError> {
    let Some(to) = report.email.first() else {
        return Ok(None);
    };
    let settings = &config.settings.email;
    let key = DeliveryKey::new(
        fire.key.clone(),
        crate::delivery::email::KIND,
        to.to_string(),
    );
    let message = build_message(
        &settings.from,
        to,
        &subject(
            &report.title,
            &crate::domain::keys::IsoDate(fire.key.date()).to_string(),
        ),
        &key,
        now.into(),
        rendered,
        &ListHeaders {
            report: report.id.as_str(),
            domain: settings.list_domain(),
            reply_to: settings.reply_to.as_ref(),
            unsubscribe: report.list_unsubscribe.as_deref(),
        },
    )
    .map_err(|e| PreviewError::Message {
        report: report.id.to_string(),
        reason: e.to_string(),
    })?;
    Ok(Some(message.formatted()))
}
