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
pub fn prepare(html: &str) -> Result<String, HtmlError> {
    if let Some(src) = image_without_alt(html) {
        return Err(HtmlError::NoAlt(src));
    }
    let inliner = css_inline::CSSInliner::options()
        .keep_style_tags(true)
        .load_remote_stylesheets(false)
        .build();
    Ok(inliner.inline(html)?)
}

/// The `src` of the first `<img>` without an `alt` attribute, if any.
fn image_without_alt(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<img") {
        let start = from + at;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        from = end;
        let after = tag.as_bytes().get(4).copied();
        if !after.is_some_and(|b| b.is_ascii_whitespace() || b == b'/') && after.is_some() {
            continue; // <imgx…>, not an image
        }
        if !has_attribute(tag, "alt") {
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
}
