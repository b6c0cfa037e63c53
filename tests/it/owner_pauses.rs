//! The owners' notices and the pool's paused hosts (`HostThrottle`): the daemon gives the
//! notifier the pool's throttle, so a host a 429 paused holds a notice to it, unattempted, until
//! the pause ends, and a 429 to a notice pauses the host for the pool's deliveries too, for as
//! long as a delivery's 429 would.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dawnpost::ManualClock;
use dawnpost::delivery::notice::LateBoard;
use dawnpost::pool::throttle::{Gate, HostThrottle};
use dawnpost::report::catalog::Catalog;
use dawnpost::runtime::metrics::Metrics;
use dawnpost::services::notifier::Notifier;

use crate::common::peers::Receiver;
use crate::common::{Project, TestLedger, at};
use crate::owners::owned_report;

/// A report whose 06:30 fire never became a job, due by 08:00, told to an owner webhook at
/// `url` (no owners' emails); retries start at one second.
fn project(url: &str) -> Project {
    let hook = format!("owner_webhook = {{ url = \"{url}\" }}");
    let p = Project::new(
        &owned_report("wh", "0 30 6 30 11 *", "08:00", &hook).replace(
            "owners = [\"lead@example.com\", \"second@example.com\"]",
            "",
        ),
    );
    p.write("config/dawnpost.toml", "[retry]\nbase = \"1s\"\n");
    p
}

/// The notifier of `p` at `now`, sharing `throttle`, and its clock.
fn notifier(
    p: &Project,
    t: &TestLedger,
    now: DateTime<Utc>,
    throttle: &Arc<HostThrottle>,
) -> (Notifier, ManualClock) {
    let config = p.load();
    let clock = ManualClock::new(now);
    let catalog = Catalog::load(&config).expect("catalog");
    let notifier = Notifier::new(
        &config,
        (t.ledger.clone(), catalog, Arc::new(clock.clone())),
        Arc::new(Metrics::default()),
        LateBoard::default(),
    )
    .expect("notifier")
    .with_throttle(throttle.clone());
    (notifier, clock)
}

/// The send's state and attempts.
async fn send_state(t: &TestLedger) -> Vec<(String, i64)> {
    let sends = t.ledger.notices().sends_of("wh:2026-11-30/late").await;
    (sends.expect("sends").into_iter())
        .map(|s| (s.state, s.attempts))
        .collect()
}

/// A host the pool paused (a 429 with Retry-After) holds the notice: put back unattempted, due
/// at the pause's end, then sent.
async fn a_host_the_pool_paused_holds_the_owners_notice(t: &TestLedger) {
    let receiver =
        Receiver::start(Arc::new(|_: &str, _: usize, _| (200, None, Duration::ZERO))).await;
    let url = receiver.url("owners");
    let host = dawnpost::domain::keys::host_port(&url).expect("host");
    let eight = at(2026, 11, 30, 8, 0);
    let throttle = Arc::new(HostThrottle::default());
    throttle.pause(&host, eight + chrono::Duration::seconds(30));
    let (notifier, clock) = notifier(&project(&url), t, eight, &throttle);

    let held = notifier.run_once().await.expect("round");
    assert_eq!(
        (held.messages, held.sent, held.deferred),
        (1, 0, 1),
        "{held:?}"
    );
    assert!(
        receiver.hits_for("owners").is_empty(),
        "nothing reached the paused host"
    );
    assert_eq!(
        send_state(t).await,
        [("pending".into(), 0)],
        "no attempt counted"
    );

    clock.set(eight + chrono::Duration::seconds(29));
    let early = notifier.run_once().await.expect("round");
    assert_eq!(
        (early.sent, early.deferred),
        (0, 0),
        "not due before the pause ends"
    );
    clock.set(eight + chrono::Duration::seconds(30));
    let then = notifier.run_once().await.expect("round");
    assert_eq!((then.sent, then.deferred), (1, 0), "{then:?}");
    assert_eq!(receiver.hits_for("owners").len(), 1);
    assert_eq!(send_state(t).await, [("sent".into(), 1)]);
}

