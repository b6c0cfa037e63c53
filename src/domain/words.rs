//! Words a person reads: an error with its causes, each said once.

/// An error and each of its causes, outermost first.
pub(crate) fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}

/// An error and its causes in one line, each said once: `a: b: c`. Many errors print their
/// cause after their own words (`Connection error: …`), so a level's text loses the text of
/// the level below it before they are joined.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let texts: Vec<String> = causes(e).map(ToString::to_string).collect();
    let mut own: Vec<String> = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let mut mine = text.as_str();
        if let Some(below) = texts.get(i + 1)
            && let Some(head) = mine.strip_suffix(below.as_str())
        {
            mine = head.trim_end().trim_end_matches(':').trim_end();
        }
        let repeated_below = texts.get(i + 1).is_some_and(|b| b.starts_with(mine));
        if !mine.is_empty() && !repeated_below && own.last().map(String::as_str) != Some(mine) {
            own.push(mine.to_string());
        }
    }
    own.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("Connection error: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("Connection error: invalid peer certificate")]
    struct Inner;

    #[test]
    fn a_chain_says_each_cause_once() {
        assert_eq!(
            error_chain(&Outer(Inner)),
            "Connection error: invalid peer certificate"
        );
    }
}
