//! The CSV part's escaping: every value a template prints is one RFC 4180 field.

/// `value` as one CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line
/// break; a text that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab or carriage
/// return first, and not a number) is prefixed with `'` (OWASP's CSV injection advice).
pub(crate) fn escape(value: &str) -> String {
    let formula = value.starts_with(['=', '+', '-', '@', '\t', '\r'])
        && value.replace(',', "").parse::<f64>().is_err();
    let field = if formula {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field
    }
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(escape("DHL Freight"), "DHL Freight");
        assert_eq!(escape("Trailer 4, door 2"), "\"Trailer 4, door 2\"");
        assert_eq!(escape("say \"late\""), "\"say \"\"late\"\"\"");
        assert_eq!(escape("two\nlines"), "\"two\nlines\"");
        assert_eq!(escape("1,842"), "\"1,842\"");
    }

    #[test]
    fn formulas_are_defused_and_negative_numbers_kept() {
        assert_eq!(escape("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(escape("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(escape("+49 203 1234"), "'+49 203 1234");
        assert_eq!(escape("-12"), "-12");
        assert_eq!(escape("-1,234.5"), "\"-1,234.5\"");
    }
}
