//! Prometheus metrics (`GET /metrics`). Event counters and histograms are recorded where things
//! happen; the ledger-derived gauges (jobs and deliveries by state, the age of the oldest ready
//! job) are refreshed at every scrape.

pub mod classic;
mod names;

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use names::ATTEMPT_CLASSES;
pub use names::NAMES;
pub(crate) use names::{BOUNCE_PROVIDERS, HTTP_CUT_REASONS, SERVICES};

type Labels = Vec<(String, String)>;

fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// Every metric dawnpost exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub jobs: Family<Labels, Gauge>,
    pub deliveries: Family<Labels, Gauge>,
    pub oldest_ready_age: Gauge<f64, AtomicU64>,
    /// How long ago the oldest job still waiting for its data was made (refreshed at every scrape).
    pub oldest_waiting_age: Gauge<f64, AtomicU64>,
    /// Waiting jobs whose deadline has passed: the daemon should have acted on them.
    pub waiting_overdue: Gauge,
    /// Readiness probes, by outcome (`ready`, `not_ready`, `failed`).
    pub probes: Family<Labels, Counter>,
    pub leases_rescued: Family<Labels, Counter>,
    pub active_workers: Gauge,
    pub attempts: Family<Labels, Counter>,
    pub rate_limited: Counter,
    pub retry_delay: Histogram,
    pub quarantined: Counter,
    /// Jobs that ended `skipped` (their data was empty, or `send_when` did not send them).
    pub skipped: Counter,
    /// `send_when = "alert"`: 1 while a report's alert is triggered, 0 while it is not (set at
    /// each decision), and its transitions by report and state reached (`triggered`, `ok`).
    pub alert_state: Family<Labels, Gauge>,
    pub alert_transitions: Family<Labels, Counter>,
    pub artifact_bytes: Counter,
    pub render_duration: Histogram,
    pub sweeper_deleted: Family<Labels, Counter>,
    pub policy_reload_failures: Counter,
    /// Reloads of the reports (SIGHUP, a family's query rows), by result (`ok`, `failed`).
    pub config_reloads: Family<Labels, Counter>,
    /// 1 for each report late now (its job not delivered by `deliver_by`), by report and
    /// date; no series while none is (set at every notifier round).
    pub report_late: Family<Labels, Gauge>,
    /// Owners' notice sends, by outcome (`sent`, `retry`, `quarantined`).
    pub owner_notices: Family<Labels, Counter>,
    pub ingested: Family<Labels, Counter>,
    /// Deliveries not sent because their recipient is suppressed.
    pub suppressed: Counter,
    /// Bounces and complaints received, by provider and kind (`hard`, `soft`, `complaint`).
    pub bounces: Family<Labels, Counter>,
    /// Bounces and complaints that matched no delivery (kept, never used to suppress).
    pub bounces_unmatched: Counter,
    /// Log lines dropped because stderr was full or broken (shared with [`crate::runtime::logging`]).
    pub log_lines_dropped: Counter,
    pub service_failures: Family<Labels, Counter>,
    /// 1 while a service runs, 0 while it is down or failed (refreshed at every scrape).
    pub service_up: Family<Labels, Gauge>,
    /// The finish of each report's last accepted delivery in the last 8 days, Unix seconds
    /// (refreshed at every scrape from the ledger).
    pub report_last_accepted: Family<Labels, Gauge<f64, AtomicU64>>,
    /// `[[rate_limit]]`: each entry's sends a second and burst, by its host pattern.
    pub rate_limit_per_second: Family<Labels, Gauge<f64, AtomicU64>>,
    pub rate_limit_burst: Family<Labels, Gauge>,
    /// Sends turned back to the queue by a rate limit, by host pattern.
    pub rate_limit_deferred: Family<Labels, Counter>,
    /// HTTP connections open now.
    pub http_connections_open: Gauge,
    /// HTTP connections cut or refused by the server, by reason.
    pub http_connections_cut: Family<Labels, Counter>,
    /// This node's wall clock minus the shared ledger's at the last reading, seconds (0 on
    /// SQLite, whose machine's clock is the ledger's).
    pub clock_offset: Gauge<f64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("dawnpost");
        let m = Metrics {
            jobs: Family::default(),
            deliveries: Family::default(),
            oldest_ready_age: Gauge::default(),
            oldest_waiting_age: Gauge::default(),
            waiting_overdue: Gauge::default(),
            probes: Family::default(),
            leases_rescued: Family::default(),
            active_workers: Gauge::default(),
            attempts: Family::default(),
            rate_limited: Counter::default(),
            retry_delay: Histogram::new(exponential_buckets(0.5, 2.0, 14)),
            quarantined: Counter::default(),
            skipped: Counter::default(),
            alert_state: Family::default(),
            alert_transitions: Family::default(),
            artifact_bytes: Counter::default(),
            render_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            sweeper_deleted: Family::default(),
            policy_reload_failures: Counter::default(),
            config_reloads: Family::default(),
            report_late: Family::default(),
            owner_notices: Family::default(),
            ingested: Family::default(),
            suppressed: Counter::default(),
            bounces: Family::default(),
            bounces_unmatched: Counter::default(),
            log_lines_dropped: crate::runtime::logging::dropped_lines(),
            service_failures: Family::default(),
            service_up: Family::default(),
            report_last_accepted: Family::default(),
            rate_limit_per_second: Family::default(),
            rate_limit_burst: Family::default(),
            rate_limit_deferred: Family::default(),
            http_connections_open: Gauge::default(),
            http_connections_cut: Family::default(),
            clock_offset: Gauge::default(),
            registry: Registry::default(),
        };
        m.register(&mut registry);
        // Every series exists from the start, so dashboards and alerts see zeros, not gaps (the
        // attempts' series, by kind, once the pool knows its kinds: `kinds_sent`).
        for outcome in ["ready", "not_ready", "failed"] {
            let _ = m.probes.get_or_create(&label("outcome", outcome));
        }
        for kind in ["job", "delivery"] {
            let _ = m.leases_rescued.get_or_create(&label("kind", kind));
        }
        for class in ["artifact", "diagnostics", "ledger"] {
            let _ = m.sweeper_deleted.get_or_create(&label("class", class));
        }
        for service in SERVICES {
            let _ = m.service_failures.get_or_create(&label("service", service));
            // Down until the supervisor starts it (and while a test runs no supervisor).
            m.set_service_up(service, false);
        }
        for result in ["created", "duplicate"] {
            let _ = m.ingested.get_or_create(&label("result", result));
        }
        for provider in BOUNCE_PROVIDERS {
            for kind in ["hard", "soft", "complaint"] {
                let labels = vec![
                    ("provider".to_string(), provider.to_string()),
                    ("kind".to_string(), kind.to_string()),
                ];
                let _ = m.bounces.get_or_create(&labels);
            }
        }
        for result in ["ok", "failed"] {
            let _ = m.config_reloads.get_or_create(&label("result", result));
        }
        for outcome in ["sent", "retry", "quarantined"] {
            let _ = m.owner_notices.get_or_create(&label("outcome", outcome));
        }
        for reason in HTTP_CUT_REASONS {
            let _ = m
                .http_connections_cut
                .get_or_create(&label("reason", reason));
        }
        Metrics { registry, ..m }
    }
}

