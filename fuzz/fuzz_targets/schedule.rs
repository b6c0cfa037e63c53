//! A cron expression and a timezone name (one line each): parsed as configuration parses
//! them; an accepted schedule yields fires, jobs and windows without panicking.
#![no_main]
use std::str::FromStr;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (expr, tz) = text.split_once('\n').unwrap_or((text, "Europe/Berlin"));
    let Ok(tz) = chrono_tz::Tz::from_str(tz.trim()) else {
        return;
    };
    let Ok(schedule) = dawnpost::domain::cron::Schedule::parse(expr, tz) else {
        return;
    };
    let from = chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap_or_default();
    for fire in schedule.next_fires(from, 3) {
        let date = fire.with_timezone(&tz).date_naive();
        let _ = dawnpost::domain::window::Window::previous_local_day(date, tz);
    }
    let _ = schedule.fires(from, dawnpost::domain::clock::add(from, chrono::Duration::days(40)));
});
