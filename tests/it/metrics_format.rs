//! `/metrics` in both formats, each read by promtool: the Prometheus text format 0.0.4 for a
//! scraper that asks for it (or for nothing in particular) passes `promtool check metrics` with
//! no complaint; OpenMetrics, for a scraper that asks for it as Prometheus does, parses with
//! promtool's OpenMetrics parser (`promtool tsdb create-blocks-from openmetrics`). Every series
//! has samples (a run was recorded) so nothing is checked empty.

use crate::common;

use std::process::{Command, Stdio};

use common::TestLedger;
use common::ops_server::{SECRET, start};

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

async fn scrape(s: &common::ops_server::Server, accept: Option<&str>) -> (String, String) {
    let mut req = s.http.get(format!("{}/metrics", s.base));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.expect("metrics");
    assert_eq!(resp.status(), 200);
    let kind = resp.headers()["content-type"]
        .to_str()
        .expect("type")
        .to_string();
    (kind, resp.text().await.expect("text"))
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool (Debian's prometheus package) is needed: {e}"));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_formats_are_what_promtool_reads() {
    let t = TestLedger::sqlite().await;
    let s = start(&t).await;
    s.ingest("m1", s.now(), r#"{"report": "warehouse-17"}"#, SECRET)
        .await;

    for accept in [Some("text/plain; version=0.0.4"), None, Some("*/*")] {
        let (kind, text) = scrape(&s, accept).await;
        assert_eq!(
            kind, "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        assert!(!text.contains("# EOF"));
        let (ok, said) = promtool(&["check", "metrics"], Some(&text));
        assert!(ok && said.trim().is_empty(), "{accept:?}: {said}\n{text}");
        assert!(
            text.contains("# TYPE dawnpost_ingested_runs_total counter"),
            "{text}"
        );
    }

    let (kind, text) = scrape(&s, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(
        kind,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    // The backfill parser wants a timestamp on every sample.
    let stamped: String = text
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("{l}\n")
            } else {
                format!("{l} 1700000000\n")
            }
        })
        .collect();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("metrics.om");
    std::fs::write(&file, &stamped).expect("write");
    let out = dir.path().join("blocks");
    let (ok, said) = promtool(
        &[
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            file.to_str().expect("path"),
            out.to_str().expect("path"),
        ],
        None,
    );
    assert!(ok, "{said}\n{text}");
    s.cancel.cancel();
    t.cleanup().await;
}
