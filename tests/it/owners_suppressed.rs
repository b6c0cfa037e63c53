//! A report's owners are told when a recipient of it is suppressed: once per suppression, at
//! the first delivery it stops, the address masked, with the commands that list and lift it.

use std::time::Duration;

use crate::common::{Project, TestLedger, at, run_date};
use crate::owners::{Rig, owned_report, read_mail};
use dawnpost::ledger::{Audit, Cause, NewSuppression, Via};

const BOB: &str = "bob@carrier-y.example";

async fn the_owners_are_told_of_a_suppressed_recipient_once(t: &TestLedger) {
    let p = Project::new(&owned_report("w", "0 30 6 * * *", "08:00", "").replace(
        "email = [\"ops@example.com\"]",
        &format!("email = [\"ops@example.com\", \"{BOB}\"]"),
    ));
    let config = p.load();
    let now = at(2026, 11, 29, 7, 0);
    let l = &t.ledger;
    l.nodes().follow_formats(now).await.expect("formats");
    let audit = Audit::new("ops", "the carrier closed this mailbox", Via::Cli).expect("audit");
    let s = NewSuppression {
        address: BOB,
        report: None,
        cause: Cause::Operator,
        why: "the carrier closed this mailbox",
        at: now,
    };
    assert!(
        l.recipients()
            .suppress(s, Some(&audit))
            .await
            .expect("suppress")
    );

    let told = |rig: &Rig| -> Vec<(String, String)> {
        (rig.outbox().into_iter())
            .map(|(_, raw)| read_mail(&raw))
            .filter(|(subject, _)| subject.starts_with("Suppressed:"))
            .collect()
    };
    let summary = run_date(&config, l, "2026-11-29", Duration::from_secs(30)).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    let rig = Rig::new(&p, t, now);
    rig.round().await;
    let first = told(&rig);
    assert_eq!(
        first.len(),
        2,
        "one message, to each of the two owners: {first:?}"
    );
    let (subject, body) = &first[0];
    assert_eq!(
        subject,
        "Suppressed: Report w — a recipient is no longer sent it"
    );
    assert!(
        body.contains("b***@carrier-y.example: suppressed for every report since")
            && body.contains("the carrier closed this mailbox")
            && body.contains("dawnpost suppressions")
            && body.contains("dawnpost unsuppress"),
        "{body}"
    );
    assert!(!body.contains(BOB), "masked: {body}");

    // The next night stops it again; the owners are not told again.
    let summary = run_date(&config, l, "2026-11-30", Duration::from_secs(30)).await;
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    rig.round().await;
    assert_eq!(told(&rig).len(), 2, "told once");
}

crate::on_both_backends!(the_owners_are_told_of_a_suppressed_recipient_once);
