//! `reports.toml` / `reports/*.toml`: one `[[report]]` table per report.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use chrono_tz::Tz;

use super::fields::{Fields, Place};
use super::readiness::Readiness;
use super::settings::Settings;
use super::{ConfigError, resolve};
use crate::domain::cron::CronExpr;
use crate::domain::keys::ReportId;

/// A report definition.
#[derive(Debug, Clone)]
pub struct Report {
    /// The file that defines it.
    pub file: PathBuf,
    pub id: ReportId,
    pub title: String,
    /// The cron expression in the report's timezone.
    pub schedule: CronExpr,
    /// `templates/<template>.html.hbs` and `templates/<template>.txt.hbs`.
    pub template: String,
    pub source: super::SourceSpec,
    /// Data `check` renders the template against; the file source's own file by default.
    pub sample: Option<PathBuf>,
    /// The most data a fetch of the source may bring (`source.limit`, default 32 MiB): a body,
    /// a file or the rows of a query beyond it fail the render, naming the limit.
    pub source_limit: u64,
    /// Where it sends, each kind's destinations as that kind read them (one delivery each).
    pub destinations: super::Destinations,
    /// `skip_if_empty` (or `send_when = "results"`): where in the source data an empty value
    /// ends the job `skipped`.
    pub skip_if_empty: Option<crate::domain::data_path::DataPath>,
    /// `send_when = "changed"` or `"alert"` (with `[report.alert]`): the rule a rendered job is
    /// sent by, decided in the transaction that records its render.
    pub send_rule: Option<crate::domain::condition::Rule>,
    /// `figures`: the key figures a short message shows, and templates see as `figures`.
    pub figures: Vec<super::figures::Figure>,
    /// `[[report.chart]]`: charts drawn from its data, placed by the HTML template.
    pub charts: Vec<super::charts::ChartSpec>,
    /// `attach`: the CSV part as CSV, as a spreadsheet, or both.
    pub attach: super::attach::Attach,
    /// `ready_when`, `wait_until` and `on_late`: wait for the data, until a deadline.
    pub readiness: Option<Readiness>,
    /// `window` (and `week_starts`): the period of data each job reads.
    pub period: crate::domain::window::Period,
    /// `calendar` and `on_holiday`: the business days it fires on.
    pub calendar: Option<super::calendar::ReportCalendar>,
    /// The `[[family]]` and row this report was made from; its templates see the row as `row`.
    pub family: Option<Arc<super::rows::FamilyRow>>,
    /// `deliver_by`, `owners` and `owner_webhook`: by when it is due, and who is told when it
    /// is late or quarantined.
    pub owners: super::owners::Owners,
}

impl AsRef<Report> for Report {
    fn as_ref(&self) -> &Report {
        self
    }
}

impl Report {
    pub fn timezone(&self) -> Tz {
        self.schedule.tz()
    }
}

pub(super) struct LoadContext<'a> {
    pub root: &'a Path,
    /// The kinds of destination, and the reader of an SQL `[[family]]`'s rows.
    pub readers: &'a super::Readers<'a>,
    /// Each calendar file loaded once, however many reports name it (`None`: it did not load).
    pub calendars: std::cell::RefCell<CalendarCache>,
    /// The families read so far.
    pub families: std::cell::RefCell<Vec<super::rows::Family>>,
    #[allow(dead_code)]
    pub settings: &'a Settings,
    /// Each data file read once, however many reports name it: why it is unusable, if it is.
    pub data_files: std::cell::RefCell<std::collections::HashMap<PathBuf, Option<String>>>,
    /// Each cron expression parsed and checked once (in UTC), however many reports share it;
    /// each report's schedule is it in the report's timezone, sharing the parsed pattern.
    pub schedules: std::cell::RefCell<ScheduleCache>,
}

type CalendarCache = std::collections::HashMap<PathBuf, Option<Arc<super::calendar::CalendarCell>>>;
type ScheduleCache = std::collections::HashMap<String, Result<CronExpr, String>>;

