//! The console's pages as HTML (maud escapes every interpolated value). One page shell; each
//! page a function from what it shows to markup.

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::session::Session;

/// The page shell: head, navigation, the signed-in role and a sign-out form.
pub(crate) fn shell(title: &str, session: Option<&Session>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · dawnpost" }
                link rel="stylesheet" href="/ui/static/console.css";
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/ui/" { "dawnpost" }
                    @if let Some(s) = session {
                        nav aria-label="Sections" {
                            a href="/ui/" { "Overview" }
                            a href="/ui/jobs" { "Jobs" }
                            a href="/ui/dlq" { "Dead letters" }
                            a href="/ui/suppressions" { "Suppressions" }
                            a href="/ui/retention" { "Retention" }
                            a href="/ui/reports" { "Reports" }
                        }
                        form.signout method="post" action="/ui/logout" {
                            input type="hidden" name="csrf" value=(s.csrf);
                            span.role { (s.role.as_str()) }
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" { (body) }
            }
        }
    }
}

/// The login form; `problem` says why the last try failed, or that no token is configured.
pub fn login(problem: Option<&str>) -> Markup {
    shell(
        "Sign in",
        None,
        html! {
            h1 { "Sign in" }
            @if let Some(p) = problem {
                p.error role="alert" { (p) }
            }
            form.login method="post" action="/ui/login" {
                label for="token" { "Token" }
                input id="token" name="token" type="password" autocomplete="current-password" required autofocus;
                button type="submit" { "Sign in" }
            }
            p.hint {
                "The ops token signs in as operator (redrive, cancel); the viewer token reads only."
            }
        },
    )
}

/// A table box that scrolls sideways on a narrow screen, as a named region the keyboard can
/// reach and scroll (axe-core's scrollable-region-focusable).
pub(crate) fn scroll_region(label: &str, table: Markup) -> Markup {
    html! { div.table-wrap role="region" aria-label=(label) tabindex="0" { (table) } }
}

/// A state (or class) as a badge.
pub(crate) fn state_badge(state: &str) -> Markup {
    html! { span class={"state " (state)} { (state) } }
}

/// An instant, in UTC to the second, machine-readable in `datetime`.
pub fn when(at: DateTime<Utc>) -> Markup {
    html! {
        time datetime=(crate::domain::window::rfc3339(at)) { (at.format("%Y-%m-%d %H:%M:%S UTC")) }
    }
}

/// An instant in a report's local time with its offset, UTC beside it
/// (`2026-11-29 06:30:00 CET (UTC+01:00) · 05:30:00 UTC`); UTC alone without a zone (a report
/// no longer configured). An operator asked about "the 08:00 report" thinks in the report's
/// zone.
pub(crate) fn when_in(tz: Option<chrono_tz::Tz>, at: DateTime<Utc>) -> Markup {
    let Some(tz) = tz else {
        return when(at);
    };
    let local = at.with_timezone(&tz);
    let utc = if local.date_naive() == at.date_naive() {
        at.format("%H:%M:%S UTC").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    };
    html! {
        time datetime=(crate::domain::window::rfc3339(at)) {
            (local.format("%Y-%m-%d %H:%M:%S %Z (UTC%:z)")) " · " (utc)
        }
    }
}

/// A state → count table of the states that have any rows (an absent state has none).
pub fn counts<'a>(rows: impl Iterator<Item = (&'a str, i64)>) -> Markup {
    let rows: Vec<(&str, i64)> = rows.collect();
    html! {
        @if rows.is_empty() {
            p { "none" }
        } @else {
            table.counts {
                tbody {
                    @for (state, n) in &rows {
                        tr {
                            th scope="row" { (state_badge(state)) }
                            td.num { (n) }
                        }
                    }
                }
            }
        }
    }
}

/// How long ago `at` was, in its two largest units (`2d 3h`, `1h 30m`, `45s`); never negative.
pub fn age(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = u64::try_from(now.signed_duration_since(at).num_seconds()).unwrap_or(0);
    let units = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)];
    let Some(first) = units.iter().position(|(_, size)| secs >= *size) else {
        return "0s".into();
    };
    units[first..]
        .iter()
        .take(2)
        .scan(secs, |left, (unit, size)| {
            let n = *left / size;
            *left %= size;
            Some((n, unit))
        })
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_two_units() {
        let now = DateTime::from_timestamp(1_000_000, 0).unwrap_or_default();
        let ago = |s: i64| age(now - chrono::Duration::seconds(s), now);
        assert_eq!(ago(0), "0s");
        assert_eq!(ago(45), "45s");
        assert_eq!(ago(5_400), "1h 30m");
        assert_eq!(ago(3_600), "1h");
        assert_eq!(ago(2 * 86_400 + 3 * 3_600 + 59), "2d 3h");
        assert_eq!(ago(-30), "0s", "a future instant");
    }
}
