//! The body of `POST /v1/runs`: parsed as the handler parses it; a date accepted is a
//! four-digit-year date.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = dawnpost::server::parse_run_request(data) {
        if let Some(date) = req.date {
            use chrono::Datelike;
            assert!((0..=9999).contains(&date.year()));
        }
    }
});
