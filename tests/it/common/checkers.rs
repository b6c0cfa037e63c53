//! Outside checkers, from the npm registry (`tests/support/node`, installed by `.ci/run` with
//! `npm ci`): caniemail's data through doiuse-email, the Nu Html Checker (vnu.jar, on the
//! machine's Java) and axe-core, injected into a page Chromium has open.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::browser::Browser;

/// `tests/support/node/node_modules`, which must be installed.
pub fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/node/node_modules");
    assert!(
        dir.join("axe-core").is_dir() && dir.join("doiuse-email").is_dir(),
        "the outside checkers are not installed: npm ci --prefix tests/support/node (.ci/run does it)"
    );
    dir
}

/// doiuse-email's findings for `html` in `clients` (caniemail's names, globs allowed):
/// `{"errors": [...], "warnings": [...], "notes": [...]}`.
pub fn doiuse(html: &Path, clients: &str) -> serde_json::Value {
    let cli = node_modules().join("doiuse-email/bin/cli.js");
    let out = Command::new("node")
        .arg(cli)
        .arg("--email-clients")
        .arg(clients)
        .arg(html)
        .output()
        .expect("node (the machine's Node.js) is needed");
    assert!(
        out.status.success(),
        "doiuse-email: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("doiuse-email prints JSON")
}

/// The Nu Html Checker's errors for each file, as `file:line: message`.
pub fn nu_errors(files: &[PathBuf]) -> Vec<String> {
    let jar = node_modules().join("vnu-jar/build/dist/vnu.jar");
    let out = Command::new("java")
        .arg("-jar")
        .arg(jar)
        .args(["--errors-only", "--format", "json", "--exit-zero-always"])
        .args(files)
        .output()
        .expect("java (for the Nu Html Checker) is needed");
    // vnu writes its JSON report to stderr.
    let report: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap_or_else(|e| {
        panic!(
            "the Nu Html Checker's report does not parse ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    report["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["type"] == "error")
        .map(|m| {
            format!(
                "{}:{}: {}",
                m["url"].as_str().unwrap_or_default(),
                m["lastLine"],
                m["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// axe-core's serious and critical violations on the page `b` shows, each as
/// `rule (impact): target …`.
pub async fn axe(b: &Browser) -> Vec<String> {
    let source =
        std::fs::read_to_string(node_modules().join("axe-core/axe.min.js")).expect("axe.min.js");
    b.client
        .execute(&format!("{source}\nreturn true;"), vec![])
        .await
        .expect("inject axe-core");
    let result = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
                .then(r => done(r.violations.map(v => ({
                    id: v.id, impact: v.impact,
                    targets: v.nodes.map(n => n.target.join(' ')).slice(0, 5),
                }))))
                .catch(e => done([{ id: 'axe failed: ' + e, impact: 'critical', targets: [] }]));",
            vec![],
        )
        .await
        .expect("axe.run");
    result
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| format!("{} ({}): {}", v["id"], v["impact"], v["targets"]))
        .collect()
}

/// What Microsoft's Adaptive Cards parser (npm `adaptivecards`, targeting schema 1.5) finds
/// wrong in each file — a card, or a Teams message carrying one: `(file, errors)` each.
pub fn adaptive_cards(files: &[PathBuf]) -> Vec<(String, Vec<String>)> {
    assert!(
        node_modules().join("adaptivecards").is_dir(),
        "the Adaptive Cards parser is not installed: npm ci --prefix tests/support/node"
    );
    let script = node_modules().join("../card_check.js");
    let out = Command::new("node")
        .arg(script)
        .args(files)
        .output()
        .expect("node (the machine's Node.js) is needed");
    assert!(
        out.status.success(),
        "card_check.js: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let errors = (v["errors"].as_array().into_iter().flatten())
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect();
            (v["file"].as_str().unwrap_or("").to_string(), errors)
        })
        .collect()
}
