//! What `show` and `dlq` print: a job's whole history from the ledger alone.

use std::fmt::Write;

use crate::domain::keys::JobKey;
use crate::domain::window::rfc3339;
use crate::ledger::{
    Attempt, Delivery, Job, JobFilter, JobState, Ledger, LedgerError, ProbeRow, Redrive, Told,
};

#[derive(Debug, Clone)]
pub struct DeliveryHistory {
    pub delivery: Delivery,
    pub attempt_log: Vec<Attempt>,
    /// The bounces and complaints recorded on it after it was sent.
    pub bounces: Vec<crate::ledger::BounceRow>,
}

/// A job, its artifact, every delivery with every attempt, and every redrive.
#[derive(Debug, Clone)]
pub struct JobHistory {
    pub job: Job,
    /// `stored`, `deleted` (by retention) or `none` (not rendered).
    pub artifact_status: &'static str,
    pub deliveries: Vec<DeliveryHistory>,
    pub redrives: Vec<Redrive>,
    /// Every probe of its data (`ready_when`), oldest first.
    pub probes: Vec<ProbeRow>,
    /// Every revision of its report and date, oldest first (itself among them; one when it
    /// was never reissued).
    pub revisions: Vec<Job>,
    /// What the artifact store holds for a stored artifact, when `show` looked.
    pub store: Option<StoreCheck>,
    /// What its report's owners were told of it (late, quarantined), oldest first.
    pub notices: Vec<crate::ledger::NoticeRow>,
    /// Whether it was sent, for a report that sends only on a change or an alert.
    pub decision: Option<crate::ledger::DecisionRow>,
}

/// The artifact read back from its store: `intact` (sha256 verified), `missing`, `altered`
/// or `unreadable`, with the store's URL and what went wrong.
#[derive(Debug, Clone)]
pub struct StoreCheck {
    pub url: String,
    pub status: &'static str,
    pub detail: String,
}

impl JobHistory {
    pub async fn load(ledger: &Ledger, key: &JobKey) -> Result<Option<JobHistory>, LedgerError> {
        let Some(job) = ledger.jobs().get(key).await? else {
            return Ok(None);
        };
        let mut deliveries = Vec::new();
        for d in ledger.deliveries().list(key).await? {
            let attempt_log = ledger.deliveries().attempts(&d.key).await?;
            let bounces = ledger.recipients().bounces_of(&d.key).await?;
            deliveries.push(DeliveryHistory {
                delivery: d,
                attempt_log,
                bounces,
            });
        }
        let redrives = ledger.deliveries().redrives(key).await?;
        let probes = ledger.waits().probes(key).await?;
        let revisions = ledger.jobs().revisions(key).await?;
        let notices = ledger.notices().of_job(key).await?;
        let decision = ledger.decisions().of(key).await?;
        let artifact_status = match (&job.artifact, job.artifact_deleted_at) {
            (None, _) => "none",
            (Some(_), Some(_)) => "deleted",
            (Some(_), None) => "stored",
        };
        Ok(Some(JobHistory {
            job,
            artifact_status,
            deliveries,
            redrives,
            probes,
            revisions,
            store: None,
            notices,
            decision,
        }))
    }

