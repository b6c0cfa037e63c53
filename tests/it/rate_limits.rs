//! `[[rate_limit]]` through the pool on real sockets: a receiver limited to 20 sends a second
//! gets them no faster, across every report, while a receiver without a limit is served at
//! once; the limit is in `/metrics`. SQLite, and PostgreSQL when it is configured.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::peers::{HttpRule, Receiver};
use common::{Project, TestLedger};
use dawnpost::Config;
use dawnpost::runtime::metrics::Metrics;

const DATE: &str = "2026-11-30";
const REPORTS: usize = 10;
const LIMITED_PER_REPORT: usize = 20;
const FREE_PER_REPORT: usize = 2;

fn settings(limited_port: u16) -> String {
    format!(
        r#"
[pool]
concurrency = 16
admission_per_second = 1000
lease = "30s"
[webhook]
timeout = "5s"

[[rate_limit]]
host = "127.0.0.1:{limited_port}"
per_second = 20
burst = 10

[[rate_limit]]
host = "*.carrier.example"
per_second = 5
"#
    )
}

fn reports(limited: &Receiver, free: &Receiver) -> String {
    let mut s = String::new();
    for r in 0..REPORTS {
        s.push_str(&format!(
            r#"
[[report]]
id = "carrier-{r}"
title = "Carrier {r}"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = {{ kind = "file", path = "config/sample/warehouse-17.json" }}
"#
        ));
        for i in 0..LIMITED_PER_REPORT {
            s.push_str(&format!(
                "[[report.webhook]]\nurl = \"{}\"\n",
                limited.url(&format!("r{r}/h{i}"))
            ));
        }
        for i in 0..FREE_PER_REPORT {
            s.push_str(&format!(
                "[[report.webhook]]\nurl = \"{}\"\n",
                free.url(&format!("r{r}/h{i}"))
            ));
        }
    }
    s
}

async fn a_limited_host_is_held_to_its_rate_and_others_are_not(t: &TestLedger) {
    let ok: HttpRule = Arc::new(|_, _, _| (200, None, Duration::ZERO));
    let limited = Receiver::start(ok.clone()).await;
    let free = Receiver::start(ok).await;
    let p = Project::new(&reports(&limited, &free));
    p.write("config/dawnpost.toml", &settings(limited.addr.port()));
    let config = Config::load(&p.config_dir(), &dawnpost::delivery::readers())
        .unwrap_or_else(|e| panic!("{e}"));
    let metrics = Arc::new(Metrics::default());
    let opts = dawnpost::node::runner::RunOnceOptions {
        date: chrono::NaiveDate::parse_from_str(DATE, "%Y-%m-%d").ok(),
        max_wait: Duration::from_secs(120),
        progress: false,
        metrics: Some(metrics.clone()),
    };
    let summary = dawnpost::node::runner::run_once(
        &config,
        t.ledger.clone(),
        Arc::new(dawnpost::SystemClock),
        &opts,
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .expect("run once");
    assert_eq!(summary.exit_code, 0, "{summary:?}");

    let mut hits = limited.hits();
    hits.sort_by_key(|h| h.at);
    assert_eq!(hits.len(), REPORTS * LIMITED_PER_REPORT, "each once");
    let (first, last) = (hits[0].at, hits[hits.len() - 1].at);
    // 200 sends at 20/s after a burst of 10: 190 / 20 = 9.5 s at the least.
    let took = last - first;
    assert!(took >= Duration::from_secs(9), "200 sends in {took:?}");
    // No second ever saw more than the burst plus a second's rate.
    for (i, h) in hits.iter().enumerate() {
        let within = hits[i..]
            .iter()
            .take_while(|o| o.at - h.at < Duration::from_secs(1))
            .count();
        assert!(within <= 30, "{within} sends within a second");
    }

    // The unlimited host is served at once: all of its sends arrive before the limited host's
    // fortieth (two seconds into its queue).
    let mut free_hits = free.hits();
    free_hits.sort_by_key(|h| h.at);
    assert_eq!(free_hits.len(), REPORTS * FREE_PER_REPORT);
    let free_last = free_hits[free_hits.len() - 1].at;
    assert!(
        free_last < hits[40].at,
        "the unlimited host waited {:?} after the limited host's first send",
        free_last - first
    );

    let text = metrics.render();
    let host = format!("host=\"127.0.0.1:{}\"", limited.addr.port());
    assert!(
        text.contains(&format!("dawnpost_rate_limit_per_second{{{host}}} 20.0")),
        "{text}"
    );
    assert!(text.contains(&format!("dawnpost_rate_limit_burst{{{host}}} 10")));
    assert!(text.contains("dawnpost_rate_limit_per_second{host=\"*.carrier.example\"} 5.0"));
    let deferred: f64 = text
        .lines()
        .find(|l| l.starts_with(&format!("dawnpost_rate_limit_deferred_total{{{host}}}")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("the deferred series");
    // Turned back queue one period apart, so each comes back when the budget has room: about
    // one turn-back per send over the burst (190 here), not one per lease round.
    assert!((1.0..=400.0).contains(&deferred), "{deferred}");
}

on_both_backends!(a_limited_host_is_held_to_its_rate_and_others_are_not);

#[test]
fn check_shows_each_limit_and_what_it_holds_back() {
    let hooks = "[[report.webhook]]\nurl = \"https://hooks.carrier.example/r/17\"\n\
                 [[report.webhook]]\nurl = \"http://127.0.0.1:9009/in\"\n";
    let p = Project::new(&format!(
        "{}{hooks}",
        common::report("warehouse-17", "0 30 6 * * *", "Europe/Berlin")
    ));
    p.write(
        "config/dawnpost.toml",
        "[email]\nsmtp_url = \"smtp://relay.example:2525\"\n\
         [[rate_limit]]\nhost = \"relay.example\"\nper_second = 14\n\
         [[rate_limit]]\nhost = \"*.carrier.example\"\nper_second = 5\nburst = 2\n\
         [[rate_limit]]\nhost = \"nowhere.example\"\nper_second = 1\n",
    );
    let out = common::run_in(p.root(), &["check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "rate limit relay.example: 14/s, burst 14 — applies to the SMTP relay relay.example:2525 (1 report(s))",
        "rate limit *.carrier.example: 5/s, burst 2 — applies to webhook host hooks.carrier.example:443",
        "rate limit nowhere.example: 1/s, burst 1 — matches no destination of these reports",
    ] {
        assert!(text.contains(want), "{want} in\n{text}");
    }
    assert!(
        text.contains("template daily_ops (+ CSV attachment)  destinations: 1 email, 2 webhook"),
        "{text}"
    );
    // The webhook path is never shown.
    assert!(!text.contains("/r/17"), "{text}");

    p.write(
        "config/dawnpost.toml",
        "[[rate_limit]]\nhost = \"relay.example\"\nper_second = -1\n",
    );
    let out = common::run_in(p.root(), &["check"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dawnpost.toml: line 3: rate_limit[0].per_second: -1 must be above 0"),
        "{err}"
    );
}
