//! A SQLite node whose wall clock ran ahead wrote leases and retry times far ahead; restarted
//! with the right clock, its rescuer brings them back within a lease and the retry policy's
//! longest wait, so the step back costs at most that (it left deliveries waiting hours). On
//! PostgreSQL the nodes keep the ledger's clock and nothing moves.

use std::sync::Arc;

use chrono::Duration;
use common::TestLedger;
use common::fixtures::{attempt, rendered_job, t0};
use dawnpost::ManualClock;
use dawnpost::delivery::retry::RetryPolicy;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{Bounds, DeliveryNext, DeliveryState};
use dawnpost::services::rescuer::{Rescuer, RescuerConfig};

use crate::common;

#[tokio::test]
async fn what_a_clock_ahead_wrote_is_brought_back_within_a_lease_and_a_retry() {
    let t = TestLedger::sqlite().await;
    // Written two hours ahead: one delivery's retry, and another's lease (fixtures lease for
    // five minutes from t0, the clock that was ahead).
    let ahead = t0();
    let leases = rendered_job(&t, "w:2026-10-25", &["a@example.com", "b@example.com"]).await;
    let mut retry = attempt(ResponseClass::Transient, ahead);
    retry.code = None;
    let far = ahead + Duration::hours(2);
    (t.ledger.deliveries())
        .finish(&leases[0], &retry, DeliveryNext::Retry { ready_at: far })
        .await
        .expect("retry");

    // The right clock: two hours behind what wrote them.
    let now = ahead - Duration::hours(2);
    let policy = RetryPolicy::default();
    let lease = Duration::minutes(5);
    let bounds = Bounds::of(lease, &policy);
    assert_eq!(
        bounds.longest_wait,
        Duration::minutes(18),
        "15m Retry-After + 20% spread"
    );
    let clock = ManualClock::new(now);
    let config = RescuerConfig {
        bounds: Some(bounds),
        ..RescuerConfig::default()
    };
    let rescuer = Rescuer::new(t.ledger.clone(), Arc::new(clock.clone()), config);
    rescuer.run_once().await.expect("round");

    let waiting = (t.ledger.deliveries().get(leases[0].key()).await)
        .expect("get")
        .expect("row");
    assert_eq!(waiting.state, DeliveryState::Pending);
    assert_eq!(waiting.ready_at, now + bounds.longest_wait, "was {far}");
    let sending = (t.ledger.deliveries().get(leases[1].key()).await)
        .expect("get")
        .expect("row");
    assert_eq!(sending.lease_expires_at, Some(now + lease));

    // A lease later, the lease the fast clock wrote is rescued, not hours later.
    clock.advance(Duration::minutes(6));
    let counts = rescuer.run_once().await.expect("round");
    assert_eq!(counts.deliveries, 1, "{counts:?}");
}
