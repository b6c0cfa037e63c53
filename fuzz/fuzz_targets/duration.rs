//! Durations as written in configuration: parse, and an accepted one converts and prints.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(span) = text.parse::<dawnpost::Span>() {
        assert!(span <= dawnpost::Span::MAX);
        let _ = span.as_chrono();
        let _ = span.to_string();
        let now = chrono::Utc::now();
        let _ = dawnpost::domain::clock::add(now, span.as_chrono());
        let _ = dawnpost::domain::clock::sub(now, span.as_chrono());
    }
});
