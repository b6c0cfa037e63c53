//! `reports.toml` / `reports/*.toml`: one `[[report]]` table per report.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use chrono_tz::Tz;

use super::fields::{Fields, Place, parse_file};
use super::settings::Settings;
use super::{ConfigError, resolve};
use crate::cron::Schedule;
use crate::duration::Span;
pub use crate::keys::ReportId;

/// A report definition.
#[derive(Debug, Clone)]
pub struct Report {
    /// The file that defines it.
    pub file: PathBuf,
    pub id: ReportId,
    pub title: String,
    /// The cron expression in the report's timezone.
    pub schedule: Schedule,
    /// `templates/<template>.html.hbs` and `templates/<template>.txt.hbs`.
    pub template: String,
    pub source: SourceSpec,
    /// Data `check` renders the template against; the file source's own file by default.
    pub sample: Option<PathBuf>,
    /// One delivery per address.
    pub email: Vec<lettre::Address>,
    pub webhooks: Vec<Webhook>,
}

impl Report {
    pub fn timezone(&self) -> Tz {
        self.schedule.tz()
    }
}

/// Where a report's data comes from. Paths are resolved against the project root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A JSON file.
    File { path: PathBuf },
    /// A GET whose URL may use `{{window.start}}` and `{{window.end}}`.
    Http { url: String, timeout: Span },
    /// A read-only query (in a file) against the database named by the variable `url_env`,
    /// cut after `timeout` (default 60s; PostgreSQL also gets it as `statement_timeout`).
    Sql {
        url_env: String,
        query: PathBuf,
        timeout: Span,
    },
}

