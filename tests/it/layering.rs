//! The layering ARCHITECTURE.md states, checked on the source: each top-level module of `src/`
//! uses only the modules below it in [`LAYERS`] (or before it in its own layer), no two sibling
//! files of one module import each other (directly or around a cycle), root re-exports are not
//! used inside the crate (a path names the module it comes from), and only the ledger and the
//! sql source speak to a database. A new module goes into [`LAYERS`] and ARCHITECTURE.md's code
//! map together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The modules, bottom-up. A module may use those in earlier layers, and those listed before it
/// in its own layer.
const LAYERS: &[&[&str]] = &[
    &[
        "words",
        "redact",
        "keys",
        "duration",
        "clock",
        "window",
        "cron",
        "outcome",
        "logging",
        "metrics",
        "tls",
        "periodic",
        "data_path",
    ],
    &["config"],
    &[
        "schedule",
        "render",
        "catalog",
        "source",
        "readiness",
        "artifact",
        "retry",
        "signing",
        "links",
        "deliver",
        "notice",
    ],
    &["ledger"],
    &[
        "tick",
        "timekeeper",
        "registry",
        "reload",
        "pool",
        "notifier",
        "sweeper",
        "history",
        "api",
        "runbook",
        "preview",
        "wake",
    ],
    &["supervisor", "server"],
    &["daemon", "runner"],
    &["cli"],
];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A file's code without comments and without its unit tests (which may use anything).
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("read a source file");
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.split("//").next().unwrap_or("").to_string()))
        .collect()
}

/// The identifiers that follow `prefix` in `line` (`crate::ledger::X` → `ledger`; `super::{a,
/// b::c}` → `a`, `b`).
fn names_after(line: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in line.match_indices(prefix) {
        let rest = &line[i + prefix.len()..];
        // A group lists several names; otherwise only the first path segment counts.
        let items: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
            None => vec![rest],
        };
        for item in items {
            let name: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file of `src/` belongs to.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).expect("under src");
    let first = rel.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let place: BTreeMap<&str, (usize, usize)> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(l, ms)| ms.iter().enumerate().map(move |(i, m)| (*m, (l, i))))
        .collect();
    let mut upward = Vec::new();
    let mut unlisted = BTreeSet::new();
    for path in sources(&src()) {
        let from = module_of(&path);
        if from == "lib" || from == "main" {
            continue;
        }
        let Some(&here) = place.get(from.as_str()) else {
            unlisted.insert(from);
            continue;
        };
        for (n, line) in code(&path) {
            for to in names_after(&line, "crate::") {
                if to.starts_with(char::is_uppercase) {
                    upward.push(format!(
                        "{}:{n}: crate::{to} is a root re-export; name its module",
                        path.display()
                    ));
                    continue;
                }
                let Some(&there) = place.get(to.as_str()) else {
                    continue;
                };
                if to != from && there > here {
                    upward.push(format!("{}:{n}: {from} uses {to}", path.display()));
                }
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "modules missing from LAYERS: {unlisted:?}"
    );
    assert!(
        upward.is_empty(),
        "imports against the layering:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_two_sibling_files_import_each_other() {
    // Edges between the sibling files of each directory (a module's `mod.rs` is the parent, not
    // a sibling: its children may use what it defines).
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for path in sources(&src()) {
        let dir = path.parent().expect("a directory").to_path_buf();
        if path.file_name().is_some_and(|f| f == "mod.rs") || dir == src() {
            continue;
        }
        for (_, line) in code(&path) {
            for name in names_after(&line, "super::") {
                let sibling = dir.join(format!("{name}.rs"));
                if sibling.exists() && sibling != path {
                    edges.entry(path.clone()).or_default().insert(sibling);
                }
            }
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        node: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(i) = stack.iter().position(|p| p == node) {
            return Some(stack[i..].to_vec());
        }
        if !done.insert(node.clone()) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        let mut stack = Vec::new();
        let cycle = visit(node, &edges, &mut stack, &mut done);
        assert!(
            cycle.is_none(),
            "sibling files import each other: {cycle:?}"
        );
    }
}

#[test]
fn only_the_ledger_and_the_sql_source_speak_to_a_database() {
    let allowed = |p: &Path| {
        let rel = p.strip_prefix(src()).expect("under src");
        rel.starts_with("ledger") || rel == Path::new("source.rs")
    };
    let speaking: Vec<String> = sources(&src())
        .into_iter()
        .filter(|p| !allowed(p))
        .filter(|p| code(p).iter().any(|(_, l)| l.contains("sqlx")))
        .map(|p| p.display().to_string())
        .collect();
    assert!(speaking.is_empty(), "sqlx used in {speaking:?}");
}

#[test]
fn the_checker_sees_an_upward_import_and_a_group() {
    assert_eq!(
        names_after("use crate::ledger::{Ledger, Job};", "crate::"),
        ["ledger"]
    );
    assert_eq!(
        names_after("use super::{hold::Hold, running::Slot};", "super::"),
        ["hold", "running"]
    );
    assert_eq!(
        names_after(
            "let x = crate::Span::from_secs(1); // crate::pool",
            "crate::"
        ),
        ["Span", "pool"],
        "comments are stripped by `code`, not here"
    );
}
