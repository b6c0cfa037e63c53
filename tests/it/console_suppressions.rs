//! The console's suppressions page over real HTTP, both backends: the list masked, an
//! operator's suppress and lift (CSRF, by and reason, audited in the row), a viewer refused.

use crate::common;

use common::TestLedger;
use common::console::{get, hidden, page, post_form, sign_in};
use common::ops_server::{TOKEN, VIEWER_TOKEN, start};
use reqwest::StatusCode;

async fn an_operator_suppresses_and_lifts_and_a_viewer_only_reads(t: &TestLedger) {
    let s = start(t).await;
    let operator = sign_in(&s, TOKEN).await;
    let html = page(&s, "/ui/suppressions", &operator).await;
    assert!(
        html.contains("No suppression.") && html.contains("Suppress an address"),
        "{html}"
    );
    let csrf = hidden(&html, "csrf");
    let form = [
        ("csrf", csrf.as_str()),
        ("address", "Bob@Carrier-Y.example"),
        ("report", ""),
        ("by", "ann"),
        ("reason", "the carrier closed this mailbox"),
    ];
    let r = post_form(&s, "/ui/suppressions", Some(&operator), &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&s, "/ui/suppressions", &operator).await;
    assert!(
        html.contains("b***@carrier-y.example")
            && html.contains("for every report")
            && html.contains("the carrier closed this mailbox (by ann)"),
        "{html}"
    );
    assert!(!html.contains("bob@carrier-y.example"), "masked: {html}");

    // Without a reason, or without the page's token: refused, nothing lifted.
    let list = t
        .ledger
        .recipients()
        .suppressions(false, 10)
        .await
        .expect("list");
    let lift = format!("/ui/suppressions/{}/lift", list[0].id);
    let no_reason = [("csrf", csrf.as_str()), ("by", "ann"), ("reason", "")];
    let r = post_form(&s, &lift, Some(&operator), &no_reason).await;
    assert!(r.status().is_client_error(), "{}", r.status());
    let forged = [("csrf", "nope"), ("by", "ann"), ("reason", "back")];
    assert_eq!(
        post_form(&s, &lift, Some(&operator), &forged)
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    // A viewer reads, and cannot lift.
    let viewer = sign_in(&s, VIEWER_TOKEN).await;
    let seen = page(&s, "/ui/suppressions", &viewer).await;
    assert!(
        seen.contains("in force") && !seen.contains("Suppress an address"),
        "{seen}"
    );
    let vcsrf = hidden(&seen, "csrf");
    let as_viewer = [("csrf", vcsrf.as_str()), ("by", "vic"), ("reason", "back")];
    assert_eq!(
        post_form(&s, &lift, Some(&viewer), &as_viewer)
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        t.ledger
            .recipients()
            .suppressions(false, 10)
            .await
            .expect("l")
            .len(),
        1
    );

    let ok = [
        ("csrf", csrf.as_str()),
        ("by", "ann"),
        ("reason", "mailbox restored"),
    ];
    let r = post_form(&s, &lift, Some(&operator), &ok).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        t.ledger
            .recipients()
            .suppressions(false, 10)
            .await
            .expect("l")
            .is_empty()
    );
    let all = page(&s, "/ui/suppressions?all=true", &operator).await;
    assert!(all.contains("by ann: mailbox restored"), "{all}");
    let lifted = t
        .ledger
        .recipients()
        .suppressions(true, 10)
        .await
        .expect("l");
    let l = lifted[0].lifted.as_ref().expect("lifted");
    assert_eq!((l.by.as_str(), l.via.as_str()), ("ann", "console:operator"));
    assert_eq!(
        get(&s, "/ui/suppressions", None).await.status(),
        StatusCode::SEE_OTHER
    );
    s.cancel.cancel();
}

crate::on_both_backends!(an_operator_suppresses_and_lifts_and_a_viewer_only_reads);
