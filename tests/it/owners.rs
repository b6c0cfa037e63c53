//! Deadlines and owners (`deliver_by`, `owners`, `owner_webhook`): late judged from the
//! schedule (a fire that never became a job is late), each late job and each quarantine told
//! once, a report's quarantines batched (the first at once, the rest of the hour in one more),
//! the late reports in `/metrics` and first on the console's overview; the real daemon started
//! after a deadline passed tells the owners exactly once (aiosmtpd). The owners' keys in the
//! configuration are in `owner_config.rs`.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use dawnpost::ManualClock;
use dawnpost::config::Config;
use dawnpost::delivery::notice::LateBoard;
use dawnpost::domain::keys::{JobKey, ReportId};
use dawnpost::domain::window::Window;
use dawnpost::ledger::{Audit, JobOrigin, NewJob, Via};
use dawnpost::report::catalog::Catalog;
use dawnpost::runtime::metrics::Metrics;
use dawnpost::services::notifier::{Notifier, RoundCounts};

use crate::common::fixtures::params;
use crate::common::{Project, TestLedger, at, jk};

/// A report `id` firing at `schedule` (UTC), due by `deliver_by`, with two owners and `extra`
/// keys.
pub(crate) fn owned_report(id: &str, schedule: &str, deliver_by: &str, extra: &str) -> String {
    format!(
        "{}deliver_by = \"{deliver_by}\"\nowners = [\"lead@example.com\", \"second@example.com\"]\n{extra}\n",
        crate::common::report(id, schedule, "UTC")
    )
}

pub(crate) struct Rig {
    notifier: Notifier,
    clock: ManualClock,
    metrics: Arc<Metrics>,
    board: LateBoard,
    config: Config,
}

impl Rig {
    pub(crate) fn new(p: &Project, t: &TestLedger, now: DateTime<Utc>) -> Rig {
        let config = p.load();
        let clock = ManualClock::new(now);
        let metrics = Arc::new(Metrics::default());
        let board = LateBoard::default();
        let catalog = Catalog::load(&config).expect("catalog");
        let notifier = Notifier::new(
            &config,
            (t.ledger.clone(), catalog, Arc::new(clock.clone())),
            metrics.clone(),
            board.clone(),
        )
        .expect("notifier");
        Rig {
            notifier,
            clock,
            metrics,
            board,
            config,
        }
    }

    pub(crate) async fn round(&self) -> RoundCounts {
        self.notifier.run_once().await.expect("round")
    }

    /// The emails in the outbox: (file name, text).
    pub(crate) fn outbox(&self) -> Vec<(String, String)> {
        outbox(&self.config.root.join("var/outbox"))
    }
}

/// An email's Subject and text body, decoded.
pub(crate) fn read_mail(raw: &str) -> (String, String) {
    let m = mail_parser::MessageParser::default()
        .parse(raw.as_bytes())
        .expect("an email");
    let subject = m.subject().unwrap_or_default().to_string();
    let body = m.body_text(0).map(|b| b.into_owned()).unwrap_or_default();
    (subject, body)
}

fn outbox(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".eml"))
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).expect("read");
                    (e.file_name().to_string_lossy().into_owned(), text)
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn job(key: &str, fire_at: DateTime<Utc>) -> NewJob {
    let key: JobKey = key.parse().expect("key");
    NewJob {
        fire_at,
        window: Window {
            start: fire_at - chrono::Duration::hours(30),
            end: fire_at - chrono::Duration::hours(6),
        },
        ready_at: fire_at,
        origin: JobOrigin::Schedule,
        key,
    }
}

