//! A render's charts: each of the report's `[[report.chart]]` drawn from the data
//! (`report::chart`) before the templates run, and placed by them with `{{chart "id"}}` — in
//! the HTML an `<img>` of the chart's `cid:` part with its size and its message as `alt`, in the
//! text the message alone. With `report_url`, each chart has its link too (`charts.<id>.url`),
//! which a chat message shows it by.

use std::collections::BTreeMap;

use handlebars::{Context, Handlebars, Helper, HelperDef, HelperResult, Output, RenderContext};
use serde_json::{Value, json};

use super::RenderError;
use crate::config::ChartSpec;

/// The Content-ID of chart `id`'s part in an email (`cid:` in the HTML, `Content-ID` on the
/// part).
pub fn content_id(id: &str) -> String {
    format!("chart-{id}@dawnpost")
}

/// `html` with each of `images`' `cid:` references replaced by what `to` makes of the chart's
/// id and picture: where an email's parts are not (a link, a page), the chart by other means.
pub fn cids_replaced(
    mut html: String,
    images: &BTreeMap<String, Vec<u8>>,
    to: impl Fn(&str, &[u8]) -> String,
) -> String {
    for (id, png) in images {
        let cid = format!("cid:{}", content_id(id));
        if html.contains(&cid) {
            html = html.replace(&cid, &to(id, png));
        }
    }
    html
}

/// Draws every chart of `specs` from `context`'s `data`, and puts what a template needs of each
/// (its `cid`, `alt`, `width`, `height`) under `charts` in the context. The PNGs, by chart id.
pub(super) fn draw_all(
    specs: &[ChartSpec],
    context: &mut Value,
) -> Result<BTreeMap<String, Vec<u8>>, RenderError> {
    let mut images = BTreeMap::new();
    let mut placed = serde_json::Map::new();
    for spec in specs {
        let drawn = crate::report::chart::draw(spec, &context["data"]).map_err(|reason| {
            RenderError::Render {
                part: format!("chart {:?}", spec.id),
                at: String::new(),
                reason,
            }
        })?;
        let mut entry = json!({
            "cid": content_id(&spec.id),
            "alt": drawn.alt,
            "width": crate::report::chart::WIDTH as u32,
            "height": crate::report::chart::HEIGHT as u32,
        });
        if let Some(url) = context["report_url"]
            .as_str()
            .map(|r| chart_url(r, &spec.id))
        {
            entry["url"] = Value::String(url);
        }
        placed.insert(spec.id.clone(), entry);
        images.insert(spec.id.clone(), drawn.png);
    }
    if let Value::Object(c) = context {
        c.insert("charts".into(), Value::Object(placed));
    }
    Ok(images)
}

/// The link to chart `id` of the report at `report_url` (`…/r/{job}?s=…`): the report's link
/// with `/charts/{id}` before its query, signed as it is (`delivery::links::Links::chart`).
pub fn chart_url(report_url: &str, id: &str) -> String {
    match report_url.split_once('?') {
        Some((path, query)) => format!("{path}/charts/{id}?{query}"),
        None => format!("{report_url}/charts/{id}"),
    }
}

/// `{{chart "id"}}`: the chart as an `<img>` (`html`), or its message (text).
pub(super) struct Chart {
    pub html: bool,
}

impl HelperDef for Chart {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        _: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        _: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let other = |m: String| handlebars::RenderErrorReason::Other(m);
        let id = (h.param(0).and_then(|p| p.value().as_str()))
            .ok_or_else(|| other("chart needs a chart's id: {{chart \"late_by_hour\"}}".into()))?;
        let placed = ctx
            .data()
            .pointer(&format!("/charts/{id}"))
            .ok_or_else(|| {
                other(format!(
                    "chart {id:?}: the report has no [[report.chart]] of that id"
                ))
            })?;
        let alt = placed["alt"].as_str().unwrap_or_default();
        if !self.html {
            out.write(alt)?;
            return Ok(());
        }
        let tag = format!(
            "<img src=\"cid:{}\" alt=\"{}\" width=\"{}\" height=\"{}\" style=\"width:100%;max-width:{}px;height:auto;border:0\">",
            escape(placed["cid"].as_str().unwrap_or_default()),
            escape(alt),
            placed["width"],
            placed["height"],
            placed["width"],
        );
        out.write(&tag)?;
        Ok(())
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