impl<'a> LoadContext<'a> {
    pub fn new(
        root: &'a Path,
        settings: &'a Settings,
        readers: &'a super::Readers<'a>,
    ) -> LoadContext<'a> {
        LoadContext {
            root,
            readers,
            families: Default::default(),
            calendars: Default::default(),
            settings,
            data_files: Default::default(),
            schedules: Default::default(),
        }
    }

    /// Why the JSON file at `path` cannot be used, if it cannot; read once per path.
    /// What a kind of source may ask while it reads its keys, `problem` being
    /// [`Self::json_file_problem`].
    pub(super) fn source_context<'c>(
        &'c self,
        problem: &'c dyn Fn(&Path) -> Option<String>,
    ) -> super::SourceContext<'c> {
        super::SourceContext {
            root: self.root,
            json_file_problem: problem,
        }
    }

    fn json_file_problem(&self, path: &Path) -> Option<String> {
        self.data_files
            .borrow_mut()
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                // A pipe or a device would be read without end (`/dev/zero`) or wait for a
                // writer forever: only a regular file is read.
                std::fs::metadata(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))
                    .and_then(|m| match m.is_file() {
                        true => Ok(()),
                        false => Err(format!("{} is not a regular file", path.display())),
                    })
                    .and_then(|()| {
                        std::fs::read_to_string(path)
                            .map_err(|e| format!("cannot read {}: {e}", path.display()))
                    })
                    .and_then(|text| {
                        serde_json::from_str::<serde::de::IgnoredAny>(&text)
                            .map_err(|e| format!("{} is not valid JSON: {e}", path.display()))
                    })
                    .err()
            })
            .clone()
    }
}

