//! The shipped template's email as a browser engine lays it out (headless Chromium): captured
//! at 375 px (a phone) and 1280 px (a desktop client) under `target/email-screenshots/`, no
//! sideways scrolling at 375 px, its chart shown (its `cid:` resolved as a client resolves it)
//! and scaled to the column, and still styled when a client drops the `<style>` block.

use crate::common;

use common::browser::Browser;
use common::{previewed, shipped_copy};

async fn number(b: &Browser, script: &str) -> f64 {
    b.client
        .execute(script, vec![])
        .await
        .expect("script")
        .as_f64()
        .expect("a number")
}

async fn text(b: &Browser, script: &str) -> String {
    b.client
        .execute(script, vec![])
        .await
        .expect("script")
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The previewed HTML with its `cid:` charts resolved to the PNGs `preview` wrote beside it,
/// as a mail client resolves them from the message's related parts.
fn resolved(html: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(html).expect("the preview's HTML");
    let stem = html.file_stem().and_then(|s| s.to_str()).expect("a name");
    let mut out = text.clone();
    for at in text.match_indices("cid:chart-").map(|(i, _)| i) {
        let rest = &text[at + "cid:chart-".len()..];
        let id = rest.split('@').next().unwrap_or_default();
        out = out.replace(
            &format!("cid:chart-{id}@dawnpost"),
            &format!("{stem}.{id}.png"),
        );
    }
    let path = html.with_extension("resolved.html");
    std::fs::write(&path, out).expect("write");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn the_email_fits_a_phone_and_a_desktop_and_keeps_its_styles_inline() {
    let dir = shipped_copy();
    for report in ["warehouse-17", "harbor-east"] {
        let html = resolved(&previewed(dir.path(), report));
        for width in [375u32, 1280] {
            let b = Browser::start("file://", width.max(500)).await;
            b.viewport(width, 900).await;
            b.goto(&html.display().to_string()).await;
            assert_eq!(b.inner_width().await, u64::from(width));
            assert!(
                !b.overflows().await,
                "{report} scrolls sideways at {width} px"
            );
            // The content column: the whole phone width, or 680 px on a desktop.
            let page = number(
                &b,
                "return document.querySelector('.page').getBoundingClientRect().width;",
            )
            .await;
            if width == 375 {
                assert!(page <= 375.0, "{page}");
            } else {
                assert!((600.0..=720.0).contains(&page), "{page}");
            }
            // The chart: its picture loaded at twice its size, shown at most 600 px wide and
            // never wider than the column.
            let chart = "document.querySelector('img[alt^=\"Orders shipped by hour\"]')";
            let natural = number(&b, &format!("return {chart}.naturalWidth;")).await;
            assert_eq!(natural, 1200.0, "{report}: the chart's PNG is shown");
            let shown = number(
                &b,
                &format!("return {chart}.getBoundingClientRect().width;"),
            )
            .await;
            assert!(
                shown <= 600.0 && shown <= page && shown > 250.0,
                "{report}: {shown} px"
            );
            b.fit_height(width).await;
            let png = b
                .screenshot_in("email-screenshots", &format!("{report}-{width}"))
                .await;
            assert!(png.is_file());
            b.stop().await;
        }
    }

    // A webmail view that drops <style>: the inlined styles still lay the email out.
    let html = previewed(dir.path(), "warehouse-17");
    let b = Browser::start("file://", 1280).await;
    b.goto(&html.display().to_string()).await;
    b.client
        .execute(
            "document.querySelectorAll('style').forEach(s => s.remove()); return null;",
            vec![],
        )
        .await
        .expect("drop <style>");
    let align = text(
        &b,
        "return getComputedStyle(document.querySelector('td.num')).textAlign;",
    )
    .await;
    assert_eq!(align, "right");
    let figure = text(
        &b,
        "return getComputedStyle(document.querySelector('td.figure')).backgroundColor;",
    )
    .await;
    assert_eq!(figure, "rgb(245, 247, 250)");
    let page = number(
        &b,
        "return document.querySelector('.page').getBoundingClientRect().width;",
    )
    .await;
    assert!((600.0..=720.0).contains(&page), "{page}");
    b.stop().await;
}
