//! Configuration: `dawnpost.toml`, `reports.toml` (and/or `reports/*.toml`) and `retention.toml`
//! in one directory (README.md, "Configuration").
//!
//! Everything is validated before anything runs. Each problem becomes a [`ConfigError`] that
//! names the file, the report and the field, and every problem of every file is reported
//! together. Unknown keys are errors. Relative paths are relative to the project root: the
//! parent of the configuration directory.

mod attach;
mod calendar;
mod charts;
mod database;
mod destinations;
mod family;
mod fields;
mod figures;
mod lines;
mod owners;
mod period;
mod rate_limits;
mod readiness;
mod recipients;
mod report;
mod retention;
mod rows;
mod send_when;
mod server;
mod services;
mod settings;
mod sources;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fields::parse_file;
pub use fields::{Fields, Place};

pub use attach::Attach;
pub(crate) use calendar::Calendar;
pub use calendar::CalendarCell;
pub use calendar::OnHoliday;
pub use calendar::ReportCalendar;
pub use charts::{ChartKind, ChartSpec, MAX_SERIES};
pub(crate) use database::DEFAULT_PG_CONNECTIONS;
pub use database::DatabaseSettings;
pub use destinations::{DestinationConfig, Destinations, Read, Readers};
pub(crate) use fields::shown_size;
pub(crate) use fields::window_url;
pub use figures::{Figure, MAX_FIGURES};
pub use owners::Owners;
pub use rate_limits::RateLimitSpec;
pub use readiness::{Deadline, OnLate, Readiness};
pub use recipients::RecipientSettings;
pub(crate) use report::DEFAULT_SOURCE_LIMIT;
pub use report::Report;
pub use retention::RetentionPolicy;
pub use retention::{RetentionOverride, Thresholds};
pub(crate) use rows::MAX_ROWS_FILE;
pub use rows::NoSqlRows;
pub use rows::RowsSpec;
pub use rows::{Family, FamilyRow, RowReader};
pub use server::ServerSettings;
pub use settings::EmailSettings;
pub(crate) use settings::EmailTransport;
pub use settings::PoolSettings;
pub use settings::RetrySettings;
pub use settings::ScheduleSettings;
pub use settings::WebhookSettings;
pub use settings::{ArtifactSettings, Settings};
pub use sources::{SourceConfig, SourceContext, SourceSettings, SourceSpec, same_settings};