    pub fn render_text(&self) -> String {
        let j = &self.job;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "job {}  state {}  origin {}",
            j.key,
            j.state.as_str(),
            j.origin
        );
        let _ = writeln!(
            out,
            "  fire {}  window {} .. {}  render attempts {}  redrives {}",
            rfc3339(j.fire_at),
            rfc3339(j.window.start),
            rfc3339(j.window.end),
            j.attempts,
            j.redrive_count
        );
        let _ = writeln!(
            out,
            "  created {}  updated {}",
            rfc3339(j.created_at),
            rfc3339(j.updated_at)
        );
        if let Some(t) = j.terminal_at {
            let _ = writeln!(out, "  finished {}", rfc3339(t));
        }
        match (&j.last_error, j.state) {
            (Some(why), JobState::Skipped) => {
                let _ = writeln!(out, "  skipped: {why}; nothing was sent");
            }
            (Some(e), _) => {
                let _ = writeln!(out, "  last error: {e}");
            }
            (None, _) => {}
        }
        if let Some(d) = self.decision.as_ref().filter(|d| d.sent) {
            let _ = writeln!(out, "  sent: {} (send_when = \"{}\")", d.words, d.rule);
        }
        self.wait_lines(&mut out);
        self.revision_lines(&mut out);
        self.artifact_lines(&mut out);
        for d in &self.deliveries {
            d.lines(&mut out);
        }
        for n in &self.notices {
            let told = match &n.told {
                Told::Waiting => {
                    "waiting for its message (a report's quarantines are batched)".to_string()
                }
                Told::Nobody => "nobody told: the report has no owners now".to_string(),
                Told::In(m) => format!("message {m}"),
            };
            let _ = writeln!(
                out,
                "  owners notified: {} at {}: {}; {told}",
                n.cause.as_str(),
                rfc3339(n.noticed_at),
                n.detail
            );
        }
        for r in &self.redrives {
            let _ = writeln!(
                out,
                "  {} {} by {}{}: {}{}",
                r.action,
                rfc3339(r.at),
                r.by,
                r.via
                    .as_ref()
                    .map(|v| format!(" via {v}"))
                    .unwrap_or_default(),
                r.reason,
                r.delivery_key
                    .as_ref()
                    .map(|d| format!(" (delivery {})", d.redacted()))
                    .unwrap_or_default()
            );
        }
        out
    }

    /// The wait for its data: the deadline, whether it passed, and the probes (the last ten,
    /// after a count of the earlier ones).
    fn wait_lines(&self, out: &mut String) {
        let j = &self.job;
        match (j.state, j.wait_until) {
            (JobState::Waiting, Some(until)) => {
                let next = rfc3339(j.ready_at);
                let _ = writeln!(
                    out,
                    "  waiting for its data until {}; next probe {next}",
                    rfc3339(until)
                );
            }
            (_, Some(until)) => {
                let _ = writeln!(out, "  waited for its data until {}", rfc3339(until));
            }
            (_, None) => {}
        }
        if let Some(at) = j.late_at {
            let _ = writeln!(
                out,
                "  late: the deadline passed at {} without its data ready; what was rendered after it may be stale",
                rfc3339(at)
            );
        }
        if self.probes.is_empty() {
            return;
        }
        let _ = writeln!(out, "  probes of its data: {}", self.probes.len());
        let shown = self.probes.len().saturating_sub(10);
        if shown > 0 {
            let _ = writeln!(out, "    … {shown} earlier");
        }
        for probe in &self.probes[shown..] {
            let _ = writeln!(
                out,
                "    {} {}: {}",
                rfc3339(probe.at),
                probe.outcome.shown(),
                probe.answer
            );
        }
    }

    /// What it supersedes, and every revision of its report and date when there are several.
    fn revision_lines(&self, out: &mut String) {
        if let Some(s) = &self.job.supersedes {
            let _ = writeln!(
                out,
                "  revision {}: a correction that supersedes {s}",
                self.job.key.revision()
            );
        }
        if self.revisions.len() > 1 {
            let _ = writeln!(
                out,
                "  revisions of {} for {}:",
                self.job.key.report(),
                self.job.key.date()
            );
            for r in &self.revisions {
                let this = if r.key == self.job.key {
                    "  (this one)"
                } else {
                    ""
                };
                let artifact = match &r.artifact {
                    Some(a) => format!("  artifact sha256 {} ({})", a.sha256, parts_of(a)),
                    None => "  not rendered".to_string(),
                };
                let _ = writeln!(
                    out,
                    "    {}  {}  created {}{artifact}{this}",
                    r.key,
                    r.state.as_str(),
                    rfc3339(r.created_at)
                );
            }
        }
    }

    fn artifact_lines(&self, out: &mut String) {
        let j = &self.job;
        match (&j.artifact, j.artifact_deleted_at) {
            (None, _) => {
                let _ = writeln!(out, "  artifact: not rendered");
            }
            (Some(a), deleted) => {
                let parts = format!("+ {}", parts_of(a));
                let _ = writeln!(
                    out,
                    "  artifact: {} ({parts})  sha256 {}  {} bytes",
                    a.html_key, a.sha256, a.bytes
                );
                if let Some(at) = deleted {
                    let _ = writeln!(
                        out,
                        "    deleted by retention at {}: the ledger rows remain",
                        rfc3339(at)
                    );
                }
                if let Some(s) = &self.store {
                    let _ = writeln!(out, "    in store {}: {} ({})", s.url, s.status, s.detail);
                }
            }
        }
    }
}

impl DeliveryHistory {
    /// Whether an attempt sent a bounded copy with a link instead of the whole report.
    pub fn sent_a_link(&self) -> bool {
        (self.attempt_log.iter())
            .filter_map(|a| a.reason.as_deref())
            .any(crate::delivery::sent_linked)
    }

    /// The delivery and its attempts, for `show`.
    fn lines(&self, out: &mut String) {
        let dl = &self.delivery;
        let linked = self.sent_a_link();
        let _ = writeln!(
            out,
            "  delivery {}  {}  attempts {}  redrives {}{}",
            dl.key,
            dl.state.as_str(),
            dl.attempts,
            dl.redrive_count,
            if linked {
                "  (got a link instead of the whole report)"
            } else {
                ""
            }
        );
        for a in &self.attempt_log {
            let _ = writeln!(
                out,
                "    #{} {} → {}  {}{}{}{}",
                a.attempt,
                rfc3339(a.requested_at),
                rfc3339(a.finished_at),
                a.class.as_str(),
                a.code.map(|c| format!(" {c}")).unwrap_or_default(),
                a.retry_after_ms
                    .map(|ms| format!(" retry-after {}s", ms / 1000))
                    .unwrap_or_default(),
                a.next_ready_at
                    .map(|t| format!("  next {}", rfc3339(t)))
                    .unwrap_or_default(),
            );
            if let Some(r) = &a.reason {
                let _ = writeln!(out, "       {r}");
            }
        }
        if dl.state == crate::ledger::DeliveryState::Suppressed {
            let why = dl
                .last_error
                .as_deref()
                .unwrap_or("its recipient is suppressed");
            let _ = writeln!(out, "    {why}");
        }
        for b in &self.bounces {
            let _ = writeln!(out, "    then {}", bounce_line(b));
        }
    }
}

