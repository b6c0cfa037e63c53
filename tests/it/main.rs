//! The integration tests, one crate: a module per theme, sharing `common` (config folders,
//! ledgers on both backends, real peers). One binary links the library once.

#[macro_use]
mod common;

mod aiosmtpd;
mod alerts;
mod browser;
mod bulk_redrive;
mod cli;
mod config_validation;
mod console;
mod console_dlq;
mod console_jobs;
mod console_pages;
mod contracts;
mod crash;
mod cron_croniter;
mod cron_property;
mod email_browser;
mod email_checkers;
mod email_message;
mod hostile_http;
mod http_protocol;
mod layering;
mod ledger_batches;
mod ledger_browse;
mod ledger_conformance;
mod ledger_deliveries;
mod ledger_faults;
mod ledger_operations;
mod log_pipe;
mod messages;
mod metrics_format;
mod migrate;
mod node_faults;
mod nodes;
mod pipeline;
mod pipeline_faults;
mod postgres_open;
mod rate_limits;
mod readiness;
mod readiness_probes;
mod report_size;
mod retention;
mod runbook;
mod s3_nodes;
mod schedule_dst;
mod scheduler_tick;
mod server;
mod skip_empty;
mod smtp_relay;
mod sources;
mod sqlite_full;
mod tls_trust;
mod upgrade;
mod work_format;
