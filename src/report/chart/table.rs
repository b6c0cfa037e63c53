//! A chart's rows read from the report's data: the x value of each row and each series' value,
//! checked as they are read — a missing path, rows that are not objects, a value that is not
//! a number fail naming the chart, the row and the field; a null or absent value is a gap.

use serde_json::Value;

use crate::config::ChartSpec;

/// The last row with a value: its x label, and each series' name and value there.
pub type Latest<'t> = (&'t str, Vec<(&'t str, Option<f64>)>);

/// What a chart draws: a label per row, and each series' values (`None`: a gap).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub x: Vec<String>,
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

impl Table {
    /// Whether there is nothing to draw: no row, or no value in any series.
    pub fn is_empty(&self) -> bool {
        (self.series.iter()).all(|(_, v)| v.iter().all(Option::is_none))
    }

    /// The last row with a value in some series, and each series' value there.
    pub fn latest(&self) -> Option<Latest<'_>> {
        let at = (0..self.x.len())
            .rev()
            .find(|&i| self.series.iter().any(|(_, v)| v[i].is_some()))?;
        let values = (self.series.iter())
            .map(|(n, v)| (n.as_str(), v[at]))
            .collect();
        Some((self.x[at].as_str(), values))
    }
}

/// Reads `spec`'s rows from `data` (the source's JSON, `data` of the template context).
pub fn read(spec: &ChartSpec, data: &Value) -> Result<Table, String> {
    let rows = match spec.data.resolve(data) {
        None | Some(Value::Null) => return Err(format!("data: {} is missing", spec.data)),
        Some(Value::Array(rows)) => rows,
        Some(_) => return Err(format!("data: {} is not a list of rows", spec.data)),
    };
    let mut x = Vec::with_capacity(rows.len());
    let mut series: Vec<(String, Vec<Option<f64>>)> = (spec.y.iter())
        .map(|f| (f.clone(), Vec::with_capacity(rows.len())))
        .collect();
    let named = |series: Vec<(String, Vec<Option<f64>>)>| -> Vec<(String, Vec<Option<f64>>)> {
        (series.into_iter().zip(&spec.labels))
            .map(|((_, values), label)| (label.clone(), values))
            .collect()
    };
    for (i, row) in rows.iter().enumerate() {
        let Value::Object(row) = row else {
            return Err(format!("data: {}[{i}] is not an object", spec.data));
        };
        x.push(match row.get(&spec.x) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            None | Some(Value::Null) => {
                return Err(format!("x: {}[{i}] has no {:?}", spec.data, spec.x));
            }
            Some(_) => {
                return Err(format!(
                    "x: {}[{i}].{} is a list or an object",
                    spec.data, spec.x
                ));
            }
        });
        for (field, values) in &mut series {
            values.push(match row.get(field.as_str()) {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite()),
                Some(other) => {
                    let shown = shown(other);
                    return Err(format!(
                        "y: {}[{i}].{field} is {shown}, not a number",
                        spec.data
                    ));
                }
            });
        }
    }
    if !rows.is_empty()
        && let Some((field, _)) =
            (series.iter()).find(|(f, _)| (rows.iter()).all(|r| r.get(f.as_str()).is_none()))
    {
        return Err(format!("y: no row of {} has a field {field:?}", spec.data));
    }
    Ok(Table {
        x,
        series: named(series),
    })
}

/// A value that is not a number, in words: `the text "n/a"`, `true`, `a list`.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let cut: String = s.chars().take(40).collect();
            format!("the text {cut:?}")
        }
        Value::Bool(b) => b.to_string(),
        Value::Array(_) => "a list".into(),
        _ => "an object".into(),
    }
}