/// `source` (required, a table) and its `limit`.
fn load_source_field(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> (Option<super::SourceSpec>, u64) {
    match f.raw("source") {
        Some(toml::Value::Table(t)) => {
            let place = place.nested("source");
            let limit = source_limit_of(t, &place, errors).unwrap_or(DEFAULT_SOURCE_LIMIT);
            (load_source(t, &place, ctx, errors), limit)
        }
        Some(_) => {
            let message = "expected a table such as { kind = \"file\", path = \"…\" }";
            errors.push(place.error("source", message));
            (None, DEFAULT_SOURCE_LIMIT)
        }
        None => {
            errors.push(place.error("source", "missing required field"));
            (None, DEFAULT_SOURCE_LIMIT)
        }
    }
}

/// One `[[report]]` table (or a family's, for one of its rows: `row` names it in errors).
pub(super) fn load_report(
    (file, row): (&Path, Option<&str>),
    index: usize,
    table: &toml::Table,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<Report> {
    let before = errors.len();
    let label = report_label(table, index);
    let place = Place {
        file,
        row,
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
        let empty = t.trim().is_empty();
        empty.then(|| errors.push(place.error("title", "must not be empty")));
        !empty
    });
    let schedule = load_schedule(&mut f, &place, ctx, errors);
    let template = load_template(&mut f, &place, errors);
    let (source, source_limit) = load_source_field(&mut f, &place, ctx, errors);
    let sample = load_sample(&mut f, &place, ctx, errors);
    let destinations = super::Destinations::read(&ctx.readers.destinations, |kind| {
        kind.read_report(&mut f, errors, warnings)
    });
    let (skip_if_empty, send_rule) = super::send_when::load(&mut f, errors);
    let figures = super::figures::load(&mut f, errors);
    let charts = super::charts::load(&mut f, errors);
    let attach = super::attach::load(&mut f, (ctx.root, template.as_deref()), errors);
    let problem = |path: &Path| ctx.json_file_problem(path);
    let kinds = (&ctx.readers.sources[..], &ctx.source_context(&problem));
    let readiness = super::readiness::load(&mut f, &place, kinds, schedule.as_ref(), errors);
    let calendar = load_calendar(&mut f, &place, ctx, errors);
    let period = super::period::load(&mut f, schedule.as_ref(), errors, warnings);
    let owners = super::owners::load(&mut f, &place, &ctx.readers.destinations, errors, warnings);
    f.finish(errors);

    let (Some(id), Some(title), Some(schedule), Some(template), Some(source)) =
        (id, title, schedule, template, source)
    else {
        return None;
    };
    if errors.len() > before {
        return None;
    }
    if destinations.is_empty() {
        let message = "no destinations: it will render and deliver nothing";
        warnings.push(place.warning("email", message));
    }
    Some(Report {
        file: file.to_path_buf(),
        id,
        title,
        schedule,
        template,
        source,
        sample,
        source_limit,
        destinations,
        skip_if_empty,
        send_rule,
        figures,
        charts,
        attach,
        readiness,
        period,
        calendar,
        family: None,
        owners,
    })
}

/// `sample`: a data file the checks render the template against, which must exist.
fn load_sample(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<PathBuf> {
    f.opt::<PathBuf>("sample", errors).and_then(|p| {
        let path = resolve(ctx.root, &p);
        let exists = path.is_file();
        if !exists {
            let message = format!("file {} does not exist", path.display());
            errors.push(place.error("sample", message));
        }
        exists.then_some(path)
    })
}

/// `calendar` (a file of business days and holidays) and `on_holiday` (`"skip"`, the
/// default, or `"next_business_day"`).
fn load_calendar(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<super::calendar::ReportCalendar> {
    use super::calendar::{CalendarCell, OnHoliday, ReportCalendar};
    let on_holiday = f
        .opt::<String>("on_holiday", errors)
        .and_then(|o| match o.as_str() {
            "skip" => Some(OnHoliday::Skip),
            "next_business_day" => Some(OnHoliday::NextBusinessDay),
            other => {
                let message = format!("{other:?}: use \"skip\" or \"next_business_day\"");
                errors.push(place.error("on_holiday", message));
                None
            }
        });
    let Some(path) = f.opt::<PathBuf>("calendar", errors) else {
        if on_holiday.is_some() {
            errors.push(place.error("on_holiday", "needs a calendar"));
        }
        return None;
    };
    let path = resolve(ctx.root, &path);
    let cell = ctx
        .calendars
        .borrow_mut()
        .entry(path.clone())
        .or_insert_with(|| match CalendarCell::load(&path) {
            Ok(cell) => Some(Arc::new(cell)),
            Err(problems) => {
                errors.extend(problems);
                None
            }
        })
        .clone();
    let Some(cell) = cell else {
        errors.push(place.error("calendar", format!("{} did not load", path.display())));
        return None;
    };
    Some(ReportCalendar {
        cell,
        on_holiday: on_holiday.unwrap_or_default(),
    })
}

/// Errors name a report by its id, or by its position while the id is unusable.
fn report_label(table: &toml::Table, index: usize) -> String {
    match table.get("id") {
        Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
        _ => format!("report[{index}]"),
    }
}

/// `template`: the name of `templates/<name>.{html,txt}.hbs`.
fn load_template(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<String> {
    let t = f.req::<String>("template", errors)?;
    let ok = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        errors.push(place.error(
            "template",
            format!("{t:?} is not a template name (letters, digits, '_' and '-')"),
        ));
    }
    ok.then_some(t)
}

/// `timezone` and `schedule`: a cron expression in an IANA timezone.
fn load_schedule(
    f: &mut Fields<'_, '_>,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<CronExpr> {
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
    let (expr, timezone) = (f.req::<String>("schedule", errors)?, timezone?);
    ctx.schedules
        .borrow_mut()
        .entry(expr)
        .or_insert_with_key(|expr| CronExpr::parse(expr, Tz::UTC).map_err(|e| e.to_string()))
        .as_ref()
        .map(|s| s.in_tz(timezone))
        .map_err(|e| errors.push(place.error("schedule", e.clone())))
        .ok()
}

fn load_source(
    table: &toml::Table,
    place: &Place<'_>,
    ctx: &LoadContext<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<super::SourceSpec> {
    let mut f = Fields::new(table, place.clone());
    let _ = f.raw("limit"); // read by `source_limit_of`
    let kinds = &ctx.readers.sources;
    let kind = f.req::<String>("kind", errors)?;
    let Some(reader) = kinds.iter().find(|k| k.kind() == kind) else {
        let choice = super::sources::choice(kinds.iter());
        let message = format!("{kind:?} is not a source kind: use {choice}");
        errors.push(place.error("kind", message));
        // Its other keys cannot be judged without a kind.
        return None;
    };
    let problem = |path: &Path| ctx.json_file_problem(path);
    let spec = reader.read(&mut f, &ctx.source_context(&problem), errors);
    f.finish(errors);
    spec
}

/// The default of `source.limit`.
pub(crate) const DEFAULT_SOURCE_LIMIT: u64 = 32 << 20;
/// The largest `source.limit`.
pub(crate) const MAX_SOURCE_LIMIT: u64 = 1 << 30;

/// `source.limit`: bytes, written `4096`, `"512KiB"`, `"32MiB"` or `"1GiB"` (at most 1 GiB).
fn source_limit_of(
    t: &toml::Table,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<u64> {
    let value = t.get("limit")?;
    match super::fields::size_of(value) {
        Some(n) if (1..=MAX_SOURCE_LIMIT).contains(&n) => Some(n),
        _ => {
            errors.push(place.error(
                "limit",
                format!("{value} is not a size from 1 byte to 1GiB (e.g. \"32MiB\")"),
            ));
            None
        }
    }
}
