//! The periods' and `send_when`'s rows of the bad-input table (`config_cases.rs`).

use crate::config_cases::{Case, Edit};

const R: &str = "config/reports.toml";

fn case(
    name: &'static str,
    keys: &'static str,
    field: &'static str,
    message: &'static str,
) -> Case {
    Case {
        name,
        edits: vec![Edit::Append(R, keys)],
        file: "reports.toml",
        report: Some("warehouse-17"),
        field,
        message,
    }
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        case(
            "an unknown period",
            "window = \"fortnight\"\n",
            "window",
            "\"fortnight\" is not a window: use \"day\", \"week\", \"month\", \"quarter\" or \"since_previous\"",
        ),
        case(
            "a period that is not text",
            "window = 7\n",
            "window",
            "invalid type: integer `7`, expected a string",
        ),
        case(
            "week_starts not a weekday",
            "window = \"week\"\nweek_starts = \"someday\"\n",
            "week_starts",
            "\"someday\" is not a weekday",
        ),
        case(
            "week_starts without a weekly window",
            "window = \"month\"\nweek_starts = \"sunday\"\n",
            "week_starts",
            "week_starts applies only to window = \"week\"",
        ),
        case(
            "week_starts with the default window",
            "week_starts = \"monday\"\n",
            "week_starts",
            "the window is \"day\"",
        ),
        case(
            "an unknown send_when",
            "send_when = \"sometimes\"\n",
            "send_when",
            "\"sometimes\": use \"always\", \"results\", \"changed\" or \"alert\"",
        ),
        case(
            "send_when always beside skip_if_empty",
            "send_when = \"always\"\nskip_if_empty = \"data.rows\"\n",
            "send_when",
            "write send_when = \"results\", or leave one out",
        ),
        case(
            "an alert whose bound is a string",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\nabove = \"20\"\n",
            "alert.above",
            "expected a number, found the string \"20\": write the number without quotes",
        ),
        case(
            "an alert without a bound",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\n",
            "alert.above",
            "missing: an alert needs above, below or both",
        ),
        case(
            "an alert whose value is not a data path",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"summary.orders_late\"\nabove = 20\n",
            "alert.value",
            "is not a path into the source data",
        ),
        case(
            "an alert whose bounds leave no value fine",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\nabove = 5\nbelow = 10\n",
            "alert.below",
            "10 is not below above = 5: no value could be fine",
        ),
        case(
            "an alert that repeats at no known pace",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\nabove = 20\nrepeat = \"often\"\n",
            "alert.repeat",
            "\"often\": use \"never\", \"every_run\" or a duration such as \"3d\"",
        ),
        case(
            "an alert table without send_when = alert",
            "send_when = \"changed\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\nabove = 20\n",
            "alert",
            "needs send_when = \"alert\"",
        ),
        case(
            "send_when alert without its table",
            "send_when = \"alert\"\n",
            "alert",
            "send_when = \"alert\" needs [report.alert] with value and above or below",
        ),
        case(
            "an unknown key in the alert",
            "send_when = \"alert\"\n[report.alert]\nvalue = \"data.summary.orders_late\"\nabove = 20\nthreshold = 3\n",
            "alert.threshold",
            "unknown",
        ),
    ]
}
