//! The console in a real browser: headless Chromium through chromedriver against the daemon
//! binary, a webhook receiver on loopback and a SQLite ledger. An operator signs in, filters
//! the jobs, opens a job with a quarantined delivery, redrives it with a reason and sees it
//! sent; then runs a bulk redrive whose canary comes back quarantined, and the runbook stops by
//! itself. Every page is captured at 1280 px and at 375 px (no horizontal overflow), under
//! `target/ui-screenshots/`; the first focusable element is the skip link.

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Project;
use common::browser::Browser;
use common::checkers;
use common::daemon::Daemon;
use common::peers::Receiver;

const OPS: &str = "browser-ops-token-0123456789";
const VIEWER: &str = "browser-viewer-token-0123456789";
const SECRET_ENV: &str = "BROWSER_HOOK_SECRET";

fn command(p: &Project, args: &[&str]) -> Command {
    let mut c = common::daemon::command(p, args);
    c.env(SECRET_ENV, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .env("BROWSER_OPS_TOKEN", OPS)
        .env("BROWSER_VIEWER_TOKEN", VIEWER)
        .env_remove("RUST_LOG");
    c
}

fn report(id: &str, hooks: &[String]) -> String {
    let mut s = format!(
        "\n[[report]]\nid = \"{id}\"\ntitle = \"{id} nightly\"\nschedule = \"0 0 6 1 1 *\"\ntimezone = \"Europe/Berlin\"\ntemplate = \"daily_ops\"\nsource = {{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }}\nemail = [\"ops@carrier-x.example\"]\n"
    );
    for h in hooks {
        s.push_str(&format!(
            "[[report.webhook]]\nurl = \"{h}\"\nsecret_env = \"{SECRET_ENV}\"\n"
        ));
    }
    s
}

/// Reloads the page until `done` holds of its HTML (the daemon works in the background).
async fn until(b: &Browser, what: &str, done: impl Fn(&str) -> bool) -> String {
    for _ in 0..150 {
        let html = b.html().await;
        if done(&html) {
            return html;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.client.refresh().await.expect("refresh");
    }
    panic!("{what} never showed: {}", b.html().await);
}

/// What outside checkers found on the pages captured: axe-core's serious and critical
/// violations (each page at both widths in both colour schemes), and each page's HTML for the
/// Nu Html Checker at the end.
#[derive(Default)]
struct Audit {
    violations: Vec<String>,
    pages: Vec<(String, String)>,
}

impl Audit {
    async fn axe(&mut self, b: &Browser, name: &str, width: u32) {
        for scheme in ["light", "dark"] {
            b.color_scheme(scheme).await;
            for v in checkers::axe(b).await {
                self.violations
                    .push(format!("{name} at {width} px, {scheme}: {v}"));
            }
        }
        b.color_scheme("light").await;
    }

    /// The Nu Html Checker's errors over every page kept.
    fn nu_errors(&self) -> Vec<String> {
        let dir = tempfile::tempdir().expect("dir");
        let files: Vec<std::path::PathBuf> = self
            .pages
            .iter()
            .map(|(name, html)| {
                let path = dir.path().join(format!("{name}.html"));
                std::fs::write(&path, html).expect("write");
                path
            })
            .collect();
        checkers::nu_errors(&files)
    }
}

/// Captures the current page at 1280 px and at 375 px, which must not scroll sideways, and
/// has axe-core check it at both widths in both colour schemes.
async fn capture(b: &Browser, name: &str, audit: &mut Audit) {
    b.client.set_window_size(1280, 900).await.expect("resize");
    b.screenshot(&format!("{name}-1280")).await;
    audit.axe(b, name, 1280).await;
    // A phone's viewport (Chromium makes no window narrower than 500 px).
    b.viewport(375, 800).await;
    assert_eq!(b.inner_width().await, 375, "{name}");
    b.screenshot(&format!("{name}-375")).await;
    assert!(!b.overflows().await, "{name} scrolls sideways at 375 px");
    audit.axe(b, name, 375).await;
    b.clear_viewport().await;
    audit.pages.push((name.to_string(), served_html(b).await));
}

/// The page as the server sent it (the DOM Chromium serialises has lost its doctype): fetched
/// again with the browser's session cookie.
async fn served_html(b: &Browser) -> String {
    let url = b.client.current_url().await.expect("url");
    let cookies = b.client.get_all_cookies().await.expect("cookies");
    let cookie = cookies
        .iter()
        .map(|c| format!("{}={}", c.name(), c.value()))
        .collect::<Vec<_>>()
        .join("; ");
    let resp = reqwest::Client::new()
        .get(url.as_str())
        .header("cookie", cookie)
        .send()
        .await
        .expect("page");
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.text().await.expect("html")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_redrives_in_the_browser_and_a_failing_canary_stops_a_bulk_redrive() {
    // "flaky" refuses its first request (400) and takes the next (`nth` counts from 1);
    // "refuse" refuses all.
    let rx = Receiver::start(Arc::new(|path: &str, nth, _| {
        let ok = path.starts_with("flaky") && nth > 1 || path.starts_with("fine");
        (if ok { 200 } else { 400 }, None, Duration::ZERO)
    }))
    .await;
    let mut reports = report("carrier-x", &[rx.url("fine/t0k3n"), rx.url("flaky/s3cr3t")]);
    reports.push_str(&report("carrier-y", &[rx.url("refuse/k3y")]));
    let p = Project::new(&reports);
    p.write(
        "config/dawnpost.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nops_token_env = \"BROWSER_OPS_TOKEN\"\nviewer_token_env = \"BROWSER_VIEWER_TOKEN\"\n",
    );
    // Four nights: carrier-y's delivery is refused each night; carrier-x's flaky endpoint
    // refuses only the first request it ever gets (the 29th's), the others are sent.
    for date in ["2026-11-29", "2026-11-26", "2026-11-27", "2026-11-28"] {
        let out = command(&p, &["run", "--once", "--date", date])
            .output()
            .expect("run --once");
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(rx.hits().len(), 12);
    let daemon = Daemon::start(command(&p, &["run"]));
    let b = Browser::start(&format!("http://{}", daemon.addr), 1280).await;

    // Every page needs a session: the login form, then the overview.
    b.goto("/ui/jobs").await;
    assert_eq!(b.path().await, "/ui/login");
    let mut audit = Audit::default();
    capture(&b, "login", &mut audit).await;
    b.fill("input[name=token]", OPS).await;
    b.submit("form.login button").await;
    assert_eq!(b.path().await, "/ui/");
    let html = b.html().await;
    assert!(
        html.contains("Overview") && html.contains("operator"),
        "{html}"
    );
    // The keyboard reaches the skip link first.
    let body = b
        .client
        .find(fantoccini::Locator::Css("body"))
        .await
        .expect("body");
    body.send_keys(&fantoccini::key::Key::Tab.to_string())
        .await
        .expect("tab");
    let first = b
        .client
        .active_element()
        .await
        .expect("focus")
        .text()
        .await
        .expect("text");
    assert_eq!(first, "Skip to content");
    capture(&b, "overview", &mut audit).await;

    // Filter the jobs to the quarantined ones; open carrier-x's.
    b.goto("/ui/jobs").await;
    b.client
        .find(fantoccini::Locator::Css("select[name=state]"))
        .await
        .expect("state filter")
        .select_by_value("quarantined")
        .await
        .expect("select");
    b.fill("input[name=report]", "carrier-x").await;
    b.submit("form.filters button").await;
    assert_eq!(
        b.path().await,
        "/ui/jobs?state=quarantined&report=carrier-x&from=&to=&class="
    );
    let html = b.html().await;
    assert!(
        html.contains("carrier-x:2026-11-29") && !html.contains("carrier-y:"),
        "{html}"
    );
    capture(&b, "jobs", &mut audit).await;
    b.submit("a[href='/ui/jobs/carrier-x:2026-11-29']").await;
    let html = b.html().await;
    assert!(html.contains("Redrive this delivery"), "{html}");
    assert!(
        !html.contains("s3cr3t") && !html.contains("t0k3n"),
        "webhook paths redacted: {html}"
    );
    assert!(
        !html.contains("ops@carrier-x.example"),
        "addresses redacted: {html}"
    );
    capture(&b, "job", &mut audit).await;

    // Redrive the quarantined delivery with a reason; the daemon sends it.
    let form = "form[aria-label='Redrive this delivery']";
    b.fill(&format!("{form} input[name=by]"), "ann").await;
    b.fill(
        &format!("{form} input[name=reason]"),
        "carrier fixed their endpoint",
    )
    .await;
    b.submit(&format!("{form} button")).await;
    assert_eq!(b.path().await, "/ui/jobs/carrier-x:2026-11-29");
    rx.wait_for(13, Duration::from_secs(30)).await;
    let html = until(&b, "the job done", |h| {
        h.contains("Job carrier-x:2026-11-29 <span class=\"state done\">")
    })
    .await;
    assert!(
        html.contains("carrier fixed their endpoint") && html.contains("console:operator"),
        "{html}"
    );
    assert_eq!(rx.hits_for("flaky/s3cr3t").len(), 5);

    // Bulk: carrier-y's four refused deliveries; a dry run, then the canary, which the
    // receiver refuses again: the runbook stops by itself, before any batch.
    b.goto("/ui/dlq").await;
    capture(&b, "dlq", &mut audit).await;
    let form = "form[aria-label='Plan a bulk redrive of carrier-y']";
    b.fill(&format!("{form} input[name=by]"), "ann").await;
    b.fill(
        &format!("{form} input[name=reason]"),
        "receiver says it is fixed",
    )
    .await;
    b.submit(&format!("{form} button")).await;
    let html = b.html().await;
    assert!(html.contains("dry run: 4 deliver(ies)"), "{html}");
    b.fill("form[aria-label=Start] input[name=by]", "ann").await;
    b.submit("form[aria-label=Start] button").await;
    let html = until(&b, "the runbook stopped", |h| h.contains(">stopped<")).await;
    assert!(
        html.contains("of the canary came back quarantined permanent"),
        "{html}"
    );
    capture(&b, "runbook", &mut audit).await;
    assert_eq!(
        rx.hits_for("refuse/k3y").len(),
        5,
        "four at first, then the canary only"
    );

    for page in ["reports", "retention", "suppressions"] {
        b.goto(&format!("/ui/{page}")).await;
        capture(&b, page, &mut audit).await;
    }
    // A report's page: an operator sends a test to one address, and the page says so.
    b.goto("/ui/reports/carrier-x").await;
    capture(&b, "report", &mut audit).await;
    b.fill("form[aria-label='Send a test'] input[name=by]", "Ana")
        .await;
    b.fill(
        "form[aria-label='Send a test'] input[name=to]",
        "ana@example.com",
    )
    .await;
    b.submit("form[aria-label='Send a test'] button").await;
    let html = b.html().await;
    assert!(
        html.contains("Sent a test for ")
            && html.contains(" to a***@example.com: written to the outbox"),
        "{html}"
    );
    capture(&b, "report-tested", &mut audit).await;

    // Dark mode follows the system's preference.
    b.goto("/ui/jobs/carrier-x:2026-11-29").await;
    let light = b.background().await;
    b.color_scheme("dark").await;
    b.client.refresh().await.expect("refresh");
    assert!(b.prefers_dark().await);
    let dark = b.background().await;
    assert_ne!(light, dark, "the background changes with the scheme");
    assert_eq!(dark, "rgb(15, 18, 22)", "the dark palette's background");
    b.screenshot("job-dark-1280").await;
    b.stop().await;
    assert!(
        audit.violations.is_empty(),
        "axe-core: {:#?}",
        audit.violations
    );
    let errors = audit.nu_errors();
    assert!(errors.is_empty(), "the Nu Html Checker: {errors:#?}");
    let (code, log) = daemon.stop();
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
