//! The shipped template's email as a browser engine lays it out (headless Chromium): captured
//! at 375 px (a phone) and 1280 px (a desktop client) under `target/email-screenshots/`, no
//! sideways scrolling at 375 px, and still styled when a client drops the `<style>` block.

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

#[tokio::test(flavor = "multi_thread")]
async fn the_email_fits_a_phone_and_a_desktop_and_keeps_its_styles_inline() {
    let dir = shipped_copy();
    for report in ["warehouse-17", "harbor-east"] {
        let html = previewed(dir.path(), report);
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
