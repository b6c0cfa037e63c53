//! Ledger fixtures shared by the store suites: a job, its destinations, leases, attempts.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use dawnpost::domain::keys::{DeliveryKey, JobKey, ReportId};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::domain::window::Window;
use dawnpost::ledger::{
    DeliveryLease, DeliveryNext, JobLease, JobOrigin, LeaseParams, LeasedJob, NewAttempt,
    NewDelivery, NewJob,
};
use dawnpost::report::artifact::ArtifactRef;

use super::{TestLedger, at};

pub fn t0() -> DateTime<Utc> {
    at(2026, 10, 25, 5, 30)
}

pub fn new_job(report: &str, date: &str, ready_at: DateTime<Utc>) -> NewJob {
    let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date");
    NewJob {
        key: JobKey::new(ReportId::parse(report).expect("id"), date),
        fire_at: ready_at,
        window: Window {
            start: ready_at - Duration::hours(30),
            end: ready_at - Duration::hours(6),
        },
        ready_at,
        origin: JobOrigin::Schedule,
    }
}

pub fn params(owner: &str, now: DateTime<Utc>, limit: u32) -> LeaseParams {
    LeaseParams {
        owner: owner.into(),
        now,
        lease_for: Duration::minutes(5),
        limit,
    }
}

pub fn artifact() -> ArtifactRef {
    ArtifactRef {
        html_key: "artifacts/r/2026-10-25/abc.html".into(),
        text_key: "artifacts/r/2026-10-25/abc.txt".into(),
        csv_key: None,
        sha256: "abc".into(),
        bytes: 1234,
        parts: Vec::new(),
    }
}

pub fn destinations(job: &str, emails: &[&str]) -> Vec<NewDelivery> {
    let key: JobKey = job.parse().expect("job key");
    emails
        .iter()
        .map(|e| NewDelivery {
            key: DeliveryKey::new(key.clone(), dawnpost::delivery::email::KIND, *e),
        })
        .collect()
}

pub fn attempt(class: ResponseClass, now: DateTime<Utc>) -> NewAttempt {
    NewAttempt {
        requested_at: now,
        finished_at: now + Duration::milliseconds(120),
        class,
        code: Some(250),
        retry_after: None,
        reason: Some("250 ok".into()),
        diagnostics: Some("<- 250 2.0.0 queued".into()),
    }
}

/// Inserts one job, renders it with the given destinations, and returns the delivery leases.
/// Jobs `report:date`, ready at [`t0`] and inserted then.
pub async fn ready_jobs(t: &TestLedger, keys: &[&str]) {
    let jobs: Vec<NewJob> = keys
        .iter()
        .map(|k| {
            let (report, date) = k.split_once(':').expect("key");
            new_job(report, date, t0())
        })
        .collect();
    t.ledger
        .jobs()
        .insert_many(&jobs, t0())
        .await
        .expect("insert");
}

/// The lease `leased` holds on the job `key`.
pub fn lease_of(leased: &[LeasedJob], key: &str) -> JobLease {
    let job = leased.iter().find(|j| j.job.key == key).expect("leased");
    job.lease.clone()
}

pub async fn rendered_job(t: &TestLedger, key: &str, emails: &[&str]) -> Vec<DeliveryLease> {
    let l = &t.ledger;
    ready_jobs(t, &[key]).await;
    let leased = l
        .leases()
        .jobs(&params("w1", t0(), 10))
        .await
        .expect("lease");
    let lease = lease_of(&leased, key);
    l.jobs()
        .rendered(&lease, &artifact(), &destinations(key, emails), t0())
        .await
        .expect("rendered");
    l.leases()
        .deliveries(&params("w1", t0(), 100))
        .await
        .expect("lease deliveries")
        .into_iter()
        .map(|d| d.lease)
        .collect()
}

/// A rendered job's first delivery sent and its second quarantined (permanent), at [`t0`].
pub async fn sent_and_quarantined(t: &TestLedger, leases: &[DeliveryLease]) {
    t.ledger
        .deliveries()
        .finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    t.ledger
        .deliveries()
        .finish(
            &leases[1],
            &attempt(ResponseClass::Permanent, t0()),
            DeliveryNext::Quarantine,
        )
        .await
        .expect("quarantine");
}

/// `n` jobs `REPORT:2026-09-DD` (from day `first_day`) whose one delivery to `email` is
/// quarantined with `class`.
pub async fn dead_letters(
    t: &TestLedger,
    report: &str,
    first_day: u32,
    n: u32,
    email: &str,
    class: ResponseClass,
) {
    for day in first_day..first_day + n {
        let key = format!("{report}:2026-09-{day:02}");
        let leases = rendered_job(t, &key, &[email]).await;
        t.ledger
            .deliveries()
            .finish(&leases[0], &attempt(class, t0()), DeliveryNext::Quarantine)
            .await
            .expect("quarantine");
    }
}

/// Sends (or quarantines again, `Permanent`) every delivery due now, as the pool would.
pub async fn deliver_due(
    t: &TestLedger,
    now: chrono::DateTime<chrono::Utc>,
    class: ResponseClass,
) -> usize {
    let leased = t
        .ledger
        .leases()
        .deliveries(&params("pool", now, 100))
        .await
        .expect("lease");
    for d in &leased {
        let next = if class == ResponseClass::Accepted {
            DeliveryNext::Sent
        } else {
            DeliveryNext::Quarantine
        };
        t.ledger
            .deliveries()
            .finish(&d.lease, &attempt(class, now), next)
            .await
            .expect("finish");
    }
    leased.len()
}

/// A job `job` whose one email, to `address`, was sent (accepted at [`t0`]): its delivery key.
pub async fn sent_email(t: &TestLedger, job: &str, address: &str) -> DeliveryKey {
    let leases = rendered_job(t, job, &[address]).await;
    (t.ledger.deliveries())
        .finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, t0()),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    leases[0].key().clone()
}

/// The Message-ID dawnpost gave delivery `key`'s email (from `dawnpost.test`).
pub fn message_id_of(key: &DeliveryKey) -> String {
    let digest = dawnpost::delivery::email::message::message_digest(&key.to_string());
    format!("<{digest}.dawnpost@dawnpost.test>")
}

/// A provider's documented sample payload, `tests/support/bounces/<name>`.
pub fn bounce_sample(name: &str) -> String {
    let path = format!(
        "{}/tests/support/bounces/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
