//! Random ledgers for the retention suites: jobs of every shape built through the ledger's own
//! transitions, their footprint, and policies.
// Shared with tests/retention_property.rs, its own binary, which uses what `it` does not.
#![allow(dead_code)]

use dawnpost::ledger::Via;
use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use dawnpost::ManualClock;
use dawnpost::config::RetentionPolicy;
use dawnpost::domain::keys::{DeliveryKey, JobKey, ReportId};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::domain::window::Window;
use dawnpost::ledger::{
    DeliveryNext, JobState, LeaseParams, Ledger, NewAttempt, NewDelivery, NewJob,
};
use dawnpost::report::artifact::ArtifactStore;
use dawnpost::report::render::Rendered;
use dawnpost::services::sweeper::{Sweeper, SweeperConfig};
use proptest::prelude::*;
use tempfile::TempDir;

use super::at;

pub fn t0() -> DateTime<Utc> {
    at(2026, 9, 1, 6, 0)
}

/// What a generated job ends up as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Ready,
    Rendering,
    /// Rendered, one delivery still pending.
    Delivering,
    Done,
    Quarantined,
    Cancelled,
    /// Quarantined long ago, then redriven: in flight again.
    Redriven,
}

#[derive(Debug, Clone)]
pub struct Spec {
    pub report: String,
    pub shape: Shape,
    /// When it became terminal, in hours after t0.
    pub finished_h: i64,
}

pub struct World {
    pub store: ArtifactStore,
    _dir: TempDir,
    pub policy_file: std::path::PathBuf,
}

impl World {
    pub fn new(policy: &str) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ArtifactStore::open("file://artifacts", dir.path()).expect("store");
        let policy_file = dir.path().join("retention.toml");
        std::fs::write(&policy_file, policy).expect("write policy");
        World {
            store,
            _dir: dir,
            policy_file,
        }
    }

    pub fn sweeper(&self, ledger: &Ledger, now: DateTime<Utc>) -> Sweeper {
        let policy = RetentionPolicy::load(&self.policy_file).unwrap_or_else(|e| panic!("{e}"));
        Sweeper::new(
            ledger.clone(),
            self.store.clone(),
            Arc::new(ManualClock::new(now)),
            SweeperConfig {
                batch_size: 3, // small, so sweeps cross batch boundaries
                ..SweeperConfig::new(self.policy_file.clone())
            },
            policy,
        )
    }
}

pub fn lease(now: DateTime<Utc>) -> LeaseParams {
    LeaseParams {
        owner: "builder".into(),
        now,
        lease_for: Duration::minutes(5),
        limit: 1,
    }
}

pub fn attempt(class: ResponseClass, now: DateTime<Utc>) -> NewAttempt {
    NewAttempt {
        requested_at: now,
        finished_at: now,
        class,
        code: None,
        retry_after: None,
        reason: Some("r".into()),
        diagnostics: Some("verbose transport detail".into()),
    }
}