/// One problem in the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// A `[[family]]` report's row: `family "…", <rows file> line N`.
    pub row: Option<String>,
    pub report: Option<String>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file.display())?;
        if let Some(row) = &self.row {
            write!(f, "{row}: ")?;
        }
        if let Some(report) = &self.report {
            write!(f, "report {report:?}: ")?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every problem found, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} configuration problem(s):", self.0.len())?;
        for e in &self.0 {
            writeln!(f, "  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// The whole, validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The configuration directory (`--config`).
    pub dir: PathBuf,
    /// The project root, against which relative paths resolve.
    pub root: PathBuf,
    pub settings: Settings,
    /// Shared, not copied, by the pool, the server and the scheduler.
    pub reports: Vec<Arc<Report>>,
    /// The `[[family]]` tables the reports of rows came from.
    pub families: Vec<Family>,
    pub retention: RetentionPolicy,
    /// Things worth saying that do not stop a run (e.g. a secret's variable is unset here).
    pub warnings: Vec<String>,
    /// The artifact parts the kinds of destination send (`DestinationConfig::template_part`),
    /// which a report's template may render.
    pub template_parts: Vec<&'static str>,
}

impl Config {
    /// Loads and validates every file of `dir`, each kind of destination reading its keys and
    /// an SQL `[[family]]`'s rows read with `readers` (`delivery::readers()` has this
    /// version's). Templates are loaded by the commands that use them and render-checked by
    /// `check` ([`crate::report::render::check_templates`]).
    pub fn load(dir: &Path, readers: &Readers<'_>) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let root = project_root(dir);
        if !dir.is_dir() {
            errors.push(ConfigError {
                file: dir.to_path_buf(),
                row: None,
                report: None,
                field: "(directory)".into(),
                message: "configuration directory does not exist".into(),
            });
            return Err(ConfigErrors(errors));
        }
        let settings_file = dir.join("dawnpost.toml");
        let mut settings = settings::load(&settings_file, &mut errors);
        if let Some(path) = &settings.tls.ca_file {
            match crate::runtime::tls::CaBundle::load(&resolve(&root, path)) {
                Ok(ca) => settings.tls.ca = Some(std::sync::Arc::new(ca)),
                Err(e) => errors.push(ConfigError {
                    file: settings_file.clone(),
                    row: None,
                    report: None,
                    field: "tls.ca_file".into(),
                    message: e.to_string(),
                }),
            }
        }
        if let Some(d) = &settings.recipients.ses_certificates_dir {
            settings.recipients.ses_certificates_dir = Some(resolve(&root, d));
        }
        let mut warnings = Vec::new();
        let ctx = report::LoadContext::new(&root, &settings, readers);
        let reports = load_reports(
            &report_files(dir, &mut errors),
            &ctx,
            &mut errors,
            &mut warnings,
        );
        let families = ctx.families.into_inner();
        let retention_file = dir.join("retention.toml");
        let retention = if retention_file.is_file() {
            RetentionPolicy::load(&retention_file).unwrap_or_else(|e| {
                errors.extend(e.0);
                RetentionPolicy::default()
            })
        } else {
            RetentionPolicy::default()
        };
        warnings.extend(lease_warnings(&settings_file, &settings, &reports));
        for env in settings.secret_envs() {
            if std::env::var_os(env).is_none() {
                warnings.push(format!(
                    "{}: environment variable {env} is not set here",
                    settings_file.display()
                ));
            }
        }
        if !errors.is_empty() {
            lines::locate(&mut errors);
            return Err(ConfigErrors(errors));
        }
        let template_parts = (readers.destinations.iter())
            .filter_map(|k| k.template_part())
            .collect();
        Ok(Config {
            reports,
            families,
            retention,
            warnings,
            template_parts,
            ..Config::of_settings(dir, root, settings)
        })
    }

    /// A configuration of `settings` alone: no reports, the default retention policy.
    fn of_settings(dir: &Path, root: PathBuf, settings: Settings) -> Config {
        Config {
            dir: dir.to_path_buf(),
            root,
            settings,
            reports: Vec::new(),
            families: Vec::new(),
            retention: RetentionPolicy::default(),
            warnings: Vec::new(),
            template_parts: Vec::new(),
        }
    }

    /// What a command that only reads or redrives the ledger needs: `dawnpost.toml` (the
    /// ledger's URL). Reports, samples and the retention policy are not read, so a bad edit
    /// there cannot lock an operator out of `jobs`, `show`, `dlq` or `redrive`.
    pub(crate) fn load_ledger_settings(dir: &Path) -> Result<Config, ConfigErrors> {
        let mut errors = Vec::new();
        let root = project_root(dir);
        let settings = settings::load(&dir.join("dawnpost.toml"), &mut errors);
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Config::of_settings(dir, root, settings))
    }

    /// Every report by id, sharing the reports: what the pool and the server look jobs up in.
    pub fn reports_by_id(&self) -> std::collections::HashMap<String, Arc<Report>> {
        self.reports
            .iter()
            .map(|r| (r.id.to_string(), r.clone()))
            .collect()
    }

    pub fn report(&self, id: &str) -> Option<&Report> {
        self.reports
            .iter()
            .find(|r| r.id.as_str() == id)
            .map(|r| &**r)
    }
}

pub(crate) fn resolve(root: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}

