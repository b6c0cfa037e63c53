//! The documentation cannot drift from the product: every link of the README, the guide and the
//! other documents leads to a file (and a heading) that exists, every page of `docs/` is in the
//! book, and every TOML example of the guide is accepted by the real loader.

use std::path::{Path, PathBuf};

use dawnpost::config::Config;

use crate::common::{Project, report};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file a reader meets: the documents at the root and the book.
fn documents() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
        "ARCHITECTURE.md",
    ]
    .iter()
    .map(|f| root().join(f))
    .collect();
    let mut stack = vec![root().join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The text of `md` outside fenced code blocks, line by line with their numbers.
fn prose(md: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    md.lines()
        .enumerate()
        .filter(|(_, l)| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|(i, l)| (i + 1, l))
        .collect()
}

/// The targets of a line's Markdown links and images (`[text](target)`, outside inline code)
/// and HTML images (`<img src="target">`).
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut code = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '`' => code = !code,
            ']' if !code && chars.get(i + 1) == Some(&'(') => {
                let rest: String = chars[i + 2..].iter().collect();
                if let Some(end) = rest.find(')') {
                    out.push(rest[..end].to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    // HTML images: `<img src="…">`.
    let mut rest = line;
    while let Some(at) = rest.find("src=\"") {
        rest = &rest[at + 5..];
        if let Some(end) = rest.find('"') {
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// A heading's anchor as GitHub and mdBook make it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(md: &str) -> Vec<String> {
    prose(md)
        .into_iter()
        .filter_map(|(_, l)| l.strip_prefix('#'))
        .map(|h| anchor(h.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_link_of_the_documents_leads_to_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("document");
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
                let path = match file {
                    "" => doc.clone(),
                    f => doc.parent().expect("folder").join(f),
                };
                let shown = format!("{}:{n}: {target}", doc.display());
                if !path.exists() {
                    broken.push(format!("{shown} (no such file)"));
                } else if !fragment.is_empty() {
                    let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&target_text).iter().any(|a| a == fragment) {
                        broken.push(format!("{shown} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_guide_is_in_the_book() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed: Vec<PathBuf> = prose(&summary)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .map(|t| docs.join(t))
        .collect();
    let missing: Vec<String> = documents()
        .into_iter()
        .filter(|p| p.starts_with(&docs) && !p.ends_with("SUMMARY.md"))
        .filter(|p| !listed.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in docs/SUMMARY.md: {missing:?}"
    );
}

/// Every ```toml block of the documents, with where it starts.
fn toml_examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("document");
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim() == "```toml" => block = Some((i + 1, String::new())),
                Some((start, body)) if line.trim() == "```" => {
                    out.push((format!("{}:{start}", doc.display()), std::mem::take(body)));
                    block = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    out
}

/// Where an example goes in a project: reports, a calendar, settings, or keys of a report.
fn place_example(p: &Project, example: &str) {
    let tables: Vec<&str> = (example.lines())
        .map(str::trim)
        .filter(|l| l.starts_with('['))
        .collect();
    let any = |names: &[&str]| {
        tables
            .iter()
            .any(|t| names.iter().any(|n| t.starts_with(n)))
    };
    let reference = report("example", "0 30 6 * * *", "Europe/Berlin");
    if any(&["[[report]]", "[[family]]"]) {
        p.write("config/reports.toml", example);
    } else if any(&["[[holiday]]"]) || example.trim_start().starts_with("weekdays") {
        p.write("config/calendars/example.toml", example);
        let with = format!("{reference}calendar = \"config/calendars/example.toml\"\n");
        p.write("config/reports.toml", &with);
    } else if tables.is_empty() {
        p.write("config/reports.toml", &format!("{reference}{example}"));
    } else {
        p.write("config/dawnpost.toml", example);
        p.write("config/reports.toml", &reference);
    }
}

#[test]
fn every_toml_example_of_the_documents_is_accepted_by_the_loader() {
    let examples = toml_examples();
    assert!(
        examples.len() >= 5,
        "the guide's examples: {}",
        examples.len()
    );
    let shipped = root().join("config");
    let mut refused = Vec::new();
    for (at, example) in examples {
        let p = Project::new("");
        p.write(
            "config/warehouses.csv",
            &std::fs::read_to_string(shipped.join("warehouses.csv")).expect("rows"),
        );
        for entry in std::fs::read_dir(shipped.join("calendars")).expect("calendars") {
            let f = entry.expect("calendar").path();
            let name = f.file_name().expect("name").to_string_lossy().to_string();
            let text = std::fs::read_to_string(&f).expect("calendar");
            p.write(&format!("config/calendars/{name}"), &text);
        }
        place_example(&p, &example);
        if let Err(e) = Config::load(&p.config_dir(), &dawnpost::delivery::readers()) {
            refused.push(format!("{at}:\n{e}"));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}