impl SourceSpec {
    /// The longest a fetch may take by the source's own setting; a file has none (the lease
    /// bounds it).
    pub fn timeout(&self) -> Option<Span> {
        match self {
            SourceSpec::File { .. } => None,
            SourceSpec::Http { timeout, .. } | SourceSpec::Sql { timeout, .. } => Some(*timeout),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: url::Url,
    /// The variable holding the `whsec_…` Standard Webhooks secret.
    pub secret_env: Option<String>,
}

pub(super) struct LoadContext<'a> {
    pub root: &'a Path,
    #[allow(dead_code)]
    pub settings: &'a Settings,
}

pub(super) fn load_file(
    file: &Path,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<Report> {
    let Some(table) = parse_file(file, errors) else {
        return Vec::new();
    };
    let mut top = Fields::new(&table, Place::new(file));
    let mut out = Vec::new();
    match top.raw("report") {
        None => errors.push(Place::new(file).error("report", "no [[report]] tables in this file")),
        Some(toml::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    toml::Value::Table(t) => {
                        if let Some(r) = load_report(file, i, t, ctx, errors, warnings) {
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
    top.finish(errors);
    out
}

fn load_report(
    file: &Path,
    index: usize,
    table: &toml::Table,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<Report> {
    let before = errors.len();
    // Errors name the report by its id, or by its position while the id is unusable.
    let label = match table.get("id") {
        Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
        _ => format!("report[{index}]"),
    };
    let place = Place {
        file,
        report: Some(&label),
        prefix: String::new(),
    };
    let mut f = Fields::new(table, place.clone());

    let id = f.req::<String>("id", errors).and_then(|s| {
        ReportId::parse(&s)
            .map_err(|e| errors.push(place.error("id", e.to_string())))
            .ok()
    });
    let title = f.req::<String>("title", errors).filter(|t| {
        let ok = !t.trim().is_empty();
        if !ok {
            errors.push(place.error("title", "must not be empty"));
        }
        ok
    });
    let timezone = f.req::<String>("timezone", errors).and_then(|tz| {
        Tz::from_str(&tz)
            .map_err(|_| {
                errors.push(place.error(
                    "timezone",
                    format!("{tz:?} is not an IANA timezone (e.g. \"Europe/Berlin\")"),
                ))
            })
            .ok()
    });
    let schedule_expr = f.req::<String>("schedule", errors);
    let schedule = match (schedule_expr, timezone) {
        (Some(expr), Some(tz)) => Schedule::parse(&expr, tz)
            .map_err(|e| errors.push(place.error("schedule", e.to_string())))
            .ok(),
        _ => None,
    };
    let template = f.req::<String>("template", errors).and_then(|t| {
        if !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            Some(t)
        } else {
            errors.push(place.error(
                "template",
                format!("{t:?} is not a template name (letters, digits, '_' and '-')"),
            ));
            None
        }
    });
    let source = match f.raw("source") {
        None => {
            errors.push(place.error("source", "missing required field"));
            None
        }
        Some(toml::Value::Table(t)) => load_source(t, &place.nested("source"), ctx.root, errors),
        Some(_) => {
            errors.push(place.error(
                "source",
                "expected a table such as { kind = \"file\", path = \"…\" }",
            ));
            None
        }
    };
    let sample = f.opt::<PathBuf>("sample", errors).and_then(|p| {
        let path = resolve(ctx.root, &p);
        if path.is_file() {
            Some(path)
        } else {
            errors.push(place.error("sample", format!("file {} does not exist", path.display())));
            None
        }
    });

    let mut email = Vec::new();
    for (i, addr) in f
        .opt::<Vec<String>>("email", errors)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let field = format!("email[{i}]");
        match lettre::Address::from_str(addr.trim()) {
            Ok(a) if email.contains(&a) => {
                errors.push(place.error(&field, format!("{addr:?} is listed twice")))
            }
            Ok(a) => email.push(a),
            Err(e) => {
                errors.push(place.error(&field, format!("{addr:?} is not an email address: {e}")))
            }
        }
    }

    let mut webhooks: Vec<Webhook> = Vec::new();
    match f.raw("webhook") {
        None => {}
        Some(toml::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let wplace = place.nested(&format!("webhook[{i}]"));
                let toml::Value::Table(t) = item else {
                    errors.push(wplace.error("(table)", "expected a [[report.webhook]] table"));
                    continue;
                };
                let mut w = Fields::new(t, wplace.clone());
                let url = w
                    .req::<String>("url", errors)
                    .and_then(|u| match url::Url::parse(&u) {
                        Ok(url)
                            if matches!(url.scheme(), "http" | "https") && url.host().is_some() =>
                        {
                            Some(url)
                        }
                        Ok(url) => {
                            errors.push(wplace.error(
                                "url",
                                format!("{u:?}: scheme {:?} is not http or https", url.scheme()),
                            ));
                            None
                        }
                        Err(e) => {
                            errors.push(wplace.error("url", format!("{u:?} is not a URL: {e}")));
                            None
                        }
                    });
                let secret_env = w.opt::<String>("secret_env", errors).and_then(|env| {
                    if super::valid_env_name(&env) {
                        if std::env::var_os(&env).is_none() {
                            warnings.push(format!(
                                "{}: report {label:?}: webhook[{i}].secret_env: environment variable {env} is not set here",
                                file.display()
                            ));
                        }
                        Some(env)
                    } else {
                        errors.push(wplace.error("secret_env", format!("{env:?} is not an environment variable name")));
                        None
                    }
                });
                w.finish(errors);
                if let Some(url) = url {
                    if webhooks.iter().any(|x| x.url == url) {
                        errors.push(wplace.error("url", format!("{url} is listed twice")));
                    } else {
                        webhooks.push(Webhook { url, secret_env });
                    }
                }
            }
        }
        Some(_) => errors.push(place.error("webhook", "expected [[report.webhook]] tables")),
    }
    f.finish(errors);

    let (Some(id), Some(title), Some(schedule), Some(template), Some(source)) =
        (id, title, schedule, template, source)
    else {
        return None;
    };
    if errors.len() > before {
        return None;
    }
    if email.is_empty() && webhooks.is_empty() {
        warnings.push(format!(
            "{}: report {label:?}: no destinations: it will render and deliver nothing",
            file.display()
        ));
    }
    let report = Report {
        file: file.to_path_buf(),
        id,
        title,
        schedule,
        template,
        source,
        sample,
        email,
        webhooks,
    };
    (errors.len() == before).then_some(report)
}

fn load_source(
    table: &toml::Table,
    place: &Place<'_>,
    root: &Path,
    errors: &mut Vec<ConfigError>,
) -> Option<SourceSpec> {
    let mut f = Fields::new(table, place.clone());
    let kind = f.req::<String>("kind", errors);
    let spec = match kind.as_deref() {
        Some("file") => f.req::<PathBuf>("path", errors).and_then(|p| {
            let path = resolve(root, &p);
            match std::fs::read_to_string(&path) {
                Err(e) => {
                    errors
                        .push(place.error("path", format!("cannot read {}: {e}", path.display())));
                    None
                }
                Ok(text) => {
                    match serde_json::from_str::<serde_json::Value>(&text) {
                        Ok(_) => Some(SourceSpec::File { path }),
                        Err(e) => {
                            errors.push(place.error(
                                "path",
                                format!("{} is not valid JSON: {e}", path.display()),
                            ));
                            None
                        }
                    }
                }
            }
        }),
        Some("http") => {
            let timeout = f
                .opt::<Span>("timeout", errors)
                .unwrap_or(Span::from_secs(30));
            f.req::<String>("url", errors).and_then(|u| {
                // The URL may hold {{window.start}} / {{window.end}}; check it with sample values.
                let probe = u.replace("{{window.start}}", "2026-01-01T00:00:00Z").replace("{{window.end}}", "2026-01-02T00:00:00Z");
                if probe.contains("{{") {
                    errors.push(place.error("url", format!("{u:?}: only {{{{window.start}}}} and {{{{window.end}}}} may be templated")));
                    return None;
                }
                match url::Url::parse(&probe) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                        Some(SourceSpec::Http { url: u, timeout })
                    }
                    _ => {
                        errors.push(place.error("url", format!("{u:?} is not an http or https URL")));
                        None
                    }
                }
            })
        }
        Some("sql") => {
            let timeout = f
                .opt::<Span>("timeout", errors)
                .unwrap_or(Span::from_secs(60));
            let url_env = f.req::<String>("url_env", errors).and_then(|env| {
                if super::valid_env_name(&env) {
                    Some(env)
                } else {
                    errors.push(place.error(
                        "url_env",
                        format!("{env:?} is not an environment variable name"),
                    ));
                    None
                }
            });
            let query = f.req::<PathBuf>("query", errors).and_then(|q| {
                let path = resolve(root, &q);
                if path.is_file() {
                    Some(path)
                } else {
                    errors.push(place.error(
                        "query",
                        format!("query file {} does not exist", path.display()),
                    ));
                    None
                }
            });
            match (url_env, query) {
                (Some(url_env), Some(query)) => Some(SourceSpec::Sql {
                    url_env,
                    query,
                    timeout,
                }),
                _ => None,
            }
        }
        Some(other) => {
            errors.push(place.error(
                "kind",
                format!("{other:?} is not a source kind: use \"file\", \"http\" or \"sql\""),
            ));
            // Its other keys cannot be judged without a kind.
            return None;
        }
        None => return None,
    };
    f.finish(errors);
    spec
}
