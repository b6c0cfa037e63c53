//! `retention.toml`, any bytes: loading refuses or accepts, never panics; an accepted policy
//! answers for any report.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else { return };
    let file = dir.path().join("retention.toml");
    if std::fs::write(&file, text).is_err() {
        return;
    }
    if let Ok(policy) = dawnpost::config::RetentionPolicy::load(&file) {
        let _ = policy.for_report("warehouse-17");
        let _ = policy.shortest();
    }
});