/// An environment variable name as config may name it.
pub(crate) fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The project root: the configuration directory's parent, against which relative paths
/// resolve.
fn project_root(dir: &Path) -> PathBuf {
    let dir_abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    dir_abs
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir_abs.clone())
}

/// `reports.toml` and `reports/*.toml`, in that order; at least one.
fn report_files(dir: &Path, errors: &mut Vec<ConfigError>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if dir.join("reports.toml").is_file() {
        files.push(dir.join("reports.toml"));
    }
    if let Ok(entries) = std::fs::read_dir(dir.join("reports")) {
        let mut more: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        more.sort();
        files.extend(more);
    }
    if files.is_empty() {
        errors.push(ConfigError {
            file: dir.join("reports.toml"),
            row: None,
            report: None,
            field: "(file)".into(),
            message: "no reports: create reports.toml or reports/*.toml".into(),
        });
    }
    files
}

/// Every report of `files`; an id defined twice is an error in the later file.
fn load_reports(
    files: &[PathBuf],
    ctx: &report::LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<Arc<Report>> {
    let mut reports: Vec<Arc<Report>> = Vec::new();
    let mut first_file: std::collections::HashMap<crate::domain::keys::ReportId, PathBuf> =
        std::collections::HashMap::new();
    for file in files {
        for r in load_file(file, ctx, errors, warnings) {
            match first_file.get(&r.id) {
                Some(first) => errors.push(ConfigError {
                    file: file.clone(),
                    row: r.family.as_ref().map(|f| f.origin()),
                    report: Some(r.id.to_string()),
                    field: "id".into(),
                    message: format!("duplicate report id (first defined in {})", first.display()),
                }),
                None => {
                    first_file.insert(r.id.clone(), r.file.clone());
                    reports.push(Arc::new(r));
                }
            }
        }
    }
    reports
}

/// Every `[[report]]` and `[[family]]` report of one file.
fn load_file(
    file: &Path,
    ctx: &report::LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<Report> {
    let Some(table) = parse_file(file, errors) else {
        return Vec::new();
    };
    let mut top = Fields::new(&table, Place::new(file));
    let mut out = Vec::new();
    let families = top.raw("family");
    match top.raw("report") {
        None if families.is_some() => {}
        None => errors.push(
            Place::new(file).error("report", "no [[report]] or [[family]] tables in this file"),
        ),
        Some(toml::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    toml::Value::Table(t) => {
                        if let Some(r) =
                            report::load_report((file, None), i, t, ctx, errors, warnings)
                        {
                            out.push(r);
                        }
                    }
                    _ => errors
                        .push(Place::new(file).error(&format!("report[{i}]"), "expected a table")),
                }
            }
        }
        Some(_) => errors.push(Place::new(file).error("report", "expected [[report]] tables")),
    }
    if let Some(families) = families {
        out.extend(family::load_families(file, families, ctx, errors, warnings));
    }
    top.finish(errors);
    out
}

/// A work item never runs past its lease: a longer timeout is cut there, which is worth saying.
fn lease_warnings(
    settings_file: &Path,
    settings: &Settings,
    reports: &[Arc<Report>],
) -> Vec<String> {
    let lease = settings.pool.lease;
    let transports = [
        ("email.timeout".to_string(), settings.email.timeout),
        ("webhook.timeout".to_string(), settings.webhook.timeout),
    ]
    .into_iter()
    .map(|(field, timeout)| (settings_file, field, timeout));
    let sources = reports.iter().filter_map(|r| {
        let field = format!("report {:?}: source.timeout", r.id.as_str());
        Some((r.file.as_path(), field, r.source.timeout()?))
    });
    transports
        .chain(sources)
        .filter(|(_, _, timeout)| *timeout > lease)
        .map(|(file, field, timeout)| {
            format!(
                "{}: {field} ({timeout}) is longer than pool.lease ({lease}): the work is cut at the lease",
                file.display()
            )
        })
        .collect()
}
