//! The HTML part as email clients need it: the template's `<style>` rules inlined on every
//! element (Outlook on Windows and webmail views that drop `<style>` still see them), the block
//! kept for clients that read it (media queries), and alt text on every image.

/// Why the HTML cannot be sent as it is; each says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("an <img> has no alt text (src {0:?}): add alt=\"…\" (alt=\"\" for a decorative one)")]
    NoAlt(String),
    #[error("cannot inline its CSS: {0}")]
    Inline(#[from] css_inline::InlineError),
}

/// Inlines the CSS and checks the images.
pub(crate) fn prepare(html: &str) -> Result<String, HtmlError> {
    if let Some(src) = image_without_alt(html) {
        return Err(HtmlError::NoAlt(src));
    }
    let inliner = css_inline::CSSInliner::options()
        .keep_style_tags(true)
        .load_remote_stylesheets(false)
        .preallocate_node_capacity((html.len() / BYTES_PER_NODE).min(MAX_NODES_AHEAD))
        .build();
    // Inlined, the shipped template's HTML is 2.5–2.9 times its size: room for that at once
    // instead of the inliner's 1.5 times and a copy into a buffer twice as large. A page past
    // a megabyte starts from the inliner's 1.5 times, as before, and grows as it needs.
    let room = match html.len() {
        n if n <= PRESIZED_UP_TO => n.saturating_mul(3),
        n => n.saturating_add(n / 2),
    };
    let mut out = Vec::with_capacity(room);
    inliner.inline_to(html, &mut out)?;
    // The inliner writes what it parsed from a `str`; its own `inline` falls back the same way.
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// About how many bytes of HTML make one node of the inliner's tree (elements, text and
/// whitespace between tags): the shipped template's renders have 26–31. The tree is
/// allocated for that many at once instead of growing from 32 nodes by doubling.
const BYTES_PER_NODE: usize = 24;

/// The most nodes allocated ahead (a few hundred kilobytes): a large page with long text
/// runs has far fewer nodes than its size suggests, and the tree grows past this as it needs.
const MAX_NODES_AHEAD: usize = 4096;

/// The largest page whose inlined output is given room for three times its size up front.
const PRESIZED_UP_TO: usize = 1 << 20;

/// The `src` of the first `<img>` without an `alt` attribute, if any. Only the tags that
/// open with `<img` are looked at (and lowercased): the rest of the page is passed over.
fn image_without_alt(html: &str) -> Option<String> {
    let bytes = html.as_bytes();
    let mut from = 0;
    while let Some(at) = html[from..].find('<') {
        let start = from + at;
        from = start + 1;
        if !bytes
            .get(start + 1..start + 4)
            .is_some_and(|name| name.eq_ignore_ascii_case(b"img"))
        {
            continue;
        }
        let end = html[start..].find('>').map_or(html.len(), |e| start + e);
        from = end.max(from);
        let after = bytes.get(start + 4).copied().filter(|_| start + 4 < end);
        if !after.is_some_and(|b| b.is_ascii_whitespace() || b == b'/') && after.is_some() {
            continue; // <imgx…>, not an image
        }
        let tag = html[start..end].to_ascii_lowercase();
        if !has_attribute(&tag, "alt") {
            let src = attribute(&html[start..end], "src").unwrap_or_default();
            return Some(src.chars().take(80).collect());
        }
    }
    None
}

fn has_attribute(tag: &str, name: &str) -> bool {
    tag.match_indices(name).any(|(i, _)| {
        let before = tag[..i].chars().next_back();
        let rest = tag[i + name.len()..].trim_start();
        before.is_some_and(char::is_whitespace)
            && (rest.starts_with('=') || rest.is_empty() || rest.starts_with('/'))
    })
}

/// A quoted attribute's value in a tag, as written.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let i = lower.find(&format!("{name}="))?;
    let rest = &tag[i + name.len() + 1..];
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &rest[1..];
    Some(value[..value.find(quote).unwrap_or(value.len())].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_inlined_and_the_block_kept() {
        let html = "<html><head><style>td.num { text-align: right; } \
                    @media (max-width: 480px) { td { padding: 2px; } }</style></head>\
                    <body><table><tr><td class=\"num\">1</td></tr></table></body></html>";
        let out = prepare(html).expect("prepare");
        assert!(
            out.contains(r#"<td class="num" style="text-align: right;">1</td>"#),
            "{out}"
        );
        assert!(out.contains("<style>") && out.contains("@media"), "{out}");
    }

    #[test]
    fn an_image_without_alt_text_is_refused_naming_it() {
        let err = prepare(r#"<p><img src="https://x.example/logo.png"></p>"#)
            .expect_err("no alt")
            .to_string();
        assert!(err.contains("logo.png") && err.contains("alt"), "{err}");
        assert!(prepare(r#"<img src="a.png" alt="">"#).is_ok());
        assert!(prepare(r#"<IMG SRC="a.png" ALT="Logo" />"#).is_ok());
        assert!(prepare(r#"<img data-alt="x" src="b.png">"#).is_err());
    }

    /// The scan as it was before it skipped the tags that are not `<img`: it lowercased the
    /// whole page and searched it for `<img`.
    fn image_without_alt_by_lowercasing(html: &str) -> Option<String> {
        let lower = html.to_ascii_lowercase();
        let mut from = 0;
        while let Some(at) = lower[from..].find("<img") {
            let start = from + at;
            let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
            let tag = &lower[start..end];
            from = end;
            let after = tag.as_bytes().get(4).copied();
            if !after.is_some_and(|b| b.is_ascii_whitespace() || b == b'/') && after.is_some() {
                continue;
            }
            if !has_attribute(tag, "alt") {
                let src = attribute(&html[start..end], "src").unwrap_or_default();
                return Some(src.chars().take(80).collect());
            }
        }
        None
    }

    proptest::proptest! {
        #[test]
        fn the_image_scan_finds_what_lowercasing_the_page_found(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "<img", "<IMG", "<iMg", "<imgx", "<i", "<p>", "</img>", "<", ">", " ", "\n", "/",
                " alt", " ALT", "=", "\"", "'", " src=\"a.png\"", " SRC='b.png'", "data-alt",
                "é", "<img/", "alt=\"\"", "x",
            ]), 0..24)
        ) {
            let html = parts.concat();
            proptest::prop_assert_eq!(image_without_alt(&html), image_without_alt_by_lowercasing(&html));
        }
    }

    #[test]
    fn a_page_past_a_megabyte_is_inlined_whole() {
        let text = "x".repeat(1 << 21);
        let html = format!(
            "<html><head><style>p {{ margin: 0; }}</style></head><body><p>{text}</p><p>end</p></body></html>"
        );
        let out = prepare(&html).expect("prepare");
        assert!(out.contains(&format!(r#"<p style="margin: 0;">{text}</p>"#)));
        assert!(
            out.contains(r#"<p style="margin: 0;">end</p>"#),
            "the page's end"
        );
    }

    #[test]
    fn a_page_inlined_to_more_than_three_times_its_size_is_whole() {
        let rows = "<tr><td class=\"c\">1</td></tr>".repeat(200);
        let css = "td.c { padding: 1px 2px 3px 4px; font-family: Helvetica, Arial, sans-serif; }";
        let html = format!(
            "<html><head><style>{css}</style></head><body><table>{rows}</table></body></html>"
        );
        let out = prepare(&html).expect("prepare");
        assert!(
            out.len() > 3 * html.len(),
            "{} against {}",
            out.len(),
            html.len()
        );
        assert_eq!(
            out.matches("padding: 1px 2px 3px 4px").count(),
            201,
            "{out}"
        );
        assert!(out.trim_end().ends_with("</html>"), "{out}");
    }
}
