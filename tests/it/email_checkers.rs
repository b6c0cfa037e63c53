//! The shipped template's email checked by tools nobody here wrote: caniemail's data
//! (doiuse-email) for the clients that matter, the Nu Html Checker, and axe-core in Chromium.
//! A future edit that brings back a property a client ignores (`white-space` and `display` in
//! Outlook on Windows), invalid HTML or an unreadable contrast fails here.

use crate::common;

use std::path::PathBuf;

use common::browser::Browser;
use common::checkers;
use common::{previewed, shipped_copy};

/// The clients checked: Outlook everywhere, Gmail, Apple Mail, Yahoo, Samsung Email.
const CLIENTS: &str = "outlook.windows,outlook.windows-mail,outlook.macos,outlook.ios,outlook.android,gmail.*,apple-mail.*,yahoo.*,samsung-email.android";

/// doiuse-email names a CSS property bare (`` `white-space` ``); selectors, at-rules, elements
/// and attributes by words (`` `Class selector` ``, `` `@media` ``, `` `<body> element` ``).
fn is_property(finding: &str) -> bool {
    let name = finding.split('`').nth(1).unwrap_or_default();
    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
}

fn findings<'a>(report: &'a serde_json::Value, kind: &str) -> Vec<&'a str> {
    report[kind]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect()
}

#[test]
fn every_css_property_is_one_the_clients_support() {
    let dir = shipped_copy();
    for report in ["warehouse-17", "harbor-east"] {
        let html = previewed(dir.path(), report);
        let found = checkers::doiuse(&html, CLIENTS);
        // The <style> block is kept for the clients that read it (media queries) and every
        // rule is inlined too, so its selectors may be unsupported; no property may be.
        let unsupported: Vec<&str> = findings(&found, "errors")
            .into_iter()
            .filter(|f| is_property(f))
            .collect();
        assert!(unsupported.is_empty(), "{report}: {unsupported:#?}");
        // Outlook on Windows supports `display: none` only.
        let display: Vec<&str> = findings(&found, "warnings")
            .into_iter()
            .filter(|f| f.starts_with("`display`") && f.contains("outlook.windows"))
            .collect();
        assert!(display.is_empty(), "{report}: {display:#?}");
    }
}

#[test]
fn the_html_is_valid_and_every_cell_carries_the_font() {
    let dir = shipped_copy();
    let files: Vec<PathBuf> = ["warehouse-17", "harbor-east"]
        .iter()
        .map(|r| previewed(dir.path(), r))
        .collect();
    let errors = checkers::nu_errors(&files);
    assert!(errors.is_empty(), "{errors:#?}");
    // Yahoo's and Outlook's mobile apps drop <body>: the font must be on the cells too.
    let html = std::fs::read_to_string(&files[0]).expect("html");
    for tag in ["<td ", "<td>", "<th ", "<th>", "<h1", "<h2"] {
        for element in html.split(tag).skip(1) {
            let head = &element[..element.find('>').unwrap_or(element.len())];
            assert!(
                head.contains("font-family"),
                "{tag}{head}> has no font-family"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn axe_finds_nothing_serious_at_either_width() {
    let dir = shipped_copy();
    let html = previewed(dir.path(), "warehouse-17");
    for width in [375u32, 1280] {
        let b = Browser::start("file://", width.max(500)).await;
        b.viewport(width, 900).await;
        b.goto(&html.display().to_string()).await;
        let violations = checkers::axe(&b).await;
        b.stop().await;
        assert!(violations.is_empty(), "at {width} px: {violations:#?}");
    }
}
