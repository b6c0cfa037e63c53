//! The Prometheus text format 0.0.4, for scrapers that do not ask for OpenMetrics.
//!
//! prometheus-client writes OpenMetrics 1.0. The two differ in what a 0.0.4 parser trips on:
//! a counter family is named without its `_total` suffix in OpenMetrics (`# TYPE x counter`,
//! sample `x_total`), where 0.0.4 names the sample (`# TYPE x_total counter`); OpenMetrics has
//! `# UNIT` and `# EOF` lines and escapes `"` in help text, which 0.0.4 has not.

/// Rewrites an OpenMetrics exposition as the 0.0.4 text format.
pub(crate) fn from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let help = help.replace("\\\"", "\"");
            out.push_str(&format!("# HELP {} {help}\n", sample_name(name, &counters)));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = match kind {
                "counter" | "gauge" | "histogram" | "summary" => kind,
                "gaugehistogram" => "histogram",
                "info" | "stateset" => "gauge",
                _ => "untyped",
            };
            out.push_str(&format!("# TYPE {} {kind}\n", sample_name(name, &counters)));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn sample_name(name: &str, counters: &[&str]) -> String {
    if counters.contains(&name) && !name.ends_with("_total") {
        format!("{name}_total")
    } else {
        name.to_string()
    }
}

/// Whether an `Accept` header prefers OpenMetrics to the 0.0.4 text format (by q-value; a tie
/// goes to OpenMetrics, which Prometheus asks for first). No header means the text format.
pub(crate) fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let (mut open, mut text) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q="))
            .find_map(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => open = open.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    open > 0.0 && open >= text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_by_their_sample_and_eof_is_dropped() {
        let om = "# HELP x_sent Sends.\n# TYPE x_sent counter\nx_sent_total 3\n# HELP x_up Up \\\"now\\\".\n# TYPE x_up gauge\nx_up 1\n# EOF\n";
        assert_eq!(
            from_openmetrics(om),
            "# HELP x_sent_total Sends.\n# TYPE x_sent_total counter\nx_sent_total 3\n# HELP x_up Up \"now\".\n# TYPE x_up gauge\nx_up 1\n"
        );
    }

    #[test]
    fn accept_chooses_the_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(!wants_openmetrics(Some("text/plain; version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0.2, text/plain"
        )));
    }
}
