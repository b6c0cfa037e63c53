//! A path into a report's source data, as `skip_if_empty = "data.rows"` names it: `data` (the
//! source's JSON, as the template sees it), then object keys or array indexes, separated by
//! dots (`data.sections.0.rows`).

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A parsed path; shown as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPath {
    text: String,
    steps: Vec<Step>,
}

/// Why a path does not parse, for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DataPathError(String);

impl FromStr for DataPath {
    type Err = DataPathError;

    fn from_str(text: &str) -> Result<DataPath, DataPathError> {
        let mut parts = text.split('.');
        if parts.next() != Some("data") {
            return Err(DataPathError(format!(
                "{text:?} is not a path into the source data: it starts with `data` \
                 (data.rows, data.sections.0.rows)"
            )));
        }
        let steps = parts
            .map(|p| match p {
                "" => Err(DataPathError(format!("{text:?} has an empty step"))),
                p if p.bytes().all(|b| b.is_ascii_digit()) => p
                    .parse()
                    .map(Step::Index)
                    .map_err(|_| DataPathError(format!("{text:?}: index {p} is too large"))),
                p => Ok(Step::Key(p.to_string())),
            })
            .collect::<Result<Vec<Step>, DataPathError>>()?;
        Ok(DataPath {
            text: text.to_string(),
            steps,
        })
    }
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl DataPath {
    /// The value at this path in `data`, if there is one.
    pub(crate) fn resolve<'v>(&self, data: &'v Value) -> Option<&'v Value> {
        self.steps.iter().try_fold(data, |v, step| match step {
            Step::Key(k) => v.get(k.as_str()),
            Step::Index(i) => v.get(*i),
        })
    }

    /// Why `data` counts as empty here — the path missing or null, an empty array or object,
    /// an empty string — if it does.
    pub(crate) fn empty_in(&self, data: &Value) -> Option<String> {
        match self.resolve(data) {
            None | Some(Value::Null) => Some(format!("{self} is missing")),
            Some(Value::Array(a)) if a.is_empty() => Some(format!("{self} is empty")),
            Some(Value::Object(o)) if o.is_empty() => Some(format!("{self} is empty")),
            Some(Value::String(s)) if s.is_empty() => Some(format!("{self} is empty")),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(s: &str) -> DataPath {
        s.parse().expect("a path")
    }

    #[test]
    fn a_path_walks_keys_and_indexes_and_says_why_it_is_empty() {
        let data = json!({"rows": [], "sections": [{"rows": [1]}], "note": null, "n": 0});
        assert_eq!(
            path("data.rows").empty_in(&data),
            Some("data.rows is empty".into())
        );
        assert_eq!(path("data.sections.0.rows").empty_in(&data), None);
        assert_eq!(
            path("data.sections.1.rows").empty_in(&data),
            Some("data.sections.1.rows is missing".into())
        );
        assert!(path("data.note").empty_in(&data).is_some());
        assert_eq!(path("data.n").empty_in(&data), None, "a zero is data");
        assert_eq!(
            path("data").empty_in(&json!({})),
            Some("data is empty".into())
        );
    }

    #[test]
    fn a_path_outside_the_data_or_with_an_empty_step_is_refused() {
        for bad in [
            "rows",
            "window.start",
            "data..rows",
            "data.",
            "data.99999999999999999999999",
        ] {
            let err = bad.parse::<DataPath>().expect_err(bad).to_string();
            assert!(
                err.contains(bad) || err.contains("too large"),
                "{bad}: {err}"
            );
        }
    }
}
