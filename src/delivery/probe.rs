//! A destination kind that exists only in this crate's unit tests: it proves that a kind is one
//! file and one line in `KINDS`, by going through the whole pipeline — scheduled, rendered,
//! sent, retried, quarantined, redriven, shown — with no other code naming it.
//!
//! A probe destination is a desk's name, listed in a report's `probe = ["…"]`; a desk answers
//! by its name: `flaky-…` fails once (transient) then accepts,
//! `stubborn-…` refuses (permanent) until [`relent`] is called, any other accepts. Every
//! attempt is logged ([`log`]).

use std::sync::Mutex;

use super::destination::{
    Build, Confirm, Destination, NotConfirmed, Notice, Parcel, Sender, Sending,
};
use super::{DeliverError, Outcome, SendTarget};
use crate::config::{ConfigError, DestinationConfig, Fields, Read, Settings};
use crate::domain::keys::{DeliveryKey, DestinationKind};
use crate::domain::outcome::ResponseClass;

pub struct Probe;

pub const KIND: DestinationKind = DestinationKind::named("probe");

/// Every attempt: the delivery key and the answer's class.
static LOG: Mutex<Vec<(String, ResponseClass)>> = Mutex::new(Vec::new());
/// The stubborn desks that now accept.
static RELENTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stubborn desk `desk` accepts from now on.
pub(crate) fn relent(desk: &str) {
    locked(&RELENTED).push(desk.to_string());
}

/// The attempts made so far to deliveries whose key starts with `prefix`.
pub fn log(prefix: &str) -> Vec<(String, ResponseClass)> {
    (locked(&LOG).iter())
        .filter(|(k, _)| k.starts_with(prefix))
        .cloned()
        .collect()
}

impl DestinationConfig for Probe {
    fn kind(&self) -> DestinationKind {
        KIND
    }

    /// A probe's message is the report's `<template>.probe.hbs`, when it has one.
    fn template_part(&self) -> Option<&'static str> {
        Some("probe")
    }

    /// `probe = ["desk", …]`.
    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        _warnings: &mut Vec<String>,
    ) -> Read {
        Read {
            to: f.opt::<Vec<String>>("probe", errors).unwrap_or_default(),
            detail: None,
        }
    }
}

impl Destination for Probe {
    fn send_target(&self, destination: &str, _relay: &SendTarget) -> SendTarget {
        SendTarget::webhook(&format!("probe://{destination}:1"))
    }

    fn timeout(&self, _settings: &Settings) -> std::time::Duration {
        std::time::Duration::from_secs(5)
    }

    fn sender(&self, _build: &Build<'_>) -> Result<Box<dyn Sender>, DeliverError> {
        Ok(Box::new(Desks))
    }
}

struct Desks;

