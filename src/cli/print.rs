//! What the commands print: plans, summaries, fires, and `check`'s report.

use std::process::ExitCode;

use chrono::{DateTime, Utc};

use crate::config::Config;
use crate::domain::window::rfc3339;
use crate::ledger::JobState;
use crate::node::runner::RunOnceSummary;
use crate::report::schedule::{Fire, FireLine};
use crate::services::sweeper::SweepPlan;
use crate::views::history::Redactions;

pub(super) fn print_plan(plan: &SweepPlan) {
    let c = &plan.counts;
    out!("dry run as of {} — nothing deleted", plan.as_of);
    out!(
        "  artifact:    {} job(s), {} bytes",
        plan.artifact.len(),
        c.artifact_bytes
    );
    out!(
        "  diagnostics: {} job(s), {} attempt rows, {} bytes",
        plan.diagnostics.len(),
        c.diagnostics_rows,
        c.diagnostics_bytes
    );
    out!(
        "  ledger:      {} job(s), {} rows",
        plan.ledger.len(),
        c.ledger_rows
    );
    for (class, items) in [
        ("artifact", &plan.artifact),
        ("diagnostics", &plan.diagnostics),
        ("ledger", &plan.ledger),
    ] {
        for i in items {
            let size = match class {
                "artifact" => format!("{} bytes in {} objects", i.bytes, i.rows),
                "diagnostics" => format!("{} bytes in {} attempt rows", i.bytes, i.rows),
                _ => format!("{} rows", i.rows),
            };
            out!(
                "  {class:<12} {:<40} finished {}  {size}",
                i.job,
                i.terminal_at
            );
        }
    }
}

/// `run --once`'s summary as text, one line per job and per delivery, then the totals.
/// What `hide` names is redacted before the columns are padded.
pub(super) fn summary_text(s: &RunOnceSummary, hide: &Redactions) -> String {
    use std::fmt::Write as _;
    let suffix = |e: &Option<String>| {
        e.as_deref()
            .map(|e| format!("  {}", hide.text(e)))
            .unwrap_or_default()
    };
    let mut out = String::new();
    for job in &s.jobs {
        let again = if job.enqueued {
            ""
        } else {
            " (already in the ledger)"
        };
        let _ = writeln!(
            out,
            "{:<40} {:<12}{again}{}",
            job.key,
            job.state.as_str(),
            suffix(&job.last_error)
        );
        for d in &job.deliveries {
            let _ = writeln!(
                out,
                "  {:<60} {:<12} attempts {}{}",
                hide.text(&d.key.to_string()),
                d.state.as_str(),
                d.attempts,
                suffix(&d.last_error)
            );
        }
    }
    let st = &s.stats;
    let skipped = s
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Skipped)
        .count();
    let _ = writeln!(
        out,
        "{}: {} job(s); rendered {}, sent {}, retried {}, quarantined {}, skipped {skipped}",
        s.outcome,
        s.jobs.len(),
        st.rendered,
        st.sent,
        st.retrying,
        st.quarantined
    );
    out
}

pub(super) fn print_fire(fire: &Fire, json: bool, inserted: Option<bool>) -> anyhow::Result<()> {
    if json {
        let line = FireLine {
            inserted,
            ..FireLine::from(fire)
        };
        out!("{}", serde_json::to_string(&line)?);
    } else {
        out!(
            "{:<40} fire {}  window {} .. {} ({}h){}{}",
            fire.key.to_string(),
            rfc3339(fire.fire_at),
            rfc3339(fire.window.start),
            rfc3339(fire.window.end),
            fire.window.hours(),
            match inserted {
                Some(true) => "  inserted",
                Some(false) => "  exists",
                None => "",
            },
            match &fire.calendar {
                None => String::new(),
                Some(c) if c.skipped => format!("  skipped: not a business day ({})", c.reason),
                Some(c) => format!("  moved to the next business day ({})", c.reason),
            }
        );
    }
    Ok(())
}

/// One line per `[[rate_limit]]`: its rate and the destinations it holds back, in the order
/// the pool applies them (the first entry matching a host wins).
fn rate_limit_lines(config: &Config) -> Vec<String> {
    let relay = crate::delivery::SendTarget::relay(&config.settings.email.smtp_url);
    let specs = &config.settings.rate_limits;
    let first_match = |host: &str| specs.iter().position(|s| s.matches(host));
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mut hosts: Vec<String> = Vec::new();
            for kind in crate::delivery::kinds() {
                // Each target of this kind, with how many reports send there.
                let mut targets = std::collections::BTreeMap::<String, usize>::new();
                for report in &config.reports {
                    let mut theirs: Vec<String> = (kind.of_report(report).iter())
                        .map(|d| kind.send_target(d, &relay).to_string())
                        .collect();
                    theirs.sort();
                    theirs.dedup();
                    for t in theirs {
                        *targets.entry(t).or_default() += 1;
                    }
                }
                hosts.extend(
                    (targets.into_iter())
                        .filter(|(t, _)| first_match(t) == Some(i))
                        .map(|(t, reports)| kind.target_shown(&t, reports)),
                );
            }
            let applies = if hosts.is_empty() {
                "matches no destination of these reports".to_string()
            } else {
                format!("applies to {}", hosts.join(", "))
            };
            format!(
                "rate limit {}: {}/s, burst {} — {applies}",
                spec.host, spec.per_second, spec.burst
            )
        })
        .collect()
}

