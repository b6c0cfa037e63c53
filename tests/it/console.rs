//! The ops console over real HTTP on port 0: login, sessions and roles, security headers, the
//! pages and their facts. Both backends.

use crate::common;

use common::console::{get, hidden, location, post_form, sign_in};
use common::fixtures::new_job;
use common::ops_server::{TOKEN, VIEWER_TOKEN, start};
use common::{TestLedger, at};
use dawnpost::server::console::CSP;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, SET_COOKIE};

async fn login_sets_a_strict_session_cookie_that_every_page_needs(t: &TestLedger) {
    let s = start(t).await;
    let r = get(&s, "/ui/", None).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/ui/login");
    for page in [
        "/ui/jobs",
        "/ui/jobs/warehouse-17:2026-11-29",
        "/ui/jobs/warehouse-17:2026-11-29/artifact",
        "/ui/dlq",
        "/ui/runbooks/1",
        "/ui/reports",
        "/ui/retention",
    ] {
        let r = get(&s, page, None).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{page}");
        assert_eq!(location(&r), "/ui/login", "{page}");
    }
    for action in [
        "/ui/jobs/warehouse-17:2026-11-29/redrive",
        "/ui/dlq/plan",
        "/ui/runbooks/1/start",
    ] {
        let r = post_form(&s, action, None, &[("by", "x"), ("reason", "y")]).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{action}");
    }
    assert_eq!(location(&get(&s, "/ui", None).await), "/ui/");

    let r = get(&s, "/ui/login", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[CONTENT_SECURITY_POLICY], CSP);
    let html = r.text().await.expect("body");
    assert!(html.contains(r#"name="token""#), "{html}");
    assert!(!html.contains("<script"), "no script");

    let r = post_form(&s, "/ui/login", None, &[("token", "not-the-token")]).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get(SET_COOKIE).is_none());
    assert!(r.text().await.expect("body").contains("not valid"));

    let r = post_form(&s, "/ui/login", None, &[("token", TOKEN)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/ui/");
    let set = r.headers()[SET_COOKIE].to_str().expect("ascii").to_string();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(flag), "{flag} in {set}");
    }
    assert!(!set.contains("Secure"), "no Secure on loopback: {set}");
    let cookie = set.split(';').next().expect("pair");
    // Among a browser's other cookies, quoted ones too, the session is still found.
    let among = format!("theme=\"dark\"; {cookie};lang=de");
    let r = get(&s, "/ui/", Some(&among)).await;
    assert_eq!(r.status(), StatusCode::OK, "{among}");

    let r = get(&s, "/ui/", Some(cookie)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[CONTENT_SECURITY_POLICY], CSP);
    let html = r.text().await.expect("body");
    assert!(
        html.contains("Overview") && html.contains("operator"),
        "{html}"
    );

    // A cookie whose role was edited is no session.
    let forged = cookie.replacen("operator", "viewer", 1);
    assert_eq!(
        get(&s, "/ui/", Some(&forged)).await.status(),
        StatusCode::SEE_OTHER
    );
    // Nor one past its expiry.
    s.clock.advance(chrono::Duration::hours(13));
    assert_eq!(
        get(&s, "/ui/", Some(cookie)).await.status(),
        StatusCode::SEE_OTHER
    );
    s.cancel.cancel();
}

async fn logout_needs_the_sessions_csrf_token(t: &TestLedger) {
    let s = start(t).await;
    let cookie = sign_in(&s, VIEWER_TOKEN).await;
    let html = get(&s, "/ui/", Some(&cookie))
        .await
        .text()
        .await
        .expect("body");
    assert!(html.contains("viewer"), "{html}");
    let csrf = hidden(&html, "csrf");

    let r = post_form(&s, "/ui/logout", Some(&cookie), &[("csrf", "forged")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = post_form(&s, "/ui/logout", Some(&cookie), &[]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    let r = post_form(&s, "/ui/logout", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&r), "/ui/login");
    assert!(
        r.headers()[SET_COOKIE]
            .to_str()
            .expect("ascii")
            .contains("Max-Age=0")
    );
    s.cancel.cancel();
}

async fn the_overview_counts_jobs_and_ages_the_oldest_ready_one(t: &TestLedger) {
    let s = start(t).await;
    // The server's clock reads 2026-11-30 09:00; two jobs ready since 07:30 and 08:45.
    let jobs = [
        new_job("warehouse-17", "2026-11-28", at(2026, 11, 30, 7, 30)),
        new_job("warehouse-17", "2026-11-29", at(2026, 11, 30, 8, 45)),
    ];
    t.ledger
        .jobs()
        .insert_many(&jobs, at(2026, 11, 30, 7, 0))
        .await
        .expect("insert");
    let cookie = sign_in(&s, TOKEN).await;
    let html = get(&s, "/ui/", Some(&cookie))
        .await
        .text()
        .await
        .expect("body");
    let ready_row = html
        .split("<tr>")
        .find(|row| row.contains(">ready<"))
        .expect("a ready row");
    assert!(ready_row.contains(">2<"), "{ready_row}");
    assert!(html.contains("waiting 1h 30m"), "{html}");
    s.cancel.cancel();
}

/// The reports the notifier found late are the overview's first section: each job linked,
/// its deadline in the report's local time, and what is missing.
async fn the_overview_lists_late_reports_first(t: &TestLedger) {
    let s = start(t).await;
    let cookie = sign_in(&s, TOKEN).await;
    let html = common::console::page(&s, "/ui/", &cookie).await;
    assert!(!html.contains("Late reports"), "none late: no section");
    s.late.set(vec![dawnpost::delivery::notice::LateReport {
        key: common::jk("warehouse-17:2026-11-30"),
        deadline: at(2026, 11, 30, 7, 0),
        detail: "its job is rendering: HTTP 503 from the source".into(),
    }]);
    let html = common::console::page(&s, "/ui/", &cookie).await;
    let late = html.find("Late reports (1)").expect("the late section");
    let jobs = html.find("<h2>Jobs</h2>").expect("the jobs card");
    assert!(late < jobs, "late reports come first");
    for said in [
        "href=\"/ui/jobs/warehouse-17:2026-11-30\"",
        "2026-11-30 08:00 CET (2026-11-30T07:00:00Z)",
        "its job is rendering: HTTP 503 from the source",
    ] {
        assert!(html.contains(said), "{said} in {html}");
    }
    s.cancel.cancel();
}

on_both_backends!(
    login_sets_a_strict_session_cookie_that_every_page_needs,
    logout_needs_the_sessions_csrf_token,
    the_overview_counts_jobs_and_ages_the_oldest_ready_one,
    the_overview_lists_late_reports_first,
);
