//! `Retry-After` values as receivers send them: seconds or an HTTP date, never negative.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap_or_default();
    if let Some(d) = dawnpost::delivery::retry::parse_retry_after(text, now) {
        assert!(d >= chrono::Duration::zero());
    }
});
