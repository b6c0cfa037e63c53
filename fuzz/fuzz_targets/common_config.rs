#![allow(dead_code)]
// Shared by the configuration targets: a project directory with the shipped template and
// sample, and the three files, one of them the fuzzer's input.
use std::path::Path;

pub const SETTINGS: &str = "[database]\nurl = \"sqlite://var/ledger.db\"\n";
pub const REPORTS: &str = r#"[[report]]
id = "warehouse-17"
title = "Warehouse 17"
schedule = "0 30 6 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample.json" }
email = ["ops@example.com"]
"#;

/// Loads a configuration whose files are `settings`, `reports` and `retention`; it may fail,
/// never panic.
pub fn load(settings: &str, reports: &str, retention: &str) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let root = dir.path();
    let config = root.join("config");
    let write = |p: &Path, text: &str| std::fs::write(p, text).is_ok();
    if std::fs::create_dir_all(&config).is_err()
        || !write(&config.join("dawnpost.toml"), settings)
        || !write(&config.join("reports.toml"), reports)
        || !write(&config.join("retention.toml"), retention)
        || !write(&config.join("sample.json"), "{\"rows\": []}")
    {
        return;
    }
    let _ = dawnpost::Config::load(&config);
}