/// A 429 to a notice pauses its host for the pool until the Retry-After; the answer after it
/// ends the pause.
async fn a_429_to_an_owners_notice_pauses_the_host_for_the_pool(t: &TestLedger) {
    let receiver = Receiver::start(Arc::new(|_: &str, nth: usize, _| match nth {
        1 => (429, Some("20".to_string()), Duration::ZERO),
        _ => (200, None, Duration::ZERO),
    }))
    .await;
    let url = receiver.url("owners");
    let host = dawnpost::domain::keys::host_port(&url).expect("host");
    let eight = at(2026, 11, 30, 8, 0);
    let throttle = Arc::new(HostThrottle::default());
    let (notifier, clock) = notifier(&project(&url), t, eight, &throttle);

    let first = notifier.run_once().await.expect("round");
    assert_eq!((first.sent, first.retried), (0, 1), "{first:?}");
    let until = eight + chrono::Duration::seconds(20);
    assert_eq!(throttle.paused_until(&host, eight), Some(until));
    assert_eq!(
        throttle.gate(&host, eight),
        Gate::WaitUntil(until),
        "the pool's deliveries to the host wait too"
    );

    clock.set(eight + chrono::Duration::minutes(1));
    let then = notifier.run_once().await.expect("round");
    assert_eq!((then.sent, then.deferred), (1, 0), "{then:?}");
    assert_eq!(receiver.hits_for("owners").len(), 2);
    let later = eight + chrono::Duration::minutes(1);
    assert_eq!(throttle.paused_until(&host, later), None);
    assert_eq!(
        throttle.gate(&host, later),
        Gate::Go,
        "the host answers again"
    );
}

/// A 429 without Retry-After to a notice pauses its host until the notice's own retry, as a
/// delivery's does: at the second attempt the backoff (1.6–2 s here) outlasts the base delay
/// (1 s), so a pause of the base delay alone would let the pool's deliveries in early.
async fn a_429_without_retry_after_pauses_the_host_until_the_notices_retry(t: &TestLedger) {
    let receiver =
        Receiver::start(Arc::new(|_: &str, _: usize, _| (429, None, Duration::ZERO))).await;
    let url = receiver.url("owners");
    let host = dawnpost::domain::keys::host_port(&url).expect("host");
    let eight = at(2026, 11, 30, 8, 0);
    let throttle = Arc::new(HostThrottle::default());
    let (notifier, clock) = notifier(&project(&url), t, eight, &throttle);
    let first = notifier.run_once().await.expect("round");
    assert_eq!(first.retried, 1, "{first:?}");

    let later = eight + chrono::Duration::seconds(5);
    clock.set(later);
    let second = notifier.run_once().await.expect("round");
    assert_eq!(second.retried, 1, "{second:?}");
    assert_eq!(send_state(t).await, [("pending".into(), 2)]);
    let due: Vec<(i64,)> = t
        .rows(|p| format!("SELECT ready_at FROM {p}notice_sends"))
        .await;
    let retry = DateTime::from_timestamp_millis(due[0].0).expect("instant");
    assert!(
        retry >= later + chrono::Duration::milliseconds(1600),
        "the second retry backs off: {retry}"
    );
    assert_eq!(
        throttle.paused_until(&host, later),
        Some(retry),
        "the host waits as long as the notice"
    );
}

/// A notice that never reached its host (its secret's variable is unset) leaves the host's
/// pause as it was: once the pause ends, the pool's deliveries still send one probe first.
async fn a_notice_that_never_reached_its_host_leaves_the_pause(t: &TestLedger) {
    let receiver =
        Receiver::start(Arc::new(|_: &str, _: usize, _| (200, None, Duration::ZERO))).await;
    let url = receiver.url("owners");
    let host = dawnpost::domain::keys::host_port(&url).expect("host");
    let hook = format!(
        "owner_webhook = {{ url = \"{url}\", secret_env = \"DAWNPOST_TEST_NEVER_SET_SECRET\" }}"
    );
    let p = Project::new(
        &owned_report("wh", "0 30 6 30 11 *", "08:00", &hook).replace(
            "owners = [\"lead@example.com\", \"second@example.com\"]",
            "",
        ),
    );
    let eight = at(2026, 11, 30, 8, 0);
    let throttle = Arc::new(HostThrottle::default());
    throttle.pause(&host, eight - chrono::Duration::seconds(1));
    let (notifier, _clock) = notifier(&p, t, eight, &throttle);

    let round = notifier.run_once().await.expect("round");
    assert_eq!((round.sent, round.quarantined), (0, 1), "{round:?}");
    assert!(receiver.hits_for("owners").is_empty(), "nothing was sent");
    assert_eq!(throttle.gate(&host, eight), Gate::Go, "one delivery probes");
    assert_eq!(
        throttle.gate(&host, eight),
        Gate::WaitUntil(eight + dawnpost::pool::throttle::PROBE_WAIT),
        "the others wait for the probe's answer"
    );
}

on_both_backends!(
    a_host_the_pool_paused_holds_the_owners_notice,
    a_429_to_an_owners_notice_pauses_the_host_for_the_pool,
    a_429_without_retry_after_pauses_the_host_until_the_notices_retry,
    a_notice_that_never_reached_its_host_leaves_the_pause,
);
