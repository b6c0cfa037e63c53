//! The rescuer settles a delivering job whose deliveries all finished only once its worker
//! must have stopped: right after the last finish the pool's next group commit settles it (the
//! rescuer settling it then, and saying a worker stopped, told of a fault that did not happen);
//! well after, the rescuer does, both backends.

use chrono::Duration;

use crate::common::fixtures::{attempt, rendered_job, t0};
use crate::common::{TestLedger, jk};
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::{DeliveryNext, JobState, RescueBudget};

async fn a_job_its_pool_is_about_to_settle_is_left_to_it(t: &TestLedger) {
    let l = &t.ledger;
    let leases = rendered_job(t, "a:2026-10-25", &["x@example.com"]).await;
    (l.deliveries().finish(
        &leases[0],
        &attempt(ResponseClass::Accepted, t0()),
        DeliveryNext::Sent,
    ))
    .await
    .expect("sent");
    let state = async || {
        l.jobs()
            .get(&jk("a:2026-10-25"))
            .await
            .expect("get")
            .expect("job")
            .state
    };
    assert_eq!(
        state().await,
        JobState::Delivering,
        "its settle comes with the next commit"
    );

    let budget = RescueBudget::default();
    let soon = l
        .leases()
        .rescue(t0() + Duration::seconds(2), &budget)
        .await
        .expect("rescue");
    assert_eq!(soon.settled, 0, "the pool settles it: no worker stopped");
    assert_eq!(state().await, JobState::Delivering);

    let later = l
        .leases()
        .rescue(t0() + Duration::seconds(31), &budget)
        .await
        .expect("rescue");
    assert_eq!(later.settled, 1, "its worker stopped before settling it");
    assert_eq!(state().await, JobState::Done);
}

crate::on_both_backends!(a_job_its_pool_is_about_to_settle_is_left_to_it);
