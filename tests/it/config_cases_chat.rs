//! The chat destinations' and the figures' rows of the bad-input table (`config_cases.rs`).

use crate::config_cases::{Case, Edit};

const R: &str = "config/reports.toml";
const SLACK_TEMPLATE: &str = "templates/daily_ops.slack.hbs";

fn case(name: &'static str, edits: Vec<Edit>, field: &'static str, message: &'static str) -> Case {
    Case {
        name,
        edits,
        file: "reports.toml",
        report: Some("warehouse-17"),
        field,
        message,
    }
}

pub(crate) fn cases() -> Vec<Case> {
    use Edit::*;
    vec![
        case(
            "slack without url_env",
            vec![Append(R, "[[report.slack]]\non_ambiguous = \"retry\"\n")],
            "slack[0].url_env",
            "missing required field",
        ),
        case(
            "a webhook URL pasted into url_env",
            vec![Append(
                R,
                "[[report.slack]]\nurl_env = \"https://hooks.slack.example/services/T0/B0/secret\"\n",
            )],
            "slack[0].url_env",
            "holds a URL: put the webhook's URL in an environment variable",
        ),
        case(
            "url_env not a variable name",
            vec![Append(R, "[[report.teams]]\nurl_env = \"teams ops\"\n")],
            "teams[0].url_env",
            "\"teams ops\" is not an environment variable name",
        ),
        case(
            "on_ambiguous of no policy",
            vec![Append(
                R,
                "[[report.slack]]\nurl_env = \"SLACK_OPS\"\non_ambiguous = \"sometimes\"\n",
            )],
            "slack[0].on_ambiguous",
            "\"sometimes\": use \"quarantine\" or \"retry\"",
        ),
        case(
            "one webhook listed twice",
            vec![Append(
                R,
                "[[report.slack]]\nurl_env = \"SLACK_OPS\"\n[[report.slack]]\nurl_env = \"SLACK_OPS\"\n",
            )],
            "slack[1].url_env",
            "SLACK_OPS is listed twice",
        ),
        case(
            "slack as a string",
            vec![Append(R, "slack = \"SLACK_OPS\"\n")],
            "slack",
            "expected [[report.slack]] tables",
        ),
        case(
            "a Teams table with a url",
            vec![Append(
                R,
                "[[report.teams]]\nurl_env = \"TEAMS_OPS\"\nurl = \"https://x.example/\"\n",
            )],
            "teams[0].url",
            "unknown key",
        ),
        case(
            "owner_slack as a string",
            vec![Append(R, "owner_slack = \"SLACK_OPS\"\n")],
            "owner_slack",
            "expected a table such as { url_env = \"…\" }",
        ),
        case(
            "a figure's path outside the data",
            vec![Append(
                R,
                "figures = [{ label = \"Late\", path = \"summary.orders_late\" }]\n",
            )],
            "figures[0].path",
            "is not a path into the source data",
        ),
        case(
            "a figure without a label",
            vec![Append(
                R,
                "figures = [{ path = \"data.summary.orders_late\" }]\n",
            )],
            "figures[0].label",
            "missing required field",
        ),
        case(
            "one label for two figures",
            vec![Append(
                R,
                "figures = [{ label = \"Late\", path = \"data.summary.orders_late\" }, { label = \"Late\", path = \"data.summary.orders_shipped\" }]\n",
            )],
            "figures[1].label",
            "\"Late\" is named twice",
        ),
        case(
            "a slack template that is not Block Kit",
            vec![
                Write(
                    SLACK_TEMPLATE,
                    "{\"text\": \"{{report.title}}\", \"blocks\": [{\"type\": \"paragraph\"}]}",
                ),
                Append(R, "[[report.slack]]\nurl_env = \"SLACK_OPS\"\n"),
            ],
            "template",
            "blocks[0].type: \"paragraph\" is not a block type Slack takes",
        ),
        case(
            "a Teams card of version 1.6",
            vec![
                Write(
                    "templates/daily_ops.teams.hbs",
                    "{\"type\": \"AdaptiveCard\", \"version\": \"1.6\", \"body\": []}",
                ),
                Append(R, "[[report.teams]]\nurl_env = \"TEAMS_OPS\"\n"),
            ],
            "template",
            "version: \"1.6\", where Teams takes 1.0 to 1.5",
        ),
        case(
            "a figure the sample has no value for",
            vec![Append(
                R,
                "figures = [{ label = \"Returns\", path = \"data.summary.returns\" }]\n[[report.slack]]\nurl_env = \"SLACK_OPS\"\n",
            )],
            "template",
            "figure \"Returns\": the data has no value at data.summary.returns",
        ),
    ]
}

/// The charts' rows of the table.
pub(crate) fn chart_cases() -> Vec<Case> {
    use Edit::*;
    const CHART: &str = "[[report.chart]]\nid = \"late\"\nkind = \"line\"\ntitle = \"Late\"\ndata = \"data.rows\"\nx = \"shift\"\ny = [\"late\"]\n";
    let with = |from: &'static str, to: &'static str| -> Vec<Edit> {
        let chart: &'static str = Box::leak(CHART.replace(from, to).into_boxed_str());
        vec![Append(R, chart)]
    };
    vec![
        case(
            "a chart of no kind",
            with("kind = \"line\"", "kind = \"pie\""),
            "chart[0].kind",
            "\"pie\": use \"line\", \"bar\", \"stacked_bar\" or \"area\"",
        ),
        case(
            "a chart id with spaces",
            with("id = \"late\"", "id = \"late orders\""),
            "chart[0].id",
            "use 1 to 40 of a-z, 0-9, _ and -",
        ),
        case(
            "a chart's data outside the data",
            with("data = \"data.rows\"", "data = \"rows\""),
            "chart[0].data",
            "is not a path into the source data",
        ),
        case(
            "a chart of no series",
            with("y = [\"late\"]", "y = []"),
            "chart[0].y",
            "lists no field",
        ),
        case(
            "a chart without x",
            with("x = \"shift\"\n", ""),
            "chart[0].x",
            "missing required field",
        ),
        case(
            "two charts of one id",
            vec![Append(
                R,
                Box::leak(format!("{CHART}{CHART}").into_boxed_str()),
            )],
            "chart[1].id",
            "\"late\" is used by another chart",
        ),
        case(
            "an attachment of no kind",
            vec![Append(R, "attach = [\"csv\", \"pdf\"]\n")],
            "attach[1]",
            "\"pdf\": use \"csv\" or \"xlsx\"",
        ),
        case(
            "a spreadsheet of a template without a CSV part",
            vec![
                Replace(R, "template = \"daily_ops\"", "template = \"plain\""),
                Write("templates/plain.html.hbs", "<p>{{report.title}}</p>"),
                Write("templates/plain.txt.hbs", "{{report.title}}"),
                Append(R, "attach = [\"xlsx\"]\n"),
            ],
            "attach",
            "the template has no CSV part to attach",
        ),
        case(
            "a chart whose series is text in the sample",
            with("y = [\"late\"]", "y = [\"lead\"]"),
            "template",
            "chart \"late\": y: data.rows[0].lead is the text",
        ),
    ]
}
