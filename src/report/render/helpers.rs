//! Template helpers: `local_time` and `number`, so templates never format by hand.

use chrono::DateTime;
use handlebars::Handlebars;
use serde_json::Value;

type Text = fn(
    &handlebars::Helper<'_>,
    &handlebars::Context,
) -> Result<String, handlebars::RenderErrorReason>;

/// A helper that formats a value and writes it through `escape` (as is in HTML and text
/// templates, as one CSV field in a CSV template).
pub(super) struct Formatted {
    text: Text,
    escape: fn(&str) -> String,
}

impl handlebars::HelperDef for Formatted {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &handlebars::Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        ctx: &'rc handlebars::Context,
        _: &mut handlebars::RenderContext<'reg, 'rc>,
        out: &mut dyn handlebars::Output,
    ) -> handlebars::HelperResult {
        out.write(&(self.escape)(&(self.text)(h, ctx)?))?;
        Ok(())
    }
}

/// `{{local_time INSTANT}}`: an RFC 3339 instant in the report's timezone with its offset
/// (`2026-11-28 00:00 CET (UTC+01:00)`); `format="%H:%M"` picks a chrono format instead.
pub(super) fn local_time(escape: fn(&str) -> String) -> Box<Formatted> {
    Box::new(Formatted {
        text: local_time_text,
        escape,
    })
}

/// `{{number X}}`: a number with thousands separators (`1,842`); `decimals=N` rounds to N
/// places (`98.8`).
pub(super) fn number(escape: fn(&str) -> String) -> Box<Formatted> {
    Box::new(Formatted {
        text: number_text,
        escape,
    })
}

/// `local_time`'s format when the template names none, parsed once.
static DEFAULT_TIME: std::sync::LazyLock<Vec<chrono::format::Item<'static>>> =
    std::sync::LazyLock::new(|| {
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M %Z (UTC%:z)").collect()
    });

fn local_time_text(
    h: &handlebars::Helper<'_>,
    ctx: &handlebars::Context,
) -> Result<String, handlebars::RenderErrorReason> {
    let other = |m: String| handlebars::RenderErrorReason::Other(m);
    let instant = param(h, "local_time")?
        .as_str()
        .ok_or_else(|| other("local_time needs an RFC 3339 instant".into()))?;
    let t = DateTime::parse_from_rfc3339(instant).map_err(|e| {
        other(format!(
            "local_time: {instant:?} is not an RFC 3339 instant: {e}"
        ))
    })?;
    let zone = ctx
        .data()
        .pointer("/report/timezone")
        .and_then(|v| v.as_str())
        .unwrap_or("UTC");
    let tz: chrono_tz::Tz = zone
        .parse()
        .map_err(|_| other(format!("local_time: {zone:?} is not a timezone")))?;
    let local = t.with_timezone(&tz);
    let mut shown = String::new();
    let written = match h.hash_get("format").and_then(|v| v.value().as_str()) {
        Some(format) => {
            std::fmt::Write::write_fmt(&mut shown, format_args!("{}", local.format(format)))
                .map_err(|_| other(format!("local_time: {format:?} is not a time format")))
        }
        // The default's items are parsed once, not at every cell of every render.
        None => std::fmt::Write::write_fmt(
            &mut shown,
            format_args!("{}", local.format_with_items(DEFAULT_TIME.iter())),
        )
        .map_err(|_| other("local_time: the instant cannot be shown".into())),
    };
    written.map(|()| shown)
}

fn number_text(
    h: &handlebars::Helper<'_>,
    _: &handlebars::Context,
) -> Result<String, handlebars::RenderErrorReason> {
    let value = param(h, "number")?
        .as_f64()
        .ok_or_else(|| handlebars::RenderErrorReason::Other("number needs a number".into()))?;
    let decimals = h
        .hash_get("decimals")
        .and_then(|v| v.value().as_u64())
        .unwrap_or(0)
        .min(6) as usize;
    Ok(grouped(value, decimals))
}

/// A helper's first parameter; a missing field is refused naming it, as strict mode does.
fn param<'a>(
    h: &'a handlebars::Helper<'_>,
    helper: &str,
) -> Result<&'a Value, handlebars::RenderErrorReason> {
    let p = h.param(0).ok_or_else(|| {
        handlebars::RenderErrorReason::Other(format!("{helper} needs a parameter"))
    })?;
    if p.is_value_missing() || p.value().is_null() {
        return Err(handlebars::RenderErrorReason::MissingVariable(
            p.relative_path().cloned(),
        ));
    }
    Ok(p.value())
}