/// The fire of 2026-11-30 06:30 UTC never became a job: at 08:00 it is late, told once to
/// each owner with what is missing and the command that sends it; still late (the board and
/// `/metrics`) until its job finishes, and never told again.
async fn a_fire_that_never_became_a_job_is_late_and_told_once(t: &TestLedger) {
    let p = Project::new(&owned_report("wh", "0 30 6 30 11 *", "08:00", ""));
    let rig = Rig::new(&p, t, at(2026, 11, 30, 7, 59));
    let before = rig.round().await;
    assert_eq!((before.late, before.messages), (0, 0), "not due yet");

    rig.clock.set(at(2026, 11, 30, 8, 0));
    let first = rig.round().await;
    assert_eq!(
        (first.late, first.noticed, first.messages, first.sent),
        (1, 1, 1, 2)
    );
    let mails = rig.outbox();
    assert_eq!(mails.len(), 2, "one per owner: {mails:?}");
    let (_, lead) = mails
        .iter()
        .find(|(n, _)| n.contains("lead@"))
        .expect("lead");
    for said in [
        "To: lead@example.com",
        "X-Dawnpost-Notice: wh:2026-11-30/late",
        "Auto-Submitted: auto-generated",
    ] {
        assert!(lead.contains(said), "{said} in {lead}");
    }
    let (subject, body) = read_mail(lead);
    assert_eq!(
        subject,
        "Late: Report wh — 2026-11-30 not delivered by 08:00"
    );
    assert!(
        body.contains("What is missing: no job: its fire at 2026-11-30 06:30 UTC never became one"),
        "{body}"
    );
    assert!(
        body.contains("Why: dawnpost enqueue wh --date 2026-11-30"),
        "{body}"
    );
    let late = rig.board.get();
    assert_eq!(
        late.iter().map(|l| l.key.to_string()).collect::<Vec<_>>(),
        ["wh:2026-11-30"]
    );
    let metrics = rig.metrics.render_text();
    assert!(
        metrics.contains(r#"dawnpost_report_late{report="wh",date="2026-11-30"} 1"#),
        "{metrics}"
    );

    rig.clock.set(at(2026, 11, 30, 8, 1));
    let again = rig.round().await;
    assert_eq!(
        (again.late, again.noticed, again.messages, again.sent),
        (1, 0, 0, 0)
    );
    assert_eq!(rig.outbox().len(), 2, "told once");

    // An operator makes the job and it finishes: no longer late, and nobody is told again.
    t.ledger
        .jobs()
        .insert_many(
            &[job("wh:2026-11-30", at(2026, 11, 30, 8, 2))],
            at(2026, 11, 30, 8, 2),
        )
        .await
        .expect("insert");
    let audit = Audit::new("ops", "not wanted today", Via::Cli).expect("audit");
    t.ledger
        .jobs()
        .cancel(&jk("wh:2026-11-30"), &audit, at(2026, 11, 30, 8, 3))
        .await
        .expect("cancel");
    rig.clock.set(at(2026, 11, 30, 8, 4));
    let after = rig.round().await;
    assert_eq!((after.late, after.noticed, after.sent), (0, 0, 0));
    assert!(rig.board.get().is_empty());
    assert!(!rig.metrics.render_text().contains("dawnpost_report_late{"));
    let history = dawnpost::views::history::JobHistory::load(&t.ledger, &jk("wh:2026-11-30"))
        .await
        .expect("load")
        .expect("job");
    assert!(
        history
            .render_text()
            .contains("owners notified: late at 2026-11-30T08:00:00Z"),
        "{}",
        history.render_text()
    );
    // `show --json` and `GET /v1/jobs/{key}` carry it too.
    let json =
        serde_json::to_value(dawnpost::views::api::JobHistoryV1::from(&history)).expect("json");
    let notices = json["notices"].as_array().expect("notices");
    assert_eq!(notices.len(), 1, "{json}");
    assert_eq!(
        (&notices[0]["cause"], &notices[0]["noticed_at"]),
        (
            &serde_json::json!("late"),
            &serde_json::json!("2026-11-30T08:00:00Z")
        ),
        "{json}"
    );
    assert_eq!(notices[0]["told"], "sent", "in a message at once: {json}");
    assert!(notices[0]["message"].is_string(), "{json}");
}

/// A job done before its deadline is never late; one still delivering at its deadline is.
async fn a_job_done_by_its_deadline_is_not_late(t: &TestLedger) {
    let p = Project::new(
        &(owned_report("a", "0 30 5 25 10 *", "08:00", "")
            + &owned_report("b", "0 30 5 25 10 *", "08:00", "")),
    );
    let fire = at(2026, 10, 25, 5, 30);
    t.ledger
        .jobs()
        .insert_many(
            &[job("a:2026-10-25", fire), job("b:2026-10-25", fire)],
            fire,
        )
        .await
        .expect("insert");
    let leased = t
        .ledger
        .leases()
        .jobs(&params("w", fire, 10))
        .await
        .expect("lease");
    for j in &leased {
        let to = [dawnpost::ledger::NewDelivery {
            key: dawnpost::domain::keys::DeliveryKey::new(
                j.job.key.clone(),
                dawnpost::delivery::email::KIND,
                "ops@example.com",
            ),
        }];
        t.ledger
            .jobs()
            .rendered(&j.lease, &crate::common::fixtures::artifact(), &to, fire)
            .await
            .expect("rendered");
    }
    // a's delivery is sent at 06:00; b's waits.
    let sending = t
        .ledger
        .leases()
        .deliveries(&params("w", at(2026, 10, 25, 6, 0), 10))
        .await
        .expect("lease");
    let a = sending
        .iter()
        .find(|d| d.delivery.key.to_string().starts_with("a:"))
        .expect("a");
    t.ledger
        .deliveries()
        .finish(
            &a.lease,
            &crate::common::fixtures::attempt(
                dawnpost::domain::outcome::ResponseClass::Accepted,
                at(2026, 10, 25, 6, 0),
            ),
            dawnpost::ledger::DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    t.ledger
        .jobs()
        .settle(&jk("a:2026-10-25"), at(2026, 10, 25, 6, 0))
        .await
        .expect("settle");

    let rig = Rig::new(&p, t, at(2026, 10, 25, 8, 0));
    let round = rig.round().await;
    assert_eq!((round.late, round.messages), (1, 1));
    let late = rig.board.get();
    assert_eq!(late[0].key, jk("b:2026-10-25"));
    assert_eq!(late[0].detail, "its job is delivering");
    let mails = rig.outbox();
    assert!(
        mails.iter().all(|(n, _)| n.starts_with("b_2026-10-25")),
        "{mails:?}"
    );
}

/// 500 jobs of one report quarantined at once: one message per owner listing the first 20 and
/// the command for the rest; a trickle afterwards waits for the hour's end and goes as one
/// more; then a new hour's first goes at once again.
async fn five_hundred_quarantines_are_one_message(t: &TestLedger) {
    let p = Project::new(&owned_report("storm", "0 30 5 1 1 *", "08:00", ""));
    let now = at(2026, 11, 30, 9, 0);
    let first = NaiveDate::from_ymd_opt(2025, 1, 1).expect("date");
    let id = ReportId::parse("storm").expect("id");
    let quarantine = |n: usize, offset: usize, at_: DateTime<Utc>| {
        let jobs: Vec<NewJob> = (offset..offset + n)
            .map(|i| {
                let date = first + chrono::Days::new(i as u64);
                job(&JobKey::new(id.clone(), date).to_string(), at_)
            })
            .collect();
        let l = t.ledger.clone();
        async move {
            l.jobs().insert_many(&jobs, at_).await.expect("insert");
            let leased = l
                .leases()
                .jobs(&params("w", at_, 1000))
                .await
                .expect("lease");
            for j in leased {
                l.jobs()
                    .quarantine(&j.lease, "HTTP 404 from the source", at_)
                    .await
                    .expect("quarantine");
            }
        }
    };
    quarantine(500, 0, now).await;
    let rig = Rig::new(&p, t, now);
    let round = rig.round().await;
    assert_eq!((round.noticed, round.messages, round.sent), (500, 1, 2));
    let mails = rig.outbox();
    assert_eq!(mails.len(), 2, "one message, to each of the two owners");
    let (subject, text) = read_mail(&mails[0].1);
    assert_eq!(subject, "Quarantined: Report storm — 500 jobs");
    assert!(
        text.contains("- storm:2025-01-01: HTTP 404 from the source"),
        "{text}"
    );
    assert_eq!(text.matches("HTTP 404").count(), 20, "{text}");
    assert!(
        text.contains("- and 480 more: dawnpost jobs --report storm --state quarantined"),
        "{text}"
    );

    // 30 more within the hour: held.
    let later = at(2026, 11, 30, 9, 20);
    quarantine(30, 500, later).await;
    rig.clock.set(later);
    let held = rig.round().await;
    assert_eq!((held.noticed, held.messages), (30, 0));
    // The hour ends: the 30 go as one more message.
    rig.clock.set(at(2026, 11, 30, 10, 0));
    let rest = rig.round().await;
    assert_eq!((rest.messages, rest.sent), (1, 2));
    let subjects: Vec<String> = rig.outbox().iter().map(|(_, t)| read_mail(t).0).collect();
    assert_eq!(subjects.len(), 4);
    assert_eq!(
        subjects.iter().filter(|s| s.ends_with("— 30 jobs")).count(),
        2,
        "{subjects:?}"
    );
    // A quarantine after that window opens a new one: told at once.
    let next = at(2026, 11, 30, 10, 5);
    quarantine(1, 530, next).await;
    rig.clock.set(next);
    let fresh = rig.round().await;
    assert_eq!((fresh.noticed, fresh.messages, fresh.sent), (1, 1, 2));
    // Nothing is ever told twice.
    rig.clock.set(at(2026, 11, 30, 12, 0));
    let quiet = rig.round().await;
    assert_eq!((quiet.noticed, quiet.messages, quiet.sent), (0, 0, 0));
}

on_both_backends!(
    a_fire_that_never_became_a_job_is_late_and_told_once,
    a_job_done_by_its_deadline_is_not_late,
    five_hundred_quarantines_are_one_message,
    the_owner_webhook_is_signed_retried_and_pinned,
    owners_sends_wait_for_their_hosts_rate_limit,
);

/// The owner webhook gets the notice signed (Standard Webhooks), retried after a 503 with the
/// same id, each attempt recorded; its body is the documented contract.
async fn the_owner_webhook_is_signed_retried_and_pinned(t: &TestLedger) {
    use crate::common::peers::Receiver;
    let receiver = Receiver::start(Arc::new(|_: &str, nth: usize, _| match nth {
        1 => (503, Some("1".to_string()), std::time::Duration::ZERO),
        _ => (200, None, std::time::Duration::ZERO),
    }))
    .await;
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    // SAFETY: set once, before the notifier reads it; every test uses the same value.
    unsafe { std::env::set_var("DAWNPOST_TEST_OWNER_SECRET", SECRET) };
    let hook = format!(
        "owner_webhook = {{ url = \"{}\", secret_env = \"DAWNPOST_TEST_OWNER_SECRET\" }}",
        receiver.url("owners")
    );
    let p = Project::new(
        &owned_report("wh", "0 30 6 30 11 *", "08:00", &hook).replace(
            "owners = [\"lead@example.com\", \"second@example.com\"]",
            "",
        ),
    );
    p.write("config/dawnpost.toml", "[retry]\nbase = \"1s\"\n");
    let rig = Rig::new(&p, t, at(2026, 11, 30, 8, 0));
    let first = rig.round().await;
    assert_eq!((first.messages, first.sent, first.retried), (1, 0, 1));
    rig.clock.set(at(2026, 11, 30, 8, 5));
    let second = rig.round().await;
    assert_eq!((second.sent, second.retried), (1, 0));
    let hits = receiver.hits_for("owners");
    assert_eq!(hits.len(), 2);
    let id = hits[1].header("webhook-id").expect("id");
    assert_eq!(id, "wh:2026-11-30/late/webhook");
    assert_eq!(
        hits[0].header("webhook-id"),
        Some(id.clone()),
        "the same id on a retry"
    );
    let ts: i64 = hits[1]
        .header("webhook-timestamp")
        .expect("ts")
        .parse()
        .expect("number");
    let signature = hits[1].header("webhook-signature").expect("signed");
    dawnpost::delivery::signing::Secret::parse(SECRET)
        .expect("secret")
        .verify(&id, ts, &hits[1].body, &signature)
        .expect("a valid signature");
    let body: serde_json::Value = serde_json::from_slice(&hits[1].body).expect("json");
    crate::contracts::pinned("owner-notice-v1.json", &body);
    let sends = t
        .ledger
        .notices()
        .sends_of("wh:2026-11-30/late")
        .await
        .expect("sends");
    assert_eq!(sends.len(), 1);
    assert_eq!((sends[0].state.as_str(), sends[0].attempts), ("sent", 2));
}

/// Owners' emails go through the relay, and a `[[rate_limit]]` on it holds them as it holds
/// the reports' own: one a round at one send per 10 s, the other put back unattempted until
/// the budget allows it; a budget the pool spent (the daemon shares it) holds them too.
async fn owners_sends_wait_for_their_hosts_rate_limit(t: &TestLedger) {
    let p = Project::new(&owned_report("wh", "0 30 6 30 11 *", "08:00", ""));
    let limit = "[[rate_limit]]\nhost = \"127.0.0.1:2525\"\nper_second = 0.1\nburst = 1\n";
    p.write("config/dawnpost.toml", limit);
    let rig = Rig::new(&p, t, at(2026, 11, 30, 8, 0));
    let first = rig.round().await;
    assert_eq!((first.messages, first.sent, first.deferred), (1, 1, 1));
    assert_eq!(rig.outbox().len(), 1, "one owner told, the other waits");
    let sends = |t: &TestLedger| {
        let ledger = t.ledger.clone();
        async move {
            let sends = ledger.notices().sends_of("wh:2026-11-30/late").await;
            let sends = sends.expect("sends");
            sends
                .into_iter()
                .map(|s| (s.state, s.attempts))
                .collect::<Vec<_>>()
        }
    };
    let mut now = sends(t).await;
    now.sort();
    assert_eq!(
        now,
        [("pending".into(), 0), ("sent".into(), 1)],
        "no attempt counted"
    );
    assert!(
        (rig.metrics.render_text())
            .contains(r#"dawnpost_rate_limit_deferred_total{host="127.0.0.1:2525"} 1"#),
        "{}",
        rig.metrics.render_text()
    );

    rig.clock
        .set(at(2026, 11, 30, 8, 0) + chrono::Duration::seconds(5));
    let early = rig.round().await;
    assert_eq!(
        (early.sent, early.deferred),
        (0, 0),
        "not due before the budget allows"
    );
    rig.clock
        .set(at(2026, 11, 30, 8, 0) + chrono::Duration::seconds(10));
    let then = rig.round().await;
    assert_eq!((then.sent, then.deferred), (1, 0));
    assert_eq!(rig.outbox().len(), 2);
    assert_eq!(sends(t).await, [("sent".into(), 1), ("sent".into(), 1)]);

    // Sharing the pool's limits: a budget spent by a report's email holds the next notice.
    let shared = Arc::new(dawnpost::pool::limits::RateLimits::new(
        &rig.config.settings.rate_limits,
        &rig.config.settings.email.smtp_url,
        Arc::new(rig.clock.clone()),
    ));
    let nine = at(2026, 11, 30, 9, 0);
    rig.clock.set(nine);
    assert_eq!(shared.take("127.0.0.1:2525"), Ok(()), "the pool's send");
    let notifier = rig.notifier.with_limits(shared);
    t.ledger
        .jobs()
        .insert_many(&[job("wh:2026-11-30", nine)], nine)
        .await
        .expect("insert");
    let leased = t.ledger.leases().jobs(&params("w", nine, 10)).await;
    for j in leased.expect("lease") {
        let error = "HTTP 404 from the source";
        let quarantined = t.ledger.jobs().quarantine(&j.lease, error, nine).await;
        quarantined.expect("quarantine");
    }
    let held = notifier.run_once().await.expect("round");
    assert_eq!(
        (held.messages, held.sent, held.deferred),
        (1, 0, 2),
        "{held:?}"
    );
}

/// The real daemon, started after a report's deadline passed (its fire never became a job:
/// `catch_up` is shorter than the gap), tells the owner once through a real SMTP server
/// (aiosmtpd); started again, it tells nobody again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_past_a_deadline_tells_the_owner_exactly_once() {
    if !crate::common::python::has("aiosmtpd") {
        return;
    }
    let port = crate::common::python::free_port();
    let mail_dir = tempfile::tempdir().expect("tempdir");
    let mut smtp = crate::common::python::peer(
        "smtp_sink.py",
        [port.to_string().as_ref(), mail_dir.path().as_os_str()],
    )
    .await;
    // A zone where it is now between 12:00 and 12:59, so that 06:00 fired today and a
    // deadline two minutes ago is after it.
    let now = Utc::now();
    let offset = 12 - i64::from(chrono::Timelike::hour(&now));
    let zone = match offset {
        0 => "Etc/GMT".to_string(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    };
    let local = now + chrono::Duration::hours(offset) - chrono::Duration::minutes(2);
    let (due, date) = (
        local.format("%H:%M").to_string(),
        local.format("%Y-%m-%d").to_string(),
    );
    // It fires today only: yesterday's fire would be late too.
    let schedule = local.format("0 0 6 %-d %-m *").to_string();
    let p = Project::new(
        &owned_report("late-report", &schedule, &due, "")
            .replace("timezone = \"UTC\"", &format!("timezone = \"{zone}\""))
            .replace(", \"second@example.com\"", ""),
    );
    p.write(
        "config/dawnpost.toml",
        &format!(
            "[server]\nbind = \"127.0.0.1:0\"\n[schedule]\ncatch_up = \"1m\"\n[email]\nfrom = \"Reports <reports@dawnpost.test>\"\ntransport = \"smtp\"\nsmtp_url = \"smtp://127.0.0.1:{port}\"\ntimeout = \"10s\"\n"
        ),
    );
    let to_lead = || {
        std::fs::read_dir(mail_dir.path())
            .expect("dir")
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .ends_with("-lead@example.com.eml")
            })
            .map(|e| std::fs::read_to_string(e.path()).expect("read"))
            .collect::<Vec<_>>()
    };
    let late_line = format!("dawnpost_report_late{{report=\"late-report\",date=\"{date}\"}} 1");

    let daemon = crate::common::daemon::Daemon::start(crate::common::daemon::run_command(&p));
    crate::common::daemon::wait_for_metric(
        &daemon.addr,
        "dawnpost_owner_notice_sends_total{outcome=\"sent\"} 1",
    )
    .await;
    crate::common::daemon::wait_for_metric(&daemon.addr, &late_line).await;
    let (code, log) = daemon.stop();
    assert_eq!(code, Some(0), "{log}");
    let mails = to_lead();
    assert_eq!(mails.len(), 1, "{log}");
    let (subject, body) = read_mail(&mails[0]);
    assert_eq!(
        subject,
        format!("Late: Report late-report — {date} not delivered by {due}")
    );
    assert!(body.contains("no job"), "{body}");
    assert!(
        !log.contains("lead@example.com"),
        "the owner's address is redacted: {log}"
    );

    // Started again, still past the deadline: the report is late, and nobody is told again.
    let daemon = crate::common::daemon::Daemon::start(crate::common::daemon::run_command(&p));
    crate::common::daemon::wait_for_metric(&daemon.addr, &late_line).await;
    let (code, log) = daemon.stop();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(to_lead().len(), 1, "told exactly once: {log}");
    drop(smtp.stdin.take());
    let _ = smtp.wait().await;
}
