//! The layering ARCHITECTURE.md states, checked on the source. The code map's headings
//! (`### \`folder/\``) list the folders of `src/`, bottom-up: each folder uses only the folders
//! listed before it (and itself), no two sibling files of one folder import each other (directly
//! or around a cycle), root re-exports are not used inside the crate (a path names the module it
//! comes from), only the ledger and the sql source speak to a database, and every source path
//! ARCHITECTURE.md cites exists. The map is the one list of the layers: a new folder is a new
//! heading there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md")
}

/// The folders of the code map, bottom-up: each `### `name/`` heading of its section.
fn layers(map: &str) -> Vec<String> {
    let section = map
        .split("\n## Code map\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a Code map section");
    let section = section.split("\n## ").next().unwrap_or("");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.split('`').next())
        .map(|name| name.trim_end_matches('/').to_string())
        .collect()
}

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

/// A file's code without comments and without its unit tests (the `#[cfg(test)] mod tests`
/// that ends a file, which may use anything).
fn code(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("read a source file");
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
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
fn every_folder_uses_only_the_layers_below_it() {
    let layers = layers(&architecture());
    assert!(
        layers.len() >= 8,
        "the code map lists its folders: {layers:?}"
    );
    let place: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut entries = BTreeSet::new();
    for entry in std::fs::read_dir(src()).expect("read src").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "lib.rs" && name != "main.rs" {
            entries.insert(name);
        }
    }
    let folders: BTreeSet<String> = layers.iter().cloned().collect();
    assert_eq!(
        entries, folders,
        "src/ holds exactly the folders of ARCHITECTURE.md's code map (and lib.rs, main.rs)"
    );
    let mut upward = Vec::new();
    for path in sources(&src()) {
        let from = module_of(&path);
        let Some(&here) = place.get(from.as_str()) else {
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
                if place.get(to.as_str()).is_some_and(|&there| there > here) {
                    upward.push(format!("{}:{n}: {from} uses {to}", path.display()));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layering:\n{}",
        upward.join("\n")
    );
}

/// Every file of the repository, as a path relative to its root (build output and
/// dependencies left out).
fn repository_files() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if name == "target" || name == ".git" || name == "node_modules" {
                continue;
            }
            if path.is_dir() {
                walk(&path, base, out);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &root(), &mut out);
    out
}

/// The source paths a text cites in backticks: `name.rs`, `dir/name.rs`, `dir/`.
fn cited_paths(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.contains(char::is_whitespace) && !s.contains("::"))
        .filter(|s| s.ends_with(".rs") || s.ends_with(".md") || s.ends_with(".sql"))
        .map(str::to_string)
        .collect()
}

/// Whether `cited` (a path, its tail, or a pattern with one `*`) names the repository's file
/// `file`.
fn cites(cited: &str, file: &str) -> bool {
    let (head, tail) = cited.split_once('*').unwrap_or((cited, ""));
    let at = |i: usize| i == 0 || file.as_bytes()[i - 1] == b'/';
    file.match_indices(head).any(|(i, _)| {
        at(i)
            && file.ends_with(tail)
            && file.len() >= i + head.len() + tail.len()
            && (cited.contains('*') || file.len() == i + head.len())
    })
}

#[test]
fn every_path_the_map_cites_exists() {
    let files = repository_files();
    let missing: Vec<String> = cited_paths(&architecture())
        .into_iter()
        .filter(|cited| !files.iter().any(|f| cites(cited, f)))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md cites paths that do not exist: {missing:?}"
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
        rel.starts_with("ledger") || rel.starts_with("report/source/sql")
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
fn the_checker_reads_the_maps_headings_and_citations() {
    let map = "# A\n## Code map\nintro `a/b.rs`\n### `domain/`\ntext\n### `ledger/`\n## Invariants\n### `not/`\n";
    assert_eq!(layers(map), ["domain", "ledger"]);
    assert!(cites("ledger/jobs.rs", "src/ledger/jobs.rs"));
    assert!(cites("tests/it/ledger_*.rs", "tests/it/ledger_faults.rs"));
    assert!(!cites("tests/layering.rs", "tests/it/layering.rs"));
    assert!(!cites("jobs.rs", "src/ledger/old_jobs.rs"));
    assert_eq!(
        cited_paths("see `a/b.rs` and `tests/it/x.rs`, not `crate::x` or `a b.rs`"),
        BTreeSet::from(["a/b.rs".to_string(), "tests/it/x.rs".to_string()])
    );
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