impl Sender for Desks {
    fn send<'a>(
        &'a self,
        parcel: &'a Parcel<'a>,
        to: &'a DeliveryKey,
        confirm: Confirm<'a>,
    ) -> Sending<'a, Result<Outcome, NotConfirmed>> {
        Box::pin(async move {
            confirm().await?;
            let desk = to.destination();
            let key = to.to_string();
            let tried = log(&key).len();
            let class = if desk.starts_with("flaky-") && tried == 0 {
                ResponseClass::Transient
            } else if desk.starts_with("stubborn-") && !locked(&RELENTED).iter().any(|d| d == desk)
            {
                ResponseClass::Permanent
            } else {
                ResponseClass::Accepted
            };
            locked(&LOG).push((key, class));
            // The message the render stored, read back with the artifact.
            let message = parcel
                .rendered
                .parts
                .get("probe")
                .map_or("", String::as_str);
            let words = format!(
                "desk {desk}: {} for {} ({message})",
                class.as_str(),
                parcel.report.title
            );
            Ok(Outcome::new(class, None, words))
        })
    }

    fn notify<'a>(&'a self, _notice: &'a Notice<'a>) -> Sending<'a, Outcome> {
        Box::pin(async { Outcome::new(ResponseClass::Accepted, None, "noted") })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ledger::{Audit, DeliveryState, JobState, Ledger, Via};

    /// A configuration directory with the shipped templates and sample, and one report that
    /// sends to no email and no webhook: its only destinations are the probe's.
    fn project(report: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let config = dir.path().join("config");
        std::fs::create_dir_all(config.join("sample")).expect("config dir");
        for (from, to) in [
            ("templates", dir.path().join("templates")),
            ("config/sample", config.join("sample")),
        ] {
            std::fs::create_dir_all(&to).expect("dir");
            for f in std::fs::read_dir(shipped.join(from))
                .expect("shipped")
                .flatten()
            {
                if f.path().is_file() {
                    std::fs::copy(f.path(), to.join(f.file_name())).expect("copy");
                }
            }
        }
        std::fs::write(
            config.join("dawnpost.toml"),
            format!(
                "[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"file\"\noutbox_dir = \"{}\"\n\
                 [pool]\nconcurrency = 4\nlease = \"30s\"\ndrain_timeout = \"2s\"\n\
                 [retry]\nbase = \"50ms\"\ncap = \"100ms\"\nmax_attempts = 4\nmax_age = \"1h\"\n",
                dir.path().join("outbox").display()
            ),
        )
        .expect("settings");
        std::fs::write(
            config.join("reports.toml"),
            format!(
                "[[report]]\nid = \"{report}\"\ntitle = \"Desk report\"\nschedule = \"0 30 6 * * *\"\n\
                 timezone = \"Europe/Berlin\"\ntemplate = \"daily_ops\"\n\
                 source = {{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }}\n\
                 email = []\nprobe = [\"flaky-north\", \"stubborn-south\", \"east\"]\n"
            ),
        )
        .expect("reports");
        let message = "{\"desk report\": \"{{report.title}}\"}";
        std::fs::write(dir.path().join("templates/daily_ops.probe.hbs"), message).expect("part");
        dir
    }

    async fn run(config: &crate::config::Config, ledger: &Ledger) {
        let opts = crate::node::runner::RunOnceOptions {
            date: chrono::NaiveDate::from_ymd_opt(2026, 11, 30),
            max_wait: Duration::from_secs(30),
            progress: false,
            metrics: None,
        };
        let clock: crate::domain::clock::SharedClock = std::sync::Arc::new(crate::SystemClock);
        crate::node::runner::run_once(config, ledger.clone(), clock, &opts, Default::default())
            .await
            .expect("run once");
    }

    /// Scheduled, rendered, sent, retried, quarantined, redriven and shown, through the seam
    /// alone: the probe kind is named nowhere but in its file and `KINDS`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_registered_kind_goes_through_the_whole_pipeline() {
        let report = "desk-pipeline";
        let dir = project(report);
        let config =
            crate::config::Config::load(&dir.path().join("config"), &super::super::readers())
                .unwrap_or_else(|e| panic!("{e}"));
        let ledger = Ledger::connect("sqlite://ledger.db", dir.path())
            .await
            .expect("ledger");
        // The tick makes the job: 06:30 in Berlin is 05:30Z.
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T05:31:00Z").expect("instant");
        let clock = crate::ManualClock::new(at.with_timezone(&chrono::Utc));
        let catalog = crate::report::catalog::Catalog::load(&config).expect("catalog");
        let day = crate::Span::from_secs(24 * 3600);
        let tick = crate::services::tick::SchedulerTick::new(
            ledger.clone(),
            catalog,
            std::sync::Arc::new(clock),
            day,
        );
        assert_eq!(tick.run_once().await.expect("tick").inserted, 1);
        run(&config, &ledger).await;

        let job: crate::domain::keys::JobKey =
            format!("{report}:2026-11-30").parse().expect("job key");
        let key = |desk: &str| format!("{job}/probe:{desk}");
        let classes = |desk: &str| -> Vec<ResponseClass> {
            log(&key(desk)).into_iter().map(|(_, c)| c).collect()
        };
        assert_eq!(
            classes("flaky-north"),
            [ResponseClass::Transient, ResponseClass::Accepted],
            "retried after a transient answer"
        );
        assert_eq!(classes("stubborn-south"), [ResponseClass::Permanent]);
        assert_eq!(classes("east"), [ResponseClass::Accepted]);
        let deliveries = ledger.deliveries().list(&job).await.expect("deliveries");
        let state = |desk: &str| {
            let d = deliveries
                .iter()
                .find(|d| d.key.to_string().as_str() == key(desk).as_str());
            d.map(|d| d.state)
        };
        assert_eq!(state("flaky-north"), Some(DeliveryState::Sent));
        assert_eq!(state("stubborn-south"), Some(DeliveryState::Quarantined));
        let held = ledger.jobs().get(&job).await.expect("job").expect("a job");
        assert_eq!(held.state, JobState::Quarantined);

        relent("stubborn-south");
        let stubborn: DeliveryKey = key("stubborn-south").parse().expect("delivery key");
        let audit = Audit::new("tester", "the desk is back", Via::Cli).expect("audit");
        (ledger
            .deliveries()
            .redrive(&stubborn, &audit, chrono::Utc::now())
            .await)
            .expect("redrive");
        run(&config, &ledger).await;
        assert_eq!(
            classes("stubborn-south"),
            [ResponseClass::Permanent, ResponseClass::Accepted]
        );
        let held = ledger.jobs().get(&job).await.expect("job").expect("a job");
        assert_eq!(held.state, JobState::Done, "every probe delivery sent");

        let history = crate::views::history::JobHistory::load(&ledger, &job)
            .await
            .expect("show")
            .expect("a history");
        let shown = history.render_text();
        assert!(shown.contains("probe:stubborn-south"), "{shown}");
        assert!(shown.contains("desk stubborn-south"), "{shown}");
        // The probe's message is a part of the artifact: rendered once, listed, and what each
        // send read back.
        assert!(shown.contains(".probe.json"), "{shown}");
        assert!(
            shown.contains(r#"({"desk report": "Desk report"})"#),
            "{shown}"
        );
        // `preview` writes the part beside the other files.
        let out = dir.path().join("preview");
        std::fs::create_dir_all(&out).expect("preview dir");
        let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 30);
        let files = crate::views::preview::preview(&config, report, date, &out, at.into())
            .await
            .expect("preview");
        let part = out.join(format!("{report}-2026-11-30.probe.json"));
        assert!(files.messages.contains(&part), "{:?}", files.messages);
        let written = std::fs::read_to_string(&part).expect("the part");
        assert_eq!(written, r#"{"desk report": "Desk report"}"#);
    }
}
