//! `dawnpost.toml`, any bytes: loading refuses or accepts, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common_config.rs"]
mod common_config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        common_config::load(text, common_config::REPORTS, "");
    }
});
