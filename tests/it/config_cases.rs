//! The table of bad inputs `config_validation.rs` runs: each case spoils the valid base project
//! and names the file, the report and the field its error must carry, and words of its message.

/// How a case spoils the valid base project.
pub(crate) enum Edit {
    /// Replace text in a file (the text must be there).
    Replace(&'static str, &'static str, &'static str),
    /// Append text to a file.
    Append(&'static str, &'static str),
    /// Write a file.
    Write(&'static str, &'static str),
}

/// One bad input: the edits that make it, and where its error must point.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) edits: Vec<Edit>,
    pub(crate) file: &'static str,
    pub(crate) report: Option<&'static str>,
    pub(crate) field: &'static str,
    pub(crate) message: &'static str,
}

const R: &str = "config/reports.toml";
const S: &str = "config/dawnpost.toml";
const P: &str = "config/retention.toml";

pub(crate) fn cases() -> Vec<Case> {
    let mut all = base_cases();
    all.extend(crate::config_cases_chat::cases());
    all.extend(crate::config_cases_chat::chart_cases());
    all.extend(crate::config_cases_periods::cases());
    all
}

fn base_cases() -> Vec<Case> {
    use Edit::*;
    vec![
        Case {
            name: "report id pattern",
            edits: vec![Replace(R, "id = \"warehouse-17\"", "id = \"Warehouse_17\"")],
            file: "reports.toml",
            report: Some("Warehouse_17"),
            field: "id",
            message: "does not match [a-z0-9][a-z0-9-]*",
        },
        Case {
            name: "report id too long",
            edits: vec![Replace(
                R,
                "id = \"warehouse-17\"",
                "id = \"warehouse-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
            )],
            file: "reports.toml",
            report: Some(
                "warehouse-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            ),
            field: "id",
            message: "longer than 63 characters",
        },
        Case {
            name: "duplicate report id",
            edits: vec![Append(R, DUPLICATE)],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "id",
            message: "duplicate report id",
        },
        Case {
            name: "five-field cron",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"30 6 * * *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "has 5 field(s); write six",
        },
        Case {
            name: "cron out of range",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"0 61 6 * * *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "is not a valid cron expression",
        },
        Case {
            name: "cron that never fires",
            edits: vec![Replace(R, "\"0 30 6 * * *\"", "\"0 30 6 31 2 *\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "schedule",
            message: "never fires",
        },
        Case {
            name: "unknown timezone",
            edits: vec![Replace(R, "\"Europe/Berlin\"", "\"Europe/Berln\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "timezone",
            message: "\"Europe/Berln\" is not an IANA timezone",
        },
        Case {
            name: "template file missing",
            edits: vec![Replace(
                R,
                "template = \"daily_ops\"",
                "template = \"weekly_ops\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "weekly_ops.html.hbs",
        },
        Case {
            name: "template with an unknown helper",
            edits: vec![Append(
                "templates/daily_ops.txt.hbs",
                "{{shout data.site}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "shout",
        },
        Case {
            name: "template with an unknown partial",
            edits: vec![Append("templates/daily_ops.html.hbs", "{{> footer}}\n")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "footer",
        },
        Case {
            name: "template field missing from the sample data",
            edits: vec![Append(
                "templates/daily_ops.html.hbs",
                "{{data.summary.returns}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "data.summary.returns",
        },
        Case {
            name: "template syntax error",
            edits: vec![Append(
                "templates/daily_ops.txt.hbs",
                "{{#each data.rows}}\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "template",
            message: "daily_ops.txt.hbs",
        },
        Case {
            name: "unknown source kind",
            edits: vec![Replace(R, "kind = \"file\"", "kind = \"ftp\"")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.kind",
            message: "\"ftp\" is not a source kind",
        },
        Case {
            name: "source file missing",
            edits: vec![Replace(R, "sample/warehouse-17.json", "sample/nope.json")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "cannot read",
        },
        Case {
            name: "source file a device",
            edits: vec![Replace(R, "config/sample/warehouse-17.json", "/dev/zero")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "/dev/zero is not a regular file",
        },
        Case {
            name: "source file not JSON",
            edits: vec![Write("config/sample/warehouse-17.json", "{ rows: [ }")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.path",
            message: "is not valid JSON",
        },
        Case {
            name: "http source with a bad URL",
            edits: vec![Replace(
                R,
                "{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "{ kind = \"http\", url = \"gopher://ops/{{window.start}}\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.url",
            message: "is not an http or https URL",
        },
        Case {
            name: "sql source without its query file",
            edits: vec![Replace(
                R,
                "{ kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "{ kind = \"sql\", url_env = \"OPS_DB_URL\", query = \"config/queries/missing.sql\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.query",
            message: "does not exist",
        },
        Case {
            name: "email address that does not parse",
            edits: vec![Replace(
                R,
                "\"ops@example.com\"",
                "\"ops@example.com\", \"not-an-address\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "email[1]",
            message: "\"not-an-address\" is not an email address",
        },
        Case {
            name: "webhook URL with another scheme",
            edits: vec![Append(
                R,
                "[[report.webhook]]\nurl = \"ftp://carrier.example/hooks\"\n",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "webhook[0].url",
            message: "scheme \"ftp\" is not http or https",
        },
        Case {
            name: "unknown key in a report",
            edits: vec![Append(R, "shedule = \"0 0 7 * * *\"\n")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "shedule",
            message: "unknown key",
        },
        Case {
            name: "missing title",
            edits: vec![Replace(R, "title = \"Report warehouse-17\"\n", "")],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "title",
            message: "missing required field",
        },
        Case {
            name: "unknown key in a settings section",
            edits: vec![Write(S, "[pool]\nconcurency = 4\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.concurency",
            message: "unknown key",
        },
        Case {
            name: "a service interval too short",
            edits: vec![Write(S, "[services]\nrunbooks_every = \"10ms\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "services.runbooks_every",
            message: "10ms is too short: at least 100ms",
        },
        Case {
            name: "unknown key in [services]",
            edits: vec![Write(S, "[services]\nsweep_every = \"1m\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "services.sweep_every",
            message: "unknown key",
        },
        Case {
            name: "duration with an unknown unit",
            edits: vec![Write(S, "[retry]\ncap = \"15x\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "retry.cap",
            message: "invalid duration \"15x\": unknown unit",
        },
        Case {
            name: "huge lease",
            edits: vec![Write(S, "[pool]\nlease = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.lease",
            message: "longer than 100 years",
        },
        Case {
            name: "huge catch_up",
            edits: vec![Write(S, "[schedule]\ncatch_up = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "schedule.catch_up",
            message: "longer than 100 years",
        },
        Case {
            name: "huge max_age",
            edits: vec![Write(S, "[retry]\nmax_age = \"100000000w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "retry.max_age",
            message: "longer than 100 years",
        },
        Case {
            name: "huge drain_timeout",
            edits: vec![Write(S, "[pool]\ndrain_timeout = \"5300w\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.drain_timeout",
            message: "longer than 100 years",
        },
        Case {
            name: "retention duration over 100 years",
            edits: vec![Replace(P, "ledger = \"30d\"", "ledger = \"100000000w\"")],
            file: "retention.toml",
            report: None,
            field: "ledger",
            message: "longer than 100 years",
        },
        Case {
            name: "artifact store run cannot open",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"ftp://files.example/reports\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.url",
            message: "is not an object store",
        },
        Case {
            name: "database pool of one connection",
            edits: vec![Write(S, "[database]\nmax_connections = 1\n")],
            file: "dawnpost.toml",
            report: None,
            field: "database.max_connections",
            message: "out of range: 2 to 1000",
        },
        Case {
            name: "s3 setting on a file store",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"file://var/artifacts\"\nendpoint = \"http://127.0.0.1:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "only applies to an s3:// store",
        },
        Case {
            name: "s3 endpoint not a URL",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\nendpoint = \"minio:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "is not an http(s) URL",
        },
        Case {
            name: "s3 plain http endpoint without allow_http",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\nendpoint = \"http://127.0.0.1:9000\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.endpoint",
            message: "set allow_http = true",
        },
        Case {
            name: "s3 credentials variable not a name",
            edits: vec![Write(
                S,
                "[artifacts]\nurl = \"s3://reports\"\naccess_key_id_env = \"MY KEY\"\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "artifacts.access_key_id_env",
            message: "is not an environment variable name",
        },
        Case {
            name: "source limit over 1GiB",
            edits: vec![Replace(
                R,
                "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\" }",
                "source = { kind = \"file\", path = \"config/sample/warehouse-17.json\", limit = \"2GiB\" }",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "source.limit",
            message: "is not a size from 1 byte to 1GiB",
        },
        Case {
            name: "zero lease",
            edits: vec![Write(S, "[pool]\nlease = \"0s\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.lease",
            message: "must be longer than zero",
        },
        Case {
            name: "zero clock offset",
            edits: vec![Write(S, "[pool]\nmax_clock_offset = \"0s\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.max_clock_offset",
            message: "must be longer than zero",
        },
        Case {
            name: "smtp URL with another scheme",
            edits: vec![Write(S, "[email]\nsmtp_url = \"http://127.0.0.1:2525\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.smtp_url",
            message: "is not an smtp:// or smtps:// URL",
        },
        Case {
            name: "reply-to not an address",
            edits: vec![Write(S, "[email]\nreply_to = \"ops at example\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.reply_to",
            message: "invalid address \"ops at example\"",
        },
        Case {
            name: "list domain not a domain",
            edits: vec![Write(S, "[email]\nlist_domain = \"reports/example\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.list_domain",
            message: "is not a domain name",
        },
        Case {
            name: "EHLO name without a dot",
            edits: vec![Write(S, "[email]\nhelo_name = \"vm\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "email.helo_name",
            message: "is not a fully qualified domain name",
        },
        Case {
            name: "CA bundle missing",
            edits: vec![Write(S, "[tls]\nca_file = \"config/no-such-ca.pem\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "tls.ca_file",
            message: "cannot read",
        },
        Case {
            name: "CA bundle without a certificate",
            edits: vec![Write(S, "[tls]\nca_file = \"config/reports.toml\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "tls.ca_file",
            message: "holds no PEM certificate",
        },
        Case {
            name: "server limits of zero",
            edits: vec![Write(
                S,
                "[server]\nheader_timeout = \"0s\"\nmax_connections = 0\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "server.header_timeout",
            message: "must be longer than zero",
        },
        Case {
            name: "list-unsubscribe not mailto",
            edits: vec![Replace(
                R,
                "id = \"warehouse-17\"",
                "id = \"warehouse-17\"\nlist_unsubscribe = \"https://example.com/unsub\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "list_unsubscribe",
            message: "is not a mailto: URL with an address",
        },
        Case {
            name: "unsubscribe not a boolean",
            edits: vec![Replace(
                R,
                "id = \"warehouse-17\"",
                "id = \"warehouse-17\"\nunsubscribe = \"yes\"",
            )],
            file: "reports.toml",
            report: Some("warehouse-17"),
            field: "unsubscribe",
            message: "invalid type",
        },
        Case {
            name: "a topic that is no ARN",
            edits: vec![Write(
                S,
                "[recipients]\nses_topic_arns = [\"ses-bounces\"]\n",
            )],
            file: "dawnpost.toml",
            report: None,
            field: "recipients.ses_topic_arns",
            message: "is not an SNS topic ARN",
        },
        Case {
            name: "no soft bounces",
            edits: vec![Write(S, "[recipients]\nsoft_bounces = 0\n")],
            file: "dawnpost.toml",
            report: None,
            field: "recipients.soft_bounces",
            message: "must be at least 1",
        },
        Case {
            name: "soft bounce window of nothing",
            edits: vec![Write(S, "[recipients]\nsoft_bounce_window = \"0s\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "recipients.soft_bounce_window",
            message: "must be longer than zero",
        },
        Case {
            name: "wrong type",
            edits: vec![Write(S, "[pool]\nconcurrency = \"many\"\n")],
            file: "dawnpost.toml",
            report: None,
            field: "pool.concurrency",
            message: "invalid type",
        },
        Case {
            name: "retention ledger shorter than artifacts",
            edits: vec![Replace(P, "ledger = \"30d\"", "ledger = \"3d\"")],
            file: "retention.toml",
            report: None,
            field: "ledger",
            message: "ledger (3d) must be at least artifact (7d)",
        },
        Case {
            name: "retention override shorter ledger",
            edits: vec![Append(
                P,
                "[[override]]\nreports = \"warehouse-*\"\ndiagnostics = \"60d\"\n",
            )],
            file: "retention.toml",
            report: None,
            field: "override[0].ledger",
            message: "must be at least diagnostics (60d) (override \"warehouse-*\")",
        },
        Case {
            name: "retention override with a bad glob",
            edits: vec![Append(P, "[[override]]\nreports = \"warehouse-[\"\n")],
            file: "retention.toml",
            report: None,
            field: "override[0].reports",
            message: "is not a glob",
        },
        Case {
            name: "retention negative duration",
            edits: vec![Replace(P, "artifact = \"7d\"", "artifact = \"-7d\"")],
            file: "retention.toml",
            report: None,
            field: "artifact",
            message: "negative durations are not allowed",
        },
        Case {
            name: "TOML syntax error",
            edits: vec![Append(R, "[[report]\n")],
            file: "reports.toml",
            report: None,
            field: "(syntax)",
            message: "invalid TOML",
        },
    ]
}

const DUPLICATE: &str = r#"
[[report]]
id = "warehouse-17"
title = "Again"
schedule = "0 0 7 * * *"
timezone = "Europe/Berlin"
template = "daily_ops"
source = { kind = "file", path = "config/sample/warehouse-17.json" }
"#;