/// A bounce on a delivery as `show` tells it: `bounced 5.1.1 (hard) at … via dsn: …`.
pub(crate) fn bounce_line(b: &crate::ledger::BounceRow) -> String {
    let status = b
        .status
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let what = match b.kind {
        crate::domain::bounce::BounceKind::Complaint => "complaint".to_string(),
        kind => format!("bounced{status} ({})", kind.as_str()),
    };
    let diagnostic = (b.diagnostic.as_deref())
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    format!(
        "{what} at {} via {}{diagnostic}",
        rfc3339(b.received_at),
        b.provider
    )
}

/// Quarantined work.
#[derive(Debug, Clone)]
pub struct Dlq {
    pub jobs: Vec<Job>,
    pub deliveries: Vec<Delivery>,
}

impl Dlq {
    pub async fn load(ledger: &Ledger) -> Result<Dlq, LedgerError> {
        Ok(Dlq {
            jobs: ledger
                .jobs()
                .list(&JobFilter {
                    state: Some(JobState::Quarantined),
                    limit: Some(1000),
                    ..JobFilter::default()
                })
                .await?,
            deliveries: ledger.deliveries().quarantined(1000).await?,
        })
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} quarantined job(s), {} quarantined deliver(ies)",
            self.jobs.len(),
            self.deliveries.len()
        );
        for j in &self.jobs {
            let _ = writeln!(
                out,
                "job {}  attempts {}  {}",
                j.key,
                j.attempts,
                j.last_error.as_deref().unwrap_or("")
            );
        }
        for d in &self.deliveries {
            let _ = writeln!(
                out,
                "delivery {}  attempts {}  {}  {}",
                d.key,
                d.attempts,
                d.last_class.map(|c| c.as_str()).unwrap_or(""),
                d.last_error.as_deref().unwrap_or("")
            );
        }
        out
    }
}

/// What `show` and `dlq` hide unless asked to reveal: each delivery's key and destination,
/// wherever they appear (errors and diagnostics included), by their redacted forms.
#[derive(Debug, Clone, Default)]
pub struct Redactions(Vec<(String, String)>);

impl Redactions {
    pub fn of<'a>(deliveries: impl IntoIterator<Item = &'a Delivery>) -> Redactions {
        let mut pairs = Vec::new();
        for d in deliveries {
            pairs.push((d.key.to_string(), d.key.redacted()));
            pairs.push((
                d.key.destination().to_string(),
                crate::domain::redact::redact_destination(d.key.destination()),
            ));
        }
        // The longest first: a key holds its destination.
        pairs.sort_by_key(|(full, _)| std::cmp::Reverse(full.len()));
        pairs.dedup();
        Redactions(pairs)
    }

    /// Each `(full, shown)` pair, the longest first (a key holds its destination).
    pub fn from_pairs(mut pairs: Vec<(String, String)>) -> Redactions {
        pairs.sort_by_key(|(full, _)| std::cmp::Reverse(full.len()));
        pairs.dedup();
        Redactions(pairs)
    }

    pub fn text(&self, text: &str) -> String {
        self.0
            .iter()
            .fold(text.to_string(), |t, (full, shown)| t.replace(full, shown))
    }

    /// Every string in `value`, redacted.
    pub fn json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }
}

impl JobHistory {
    /// What this history hides unless revealed.
    pub(crate) fn redactions(&self) -> Redactions {
        Redactions::of(self.deliveries.iter().map(|d| &d.delivery))
    }
}

impl Dlq {
    /// What this list hides unless revealed.
    pub(crate) fn redactions(&self) -> Redactions {
        Redactions::of(&self.deliveries)
    }
}

/// An artifact's parts besides its HTML, by their keys' ends: `.txt, .csv, .by_hour.png`.
pub(crate) fn parts_of(a: &crate::report::artifact::ArtifactRef) -> String {
    let stem = a.html_key.strip_suffix(".html").unwrap_or(&a.html_key);
    let csv = a.csv_key.as_ref().map(|_| ".csv".to_string());
    let named = (a.parts.iter()).map(|p| {
        a.part_key(p)
            .strip_prefix(stem)
            .unwrap_or_default()
            .to_string()
    });
    (std::iter::once(".txt".to_string()).chain(csv).chain(named))
        .collect::<Vec<_>>()
        .join(", ")
}