/// `value` to `decimals` places with a comma every three digits of its integer part.
pub fn grouped(value: f64, decimals: usize) -> String {
    let text = plain(value.abs(), decimals);
    let (int, frac) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    if value < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// `value` (not negative) to `decimals` places, as `format!("{:.*}", decimals, value)` writes
/// it. A whole number below 2^53 (a count, the usual figure) is written as an integer: the
/// float formatter's exact mode takes its slow path for it, thousands of instructions a cell.
fn plain(value: f64, decimals: usize) -> String {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every whole number below is exact
    if value.fract() == 0.0 && (0.0..EXACT).contains(&value) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole, in range
        let whole = value as u64;
        let mut text = whole.to_string();
        if decimals > 0 {
            text.push('.');
            text.extend(std::iter::repeat_n('0', decimals));
        }
        return text;
    }
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(template: &str, tz: &str, data: Value) -> String {
        let mut h = super::super::strict_registry();
        h.register_template_string("t", template).expect("template");
        let ctx = json!({ "report": { "timezone": tz }, "data": data });
        h.render("t", &ctx)
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn local_time_shows_the_reports_zone_and_offset_across_dst() {
        let t = "{{local_time data.at}}";
        let winter = json!({ "at": "2026-11-28T23:00:00Z" });
        assert_eq!(
            render(t, "Europe/Berlin", winter),
            "2026-11-29 00:00 CET (UTC+01:00)"
        );
        let summer = json!({ "at": "2026-07-01T22:00:00Z" });
        assert_eq!(
            render(t, "Europe/Berlin", summer),
            "2026-07-02 00:00 CEST (UTC+02:00)"
        );
        let sydney = json!({ "at": "2026-11-28T13:00:00Z" });
        assert_eq!(
            render(t, "Australia/Sydney", sydney),
            "2026-11-29 00:00 AEDT (UTC+11:00)"
        );
        let custom = render(
            "{{local_time data.at format=\"%H:%M\"}}",
            "Europe/Berlin",
            json!({ "at": "2026-11-28T05:30:00Z" }),
        );
        assert_eq!(custom, "06:30");
        let bad = render(t, "Europe/Berlin", json!({ "at": "yesterday" }));
        assert!(
            bad.starts_with("error:") && bad.contains("not an RFC 3339 instant"),
            "{bad}"
        );
    }

    #[test]
    fn numbers_are_grouped_and_rounded() {
        assert_eq!(grouped(1842.0, 0), "1,842");
        assert_eq!(grouped(1_234_567.0, 0), "1,234,567");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(98.76, 1), "98.8");
        assert_eq!(grouped(-12_345.5, 1), "-12,345.5");
        assert_eq!(grouped(-0.01, 1), "0.0");
        assert_eq!(grouped(-0.0, 0), "0");
        assert_eq!(grouped(42.0, 2), "42.00");
        assert_eq!(
            grouped(2.5, 0),
            "2",
            "ties to even, as the formatter rounds"
        );
        assert_eq!(
            grouped(1e300, 0).len(),
            301 + 100,
            "a huge figure keeps every digit"
        );
        assert_eq!(
            render("{{number data.n}}", "UTC", json!({ "n": 6210 })),
            "6,210"
        );
        let missing = render("{{number data.n}}", "UTC", json!({}));
        assert!(
            missing.starts_with("error:") && missing.contains("data.n"),
            "strict, naming the field: {missing}"
        );
    }

    #[test]
    fn whole_numbers_read_as_the_float_formatter_writes_them() {
        let mut cases = vec![0.0, 1.0, 9.0, 10.0, 999.0, 1000.0, 123_456_789.0];
        cases.extend([2f64.powi(53) - 1.0, 2f64.powi(53), 2f64.powi(60)]);
        cases.extend((0..2000).map(|n| f64::from(n * 7919)));
        for value in cases {
            for decimals in [0, 1, 3, 6] {
                assert_eq!(
                    plain(value, decimals),
                    format!("{value:.decimals$}"),
                    "{value} to {decimals} places"
                );
            }
        }
    }

    #[test]
    fn in_a_csv_template_every_value_is_one_field() {
        let mut h = super::super::strict_registry();
        h.register_escape_fn(super::super::csv::escape);
        h.register_helper("number", number(super::super::csv::escape));
        h.register_template_string("t", "{{number data.n}},{{data.s}},{{data.f}}")
            .expect("template");
        let ctx = json!({ "data": { "n": 1842, "s": "Trailer 4, door 2", "f": "=1+1" } });
        assert_eq!(
            h.render("t", &ctx).expect("render"),
            "\"1,842\",\"Trailer 4, door 2\",'=1+1"
        );
    }
}