fn attempt_labels(kind: &str, class: &str) -> Labels {
    vec![
        ("kind".to_string(), kind.to_string()),
        ("class".to_string(), class.to_string()),
    ]
}

impl Metrics {
    /// The reports late now, `(report, date)` each: their series set, every other removed.
    /// (`date`, not the job key: Prometheus keeps the label `job` for its scrape job.)
    pub(crate) fn set_late(&self, late: &[(String, String)]) {
        let now: Vec<Labels> = late
            .iter()
            .map(|(report, date)| {
                vec![
                    ("report".to_string(), report.clone()),
                    ("date".to_string(), date.clone()),
                ]
            })
            .collect();
        self.report_late.clear();
        for labels in &now {
            self.report_late.get_or_create(labels).set(1);
        }
    }

    /// An owner's notice send that ended `outcome` (`sent`, `retry`, `quarantined`).
    pub(crate) fn owner_notice(&self, outcome: &str) {
        self.owner_notices
            .get_or_create(&label("outcome", outcome))
            .inc();
    }

    /// An attempt to a destination of `kind` that ended `class`.
    pub fn attempt(&self, kind: &str, class: &str) {
        self.attempts
            .get_or_create(&attempt_labels(kind, class))
            .inc();
    }

    /// A `send_when = "alert"` decision for `report`: its state, and the transition `event`
    /// made, if it made one.
    pub(crate) fn alert(
        &self,
        report: &str,
        triggered: bool,
        event: crate::domain::condition::Event,
    ) {
        use crate::domain::condition::Event;
        self.alert_state
            .get_or_create(&label("report", report))
            .set(i64::from(triggered));
        let to = match event {
            Event::Triggered => "triggered",
            Event::Recovered => "ok",
            _ => return,
        };
        let labels = vec![
            ("report".to_string(), report.to_string()),
            ("to".to_string(), to.to_string()),
        ];
        self.alert_transitions.get_or_create(&labels).inc();
    }

    /// Makes the attempts' series of each of `kinds` exist (at zero) before any attempt.
    pub(crate) fn kinds_sent(&self, kinds: &[String]) {
        for kind in kinds {
            for class in ATTEMPT_CLASSES {
                let _ = self.attempts.get_or_create(&attempt_labels(kind, class));
            }
        }
    }

