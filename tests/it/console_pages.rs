//! The console's overview, reports and retention pages over real HTTP, both backends: the facts
//! each shows (attempts by class and the chart, paused hosts, the last sweep, a policy reload
//! error, next fires in local time and UTC, a report's 14-day row, a retention dry run).

use crate::common;

use chrono::Duration;
use common::console::{get, page, sign_in};
use common::fixtures::*;
use common::ops_server::{Server, VIEWER_TOKEN, start};
use common::{TestLedger, jk};
use dawnpost::domain::clock::Clock;
use dawnpost::domain::outcome::ResponseClass;
use dawnpost::ledger::DeliveryNext;
use reqwest::StatusCode;

/// Job `warehouse-17:2026-11-29`, its delivery to `ops@example.com` sent and one to
/// `bad@example.com` quarantined `minutes` before the server's now; settled.
async fn recent_attempts(s: &Server, t: &TestLedger, minutes: i64) {
    let key = "warehouse-17:2026-11-29";
    let leases = rendered_job(t, key, &["ops@example.com", "bad@example.com"]).await;
    let when = s.clock.now() - Duration::minutes(minutes);
    t.ledger
        .deliveries()
        .finish(
            &leases[0],
            &attempt(ResponseClass::Accepted, when),
            DeliveryNext::Sent,
        )
        .await
        .expect("sent");
    t.ledger
        .deliveries()
        .finish(
            &leases[1],
            &attempt(ResponseClass::Permanent, when),
            DeliveryNext::Quarantine,
        )
        .await
        .expect("quarantined");
    t.ledger
        .jobs()
        .settle(&jk(key), when)
        .await
        .expect("settle");
}

/// The rows of the first table after `heading` in `html`.
fn section<'a>(html: &'a str, heading: &str) -> &'a str {
    let start = html
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} in {html}"));
    let rest = &html[start..];
    &rest[..rest.find("</div>").unwrap_or(rest.len())]
}

async fn the_overview_shows_attempts_pauses_sweeps_and_next_fires(t: &TestLedger) {
    let s = start(t).await;
    recent_attempts(&s, t, 30).await;
    let now = s.clock.now();
    s.pipeline
        .throttle
        .pause("hooks.carrier.example:443", now + Duration::minutes(10));
    s.sweeper.run_once().await.expect("sweep");
    s.project
        .write("config/retention.toml", "ledger = \"1d\"\n");
    assert!(s.sweeper.reload().is_err());

    let cookie = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, "/ui/", &cookie).await;
    let hour = section(&html, "Attempts, last hour");
    assert!(
        hour.contains(">accepted<") && hour.contains(">permanent<"),
        "{hour}"
    );
    assert!(
        html.contains("<svg") && html.contains("2 attempt(s), accepted 1, permanent 1"),
        "{html}"
    );
    assert!(
        html.contains("class=\"c-accepted\""),
        "bars by class: {html}"
    );
    assert!(
        html.contains("hooks.carrier.example:443 until") && html.contains("10m left"),
        "{html}"
    );
    assert!(
        html.contains("Last sweep") && !html.contains("none since this process started"),
        "{html}"
    );
    assert!(
        html.contains("must be at least artifact"),
        "the reload error: {html}"
    );
    // warehouse-17 fires at 06:30 in Berlin: 05:30 UTC in winter.
    assert!(
        html.contains("Tue 2026-12-01 06:30 CET (UTC+01:00)"),
        "{html}"
    );
    assert!(html.contains("2026-12-01 05:30:00 UTC"), "{html}");

    // An attempt older than an hour counts in the day only.
    s.clock.advance(Duration::hours(2));
    let html = page(&s, "/ui/", &cookie).await;
    let hour = section(&html, "Attempts, last hour");
    assert!(hour.contains("none"), "{hour}");
    let day = section(&html, "Attempts, last 24 hours");
    assert!(day.contains(">accepted<"), "{day}");
    s.cancel.cancel();
}

async fn the_reports_page_shows_schedules_redacted_destinations_and_14_days(t: &TestLedger) {
    let s = start(t).await;
    recent_attempts(&s, t, 30).await;
    ready_jobs(t, &["warehouse-17:2026-11-30"]).await;
    let cookie = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, "/ui/reports", &cookie).await;
    assert!(
        html.contains("0 30 6 * * *") && html.contains("Europe/Berlin"),
        "{html}"
    );
    assert!(
        html.contains("o***@example.com") && !html.contains("ops@example.com"),
        "{html}"
    );
    assert!(
        html.contains("Tue 2026-12-01 06:30 CET"),
        "next fire: {html}"
    );
    assert!(
        html.contains(", reading 2026-11-30"),
        "the window it reads: {html}"
    );
    let days = html.matches("class=\"day ").count();
    assert_eq!(days, 14, "{html}");
    assert!(html.contains("title=\"2026-11-29: quarantined\""), "{html}");
    assert!(html.contains("title=\"2026-11-30: ready\""), "{html}");
    assert!(
        html.contains("title=\"2026-11-17: none\""),
        "the first of 14 days: {html}"
    );
    assert!(
        html.contains("href=\"/ui/jobs/warehouse-17:2026-11-29\""),
        "{html}"
    );
    s.cancel.cancel();
}

async fn the_retention_page_shows_the_policy_a_dry_run_and_sweeps(t: &TestLedger) {
    let s = start(t).await;
    recent_attempts(&s, t, 30).await;
    let cookie = sign_in(&s, VIEWER_TOKEN).await;
    let html = page(&s, "/ui/retention", &cookie).await;
    assert!(
        html.contains("every other report") && html.contains(">7d<") && html.contains(">30d<"),
        "{html}"
    );
    assert!(
        html.contains("No sweep since this process started"),
        "{html}"
    );

    // Forty days on, the finished job's artifact, diagnostics and rows would all go.
    let html = page(&s, "/ui/retention?as_of=2027-01-10", &cookie).await;
    let table = section(&html, "deleting nothing");
    assert!(
        table.contains("artifact</th><td class=\"num\">1</td>"),
        "{table}"
    );
    assert!(
        table.contains("ledger</th><td class=\"num\">1</td>"),
        "{table}"
    );
    assert!(
        html.contains("href=\"/ui/jobs/warehouse-17:2026-11-29\""),
        "{html}"
    );
    assert!(
        t.ledger
            .jobs()
            .get(&jk("warehouse-17:2026-11-29"))
            .await
            .expect("get")
            .is_some(),
        "a dry run"
    );

    let r = get(&s, "/ui/retention?as_of=soon", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);

    s.sweeper.run_once().await.expect("sweep");
    s.project
        .write("config/retention.toml", "artifact = \"never\"\n");
    assert!(s.sweeper.reload().is_err());
    let html = page(&s, "/ui/retention", &cookie).await;
    assert!(
        html.contains("did not validate") && html.contains("artifact"),
        "{html}"
    );
    assert!(!html.contains("No sweep since"), "{html}");
    s.cancel.cancel();
}

on_both_backends!(
    the_overview_shows_attempts_pauses_sweeps_and_next_fires,
    the_reports_page_shows_schedules_redacted_destinations_and_14_days,
    the_retention_page_shows_the_policy_a_dry_run_and_sweeps,
);
