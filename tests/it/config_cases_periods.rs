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
            "\"sometimes\": use \"always\" or \"results\"",
        ),
        case(
            "send_when always beside skip_if_empty",
            "send_when = \"always\"\nskip_if_empty = \"data.rows\"\n",
            "send_when",
            "write send_when = \"results\", or leave one out",
        ),
    ]
}