    /// A readiness probe that answered `outcome` (`ready`, `not_ready` or `failed`).
    pub fn probed(&self, outcome: &str) {
        self.probes.get_or_create(&label("outcome", outcome)).inc();
    }

    /// A reload of the reports that ended `result` (`ok` or `failed`).
    pub(crate) fn config_reloaded(&self, result: &str) {
        self.config_reloads
            .get_or_create(&label("result", result))
            .inc();
    }

    pub fn rescued(&self, kind: &str, n: u64) {
        self.leases_rescued
            .get_or_create(&label("kind", kind))
            .inc_by(n);
    }

    pub fn swept(&self, class: &str, n: u64) {
        self.sweeper_deleted
            .get_or_create(&label("class", class))
            .inc_by(n);
    }

    /// Makes a service's failure series exist (at zero) before it can fail.
    pub(crate) fn service_started(&self, service: &str) {
        let _ = self
            .service_failures
            .get_or_create(&label("service", service));
        self.set_service_up(service, true);
    }

    pub(crate) fn service_failed(&self, service: &str) {
        self.service_failures
            .get_or_create(&label("service", service))
            .inc();
        self.set_service_up(service, false);
    }

    /// A connection the HTTP server cut or refused (one of [`HTTP_CUT_REASONS`]).
    pub(crate) fn http_cut(&self, reason: &str) {
        self.http_connections_cut
            .get_or_create(&label("reason", reason))
            .inc();
    }

    pub fn ingest(&self, result: &str) {
        self.ingested.get_or_create(&label("result", result)).inc();
    }

    /// A bounce or complaint received from `provider`, matched to a delivery or not.
    pub(crate) fn bounce(&self, provider: &str, kind: &str, matched: bool) {
        let labels = vec![
            ("provider".to_string(), provider.to_string()),
            ("kind".to_string(), kind.to_string()),
        ];
        self.bounces.get_or_create(&labels).inc();
        if !matched {
            self.bounces_unmatched.inc();
        }
    }

    pub(crate) fn set_jobs(&self, state: &str, n: i64) {
        self.jobs.get_or_create(&label("state", state)).set(n);
    }

    pub(crate) fn set_service_up(&self, service: &str, up: bool) {
        self.service_up
            .get_or_create(&label("service", service))
            .set(i64::from(up));
    }

    /// Publishes one configured rate limit.
    pub(crate) fn set_rate_limit(&self, host: &str, per_second: f64, burst: u32) {
        let l = label("host", host);
        self.rate_limit_per_second.get_or_create(&l).set(per_second);
        self.rate_limit_burst
            .get_or_create(&l)
            .set(i64::from(burst));
        let _ = self.rate_limit_deferred.get_or_create(&l);
    }

    pub(crate) fn rate_limit_deferred(&self, host: &str) {
        self.rate_limit_deferred
            .get_or_create(&label("host", host))
            .inc();
    }

    pub(crate) fn set_report_last_accepted(&self, report: &str, unix_seconds: f64) {
        self.report_last_accepted
            .get_or_create(&label("report", report))
            .set(unix_seconds);
    }

    pub(crate) fn set_deliveries(&self, state: &str, n: i64) {
        self.deliveries.get_or_create(&label("state", state)).set(n);
    }

    /// Names and describes every metric in `registry`.
    fn register(&self, registry: &mut Registry) {
        self.register_work(registry);
        self.register_operations(registry);
        self.register_http(registry);
    }

    /// The queue and the work: states, waits, probes, leases; then the sends.
    fn register_work(&self, registry: &mut Registry) {
        let m = self;
        registry.register("jobs", "Jobs by state", m.jobs.clone());
        registry.register("deliveries", "Deliveries by state", m.deliveries.clone());
        registry.register(
            "oldest_ready_job_age_seconds",
            "How long the oldest due ready job has waited",
            m.oldest_ready_age.clone(),
        );
        registry.register(
            "oldest_waiting_job_age_seconds",
            "How long ago the oldest job still waiting for its data (ready_when) was made",
            m.oldest_waiting_age.clone(),
        );
        registry.register(
            "jobs_waiting_past_deadline",
            "Jobs still waiting for their data after their deadline (wait_until): none should be",
            m.waiting_overdue.clone(),
        );
        registry.register(
            "readiness_probes",
            "Readiness probes of reports' data (ready_when), by outcome",
            m.probes.clone(),
        );
        registry.register(
            "leases_rescued",
            "Expired leases returned by the rescuer, by kind",
            m.leases_rescued.clone(),
        );
        registry.register(
            "active_workers",
            "Work items in flight",
            m.active_workers.clone(),
        );
        self.register_sends(registry);
    }