/// Builds one job of the given shape through the ledger's own transitions.
pub async fn build(l: &Ledger, store: &ArtifactStore, i: usize, spec: &Spec) -> JobKey {
    let date = NaiveDate::from_ymd_opt(2026, 9, 1).expect("date") + Duration::days(i as i64);
    let key = JobKey::new(ReportId::parse(&spec.report).expect("id"), date);
    let start = t0();
    l.jobs()
        .insert_many(
            &[NewJob {
                key: key.clone(),
                fire_at: start,
                window: Window {
                    start: start - Duration::days(1),
                    end: start,
                },
                ready_at: start,
                origin: dawnpost::ledger::JobOrigin::Backfill,
            }],
            start,
        )
        .await
        .expect("insert");
    let k = key.clone();
    let finished = start + Duration::hours(spec.finished_h);
    match spec.shape {
        Shape::Ready => return k,
        Shape::Cancelled => {
            l.jobs()
                .cancel(
                    &k,
                    &dawnpost::ledger::Audit::new("ops", "not needed", Via::Cli).expect("audited"),
                    finished,
                )
                .await
                .expect("cancel");
            return k;
        }
        _ => {}
    }
    let mut leased = None;
    for j in l
        .leases()
        .jobs(&LeaseParams {
            limit: 100,
            ..lease(start)
        })
        .await
        .expect("lease")
    {
        if j.job.key == k {
            leased = Some(j);
        } else {
            l.jobs().release(&j.lease, start).await.expect("release");
        }
    }
    let leased = leased.expect("this job's lease");
    if spec.shape == Shape::Rendering {
        return k;
    }
    let rendered = Rendered {
        html: format!("<p>{k}</p>"),
        text: k.to_string(),
        csv: None,
        parts: Default::default(),
        images: Default::default(),
        xlsx: None,
    };
    let (artifact, _) = store
        .write(&spec.report, &date.to_string(), &Arc::new(rendered))
        .await
        .expect("artifact");
    let deliveries = vec![NewDelivery {
        key: DeliveryKey::new(
            key.clone(),
            dawnpost::delivery::email::KIND,
            "ops@example.com",
        ),
    }];
    l.jobs()
        .rendered(&leased.lease, &artifact, &deliveries, start)
        .await
        .expect("rendered");
    if spec.shape == Shape::Delivering {
        return k;
    }
    // Lease this job's delivery; hand back any other job's that came along.
    let mut dl = None;
    for d in l
        .leases()
        .deliveries(&LeaseParams {
            limit: 100,
            ..lease(start)
        })
        .await
        .expect("lease")
    {
        if d.delivery.key.job() == &k {
            dl = Some(d);
        } else {
            l.deliveries()
                .release(&d.lease, start)
                .await
                .expect("release");
        }
    }
    let dl = dl.expect("this job's delivery");
    let (class, next) = match spec.shape {
        Shape::Done => (ResponseClass::Accepted, DeliveryNext::Sent),
        _ => (ResponseClass::Permanent, DeliveryNext::Quarantine),
    };
    l.deliveries()
        .finish(&dl.lease, &attempt(class, finished), next)
        .await
        .expect("finish");
    l.jobs().settle(&k, finished).await.expect("settle");
    if spec.shape == Shape::Redriven {
        l.jobs()
            .redrive(
                &k,
                &dawnpost::ledger::Audit::new("ops", "again", Via::Cli).expect("audited"),
                finished + Duration::hours(1),
            )
            .await
            .expect("redrive");
    }
    k
}

/// Everything retention could remove from one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    pub row: bool,
    pub state: Option<JobState>,
    pub objects: usize,
    pub diagnostics: i64,
}

pub async fn footprint(l: &Ledger, store: &ArtifactStore, key: &JobKey) -> Footprint {
    let (report, date) = (key.report().as_str(), key.date().to_string());
    let job = l.jobs().get(key).await.expect("get");
    let diagnostics = if job.is_some() {
        l.retention()
            .sizes(key)
            .await
            .expect("sizes")
            .diagnostics_rows
    } else {
        0
    };
    Footprint {
        row: job.is_some(),
        state: job.map(|j| j.state),
        objects: store.count(report, &date).await.expect("count"),
        diagnostics,
    }
}

pub fn days(d: i64) -> Duration {
    Duration::days(d)
}

pub fn policy_text(a: i64, d: i64, ledger: i64, over: Option<(i64, i64)>) -> String {
    let mut s = format!(
        "artifact = \"{a}d\"\ndiagnostics = \"{d}d\"\nledger = \"{ledger}d\"\nsweep_every = \"1m\"\n"
    );
    if let Some((oa, ol)) = over {
        s.push_str(&format!(
            "[[override]]\nreports = \"keep-*\"\nartifact = \"{oa}d\"\nledger = \"{ol}d\"\n"
        ));
    }
    s
}

pub fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Ready),
        Just(Shape::Rendering),
        Just(Shape::Delivering),
        Just(Shape::Done),
        Just(Shape::Quarantined),
        Just(Shape::Cancelled),
        Just(Shape::Redriven),
    ]
}

pub fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just("keep-a"), Just("plain"), Just("other")],
        shape(),
        0i64..(50 * 24),
    )
        .prop_map(|(report, shape, finished_h)| Spec {
            report: report.to_string(),
            shape,
            finished_h,
        })
}
