//! `cargo bench --bench render [-- --reports N --artifacts URL --charts C]`: the render stage
//! alone, as the pool runs it for a job — fetch the file source, render the shipped template
//! (HTML and text, and C charts of the sample's data drawn to PNG, 0 to 2, default 0), write
//! the artifact create-only — 16 at a time over N jobs (default 10,000), with no ledger and no
//! deliveries. Prints `renders_per_s` and `cpu_us_per_render` (this process).
//! The pipeline bench's `renders_per_s` is bound by its deliveries; this is the stage's own.

#[allow(dead_code)]
#[path = "support/sinks.rs"]
mod sinks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dawnpost::Config;
use dawnpost::report::artifact::ArtifactStore;
use dawnpost::report::render::Templates;

const CONCURRENCY: usize = 16;

fn main() {
    let (jobs, _) = sinks::size();
    let url = sinks::arg("--artifacts").unwrap_or_else(|| "file://var/artifacts".into());
    sinks::runtime().block_on(async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let unused: std::net::SocketAddr = ([127, 0, 0, 1], 9).into();
        sinks::project(dir.path(), jobs.clamp(1, 100), 1, 0, unused, unused, "");
        let charts: usize = sinks::arg("--charts")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        with_charts(&dir.path().join("config/reports.toml"), charts);
        let config = Config::load(&dir.path().join("config"), &dawnpost::delivery::readers())
            .unwrap_or_else(|e| panic!("{e}"));
        let templates = Arc::new(
            Templates::load(&config.root, "daily_ops", &config.template_parts).expect("template"),
        );
        let store = ArtifactStore::open(&url, &config.root).expect("store");
        let http = reqwest::Client::new();
        let todo = sinks::jobs(&config, jobs, chrono::Utc::now());
        let reports = config.reports_by_id();
        let cpu = sinks::cpu_seconds();
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for job in todo {
            if set.len() >= CONCURRENCY {
                set.join_next().await.expect("a render").expect("join");
            }
            let report = reports[job.key.report().as_str()].clone();
            let (templates, store, http) = (templates.clone(), store.clone(), http.clone());
            set.spawn(async move {
                let data = dawnpost::report::source::fetch_within(
                    &report.source,
                    &job.window,
                    &http,
                    Duration::from_secs(60),
                    report.source_limit,
                )
                .await
                .expect("fetch");
                let date = job.key.date();
                let context = dawnpost::report::render::context(
                    &report,
                    (date, job.fire_at),
                    &job.window,
                    data,
                    (false, None),
                );
                let extras = dawnpost::report::render::Extras {
                    defaults: &[],
                    charts: &report.charts,
                    xlsx: report.attach.xlsx,
                };
                let rendered = templates.render(context, &extras).expect("render");
                let day = dawnpost::domain::keys::IsoDate(date).to_string();
                store
                    .write(report.id.as_str(), &day, &Arc::new(rendered))
                    .await
                    .expect("write");
            });
        }
        while let Some(done) = set.join_next().await {
            done.expect("join");
        }
        let seconds = started.elapsed().as_secs_f64();
        let cpu_us = (sinks::cpu_seconds() - cpu) * 1e6 / jobs as f64;
        println!(
            "{}",
            serde_json::json!({
                "artifacts": url,
                "renders": jobs,
                "seconds": (seconds * 1000.0).round() / 1000.0,
                "renders_per_s": (jobs as f64 / seconds).round(),
                "cpu_us_per_render": cpu_us.round(),
            })
        );
    });
}

/// Gives every report of `reports_toml` the first `n` of two charts of the sample's data: its
/// hours as stacked bars (the shipped template shows it) and its shifts as bars.
fn with_charts(reports_toml: &std::path::Path, n: usize) {
    const CHARTS: [&str; 2] = [
        "[[report.chart]]\nid = \"by_hour\"\nkind = \"stacked_bar\"\ntitle = \"Orders by hour\"\ndata = \"data.hours\"\nx = \"hour\"\ny = [\"on_time\", \"late\"]\n",
        "[[report.chart]]\nid = \"by_shift\"\nkind = \"bar\"\ntitle = \"Shipped and late by shift\"\ndata = \"data.rows\"\nx = \"shift\"\ny = [\"shipped\", \"late\"]\n",
    ];
    if n == 0 {
        return;
    }
    let text = std::fs::read_to_string(reports_toml).expect("reports");
    let charts: String = CHARTS.iter().take(n).copied().collect();
    let blocks: Vec<String> = (text.split("[[report]]\n").filter(|b| !b.trim().is_empty()))
        .map(|b| format!("[[report]]\n{b}{charts}"))
        .collect();
    std::fs::write(reports_toml, blocks.concat()).expect("write");
}