/// `deliver_by` and who is told when the report is late or quarantined (redacted).
fn owners_line(o: &crate::config::Owners) -> Option<String> {
    let by = o
        .deliver_by
        .map(|t| format!("deliver by {} local", t.format("%H:%M")));
    let told: Vec<String> = (crate::delivery::kinds().iter())
        .flat_map(|kind| kind.of_owners(o).iter().map(|d| kind.shown(d)))
        .collect();
    let owners = (!told.is_empty())
        .then(|| format!("owners told when late or quarantined: {}", told.join(", ")));
    match (by, owners) {
        (None, None) => None,
        (Some(b), None) => Some(format!(
            "{b} (no owners: late shows in /metrics and the console)"
        )),
        (None, Some(o)) => Some(format!("{o} (no deliver_by: quarantines only)")),
        (Some(b), Some(o)) => Some(format!("{b}; {o}")),
    }
}

/// How many of a family's reports `check` details; the rest it counts (a family of 10,000 rows
/// would print 50,000 lines).
const FAMILY_REPORTS_SHOWN: usize = 3;

pub(super) fn check(config: &Config, now: DateTime<Utc>) -> anyhow::Result<ExitCode> {
    let r = &config.retention.defaults;
    out!(
        "{}: configuration valid — {} report(s); ledger {}; retention artifact {}, diagnostics {}, ledger {} ({} override(s))",
        config.dir.display(),
        config.reports.len(),
        crate::domain::redact::redact_url(&config.settings.database.url),
        r.artifact,
        r.diagnostics,
        r.ledger,
        config.retention.overrides.len()
    );
    for family in &config.families {
        out!(
            "family {:?} ({}): {} report(s) from {}; the template rendered against the first {} row(s){}",
            family.id,
            family.file.display(),
            family.reports,
            family.rows.describe(&config.root),
            crate::report::render::FAMILY_ROWS_CHECKED.min(family.reports),
            match family.reports > FAMILY_REPORTS_SHOWN {
                true => format!("; the first {FAMILY_REPORTS_SHOWN} shown below"),
                false => String::new(),
            }
        );
    }
    for line in rate_limit_lines(config) {
        out!("{line}");
    }
    // Per family: the reports detailed so far, then those only counted.
    let mut seen: std::collections::BTreeMap<&str, usize> = Default::default();
    for report in &config.reports {
        if let Some(family) = &report.family {
            let n = seen.entry(family.family.as_str()).or_default();
            *n += 1;
            if *n > FAMILY_REPORTS_SHOWN {
                continue;
            }
        }
        check_report(config, report, now);
    }
    for (family, n) in seen {
        if n > FAMILY_REPORTS_SHOWN {
            out!(
                "\n… and {} more report(s) of family {family:?}, one a row (`dawnpost plan` lists their fires)",
                n - FAMILY_REPORTS_SHOWN
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One report in `check`: its schedule, template and destinations, where a family's row made
/// it, its owners, and its next three fires (a calendar's skips and moves said).
fn check_report(config: &Config, report: &crate::config::Report, now: DateTime<Utc>) {
    let tz = report.timezone();
    let csv = config
        .root
        .join("templates")
        .join(format!("{}.csv.hbs", report.template));
    out!(
        "\n{}  \"{}\"  schedule \"{}\" in {}  template {}{}  destinations: {}",
        report.id,
        report.title,
        report.schedule.expr(),
        tz.name(),
        report.template,
        if csv.is_file() {
            " (+ CSV attachment)"
        } else {
            ""
        },
        crate::delivery::counted(report)
    );
    if let Some(family) = &report.family {
        out!("  from {}", family.origin());
    }
    if let Some(line) = owners_line(&report.owners) {
        out!("  {line}");
    }
    for fire in crate::report::schedule::next_fires(report, now, 3) {
        let local = fire.fire_at.with_timezone(&tz);
        let (word, note) = match &fire.calendar {
            None => ("next", String::new()),
            Some(c) if c.skipped => ("skip", format!("  (not a business day: {})", c.reason)),
            Some(c) => ("next", format!("  (moved from a closed day: {})", c.reason)),
        };
        out!(
            "  {word} {}  {}  = {}  reads {}{note}",
            fire.key,
            local.format("%a %Y-%m-%d %H:%M:%S %Z (UTC%:z)"),
            rfc3339(fire.fire_at),
            fire.window.label(report.period, tz)
        );
    }
}