    /// Attempts, their limits and retries, and what renders cost.
    fn register_sends(&self, registry: &mut Registry) {
        let m = self;
        registry.register(
            "delivery_attempts",
            "Delivery attempts by destination kind and response class",
            m.attempts.clone(),
        );
        registry.register(
            "rate_limited",
            "Rate-limited replies (HTTP 429, SMTP 421/450/451/452)",
            m.rate_limited.clone(),
        );
        registry.register(
            "rate_limit_per_second",
            "Configured [[rate_limit]] sends a second, by host pattern",
            m.rate_limit_per_second.clone(),
        );
        registry.register(
            "rate_limit_burst",
            "Configured [[rate_limit]] burst, by host pattern",
            m.rate_limit_burst.clone(),
        );
        registry.register(
            "rate_limit_deferred",
            "Sends turned back to the queue by a rate limit, by host pattern",
            m.rate_limit_deferred.clone(),
        );
        registry.register(
            "retry_delay_seconds",
            "Delay before a scheduled retry",
            m.retry_delay.clone(),
        );
        registry.register(
            "quarantined",
            "Jobs and deliveries quarantined",
            m.quarantined.clone(),
        );
        registry.register(
            "jobs_skipped",
            "Jobs that ended skipped: their data was empty, or send_when did not send them",
            m.skipped.clone(),
        );
        registry.register(
            "alert_state",
            "1 while a report's alert is triggered, 0 while it is not, as its last decision left it",
            m.alert_state.clone(),
        );
        registry.register(
            "alert_transitions",
            "Alerts that triggered or recovered, by report and the state reached",
            m.alert_transitions.clone(),
        );
        registry.register(
            "artifact_bytes_written",
            "Bytes of artifacts written",
            m.artifact_bytes.clone(),
        );
        registry.register(
            "render_duration_seconds",
            "Fetch and render time of a job",
            m.render_duration.clone(),
        );
    }

    /// Retention, ingestion, logging, the services and the clock.
    fn register_operations(&self, registry: &mut Registry) {
        let m = self;
        registry.register(
            "sweeper_deleted",
            "Items deleted by retention, by class",
            m.sweeper_deleted.clone(),
        );
        registry.register(
            "policy_reload_failures",
            "Retention policy reloads that did not validate",
            m.policy_reload_failures.clone(),
        );
        registry.register(
            "report_late",
            "1 for each report whose job was not delivered by its deliver_by deadline, by report and date",
            m.report_late.clone(),
        );
        registry.register(
            "owner_notice_sends",
            "Sends of owners' notices (late, quarantined), by outcome (sent, retry, quarantined)",
            m.owner_notices.clone(),
        );
        registry.register(
            "config_reloads",
            "Reloads of the reports (SIGHUP, a family's query rows), by result",
            m.config_reloads.clone(),
        );
        registry.register(
            "ingested_runs",
            "Signed run requests accepted, by result",
            m.ingested.clone(),
        );
        registry.register(
            "deliveries_suppressed",
            "Deliveries not sent because their recipient is suppressed",
            m.suppressed.clone(),
        );
        registry.register(
            "bounces",
            "Bounces and complaints received, by provider and kind (hard, soft, complaint)",
            m.bounces.clone(),
        );
        registry.register(
            "bounces_unmatched",
            "Bounces and complaints that matched no delivery",
            m.bounces_unmatched.clone(),
        );
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because the log sink was full or broken",
            m.log_lines_dropped.clone(),
        );
        registry.register(
            "service_failures",
            "Daemon services that failed (error, panic or early return), by service",
            m.service_failures.clone(),
        );
        registry.register(
            "service_up",
            "1 while a daemon service runs, 0 while it is down or failed, by service",
            m.service_up.clone(),
        );
        registry.register(
            "clock_offset_seconds",
            "This node's wall clock minus the shared ledger's at the last reading (0 on SQLite)",
            m.clock_offset.clone(),
        );
    }

    /// The HTTP server's connections.
    fn register_http(&self, registry: &mut Registry) {
        let m = self;
        registry.register(
            "http_connections_open",
            "HTTP connections open now",
            m.http_connections_open.clone(),
        );
        registry.register(
            "http_connections_cut",
            "HTTP connections the server cut or refused, by reason (header_timeout, body_timeout, malformed, too_many_connections)",
            m.http_connections_cut.clone(),
        );
        registry.register(
            "report_last_accepted_timestamp_seconds",
            "When each report's last accepted delivery finished (Unix seconds; reports with one in the last 8 days)",
            m.report_last_accepted.clone(),
        );
    }

    /// The exposition in the Prometheus text format 0.0.4.
    pub fn render_text(&self) -> String {
        classic::from_openmetrics(&self.render())
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
