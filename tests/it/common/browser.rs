//! Headless Chromium driven through chromedriver (W3C WebDriver, with fantoccini): Debian's
//! `chromium` and `chromium-driver`, started on a free loopback port per test, with the flags
//! a host without network access needs. Screenshots go to `target/ui-screenshots/`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

pub struct Browser {
    pub client: Client,
    driver: Child,
    /// chromedriver's own address, for Chromium's DevTools commands.
    driver_url: String,
    pub base: String,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Chromium at 1280×900 (or `width` wide), its pages under `base`.
    pub async fn start(base: &str, width: u32) -> Browser {
        let port = free_port();
        // A process group of its own, which the Chromium it starts joins: `Drop` stops both.
        let driver = Command::new("chromedriver")
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver) is needed");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                    format!("--window-size={width},900"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let mut last = None;
        for _ in 0..100 {
            let builder = ClientBuilder::rustls().map(|mut b| {
                b.capabilities(caps.clone());
                b
            });
            match builder {
                Ok(b) => match b.connect(&url).await {
                    Ok(client) => {
                        return Browser {
                            client,
                            driver,
                            driver_url: url.clone(),
                            base: base.to_string(),
                            _profile: profile,
                        };
                    }
                    Err(e) => last = Some(e.to_string()),
                },
                Err(e) => last = Some(e.to_string()),
            }
            // chromedriver is still starting: it gives no other signal than answering.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not start a session: {last:?}");
    }

    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .expect("goto");
    }

    pub async fn path(&self) -> String {
        let u = self.client.current_url().await.expect("url");
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        }
    }

    pub async fn html(&self) -> String {
        self.client.source().await.expect("source")
    }

    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.client.find(Locator::Css(css)).await.expect(css);
        e.clear().await.expect("clear");
        e.send_keys(text).await.expect("type");
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .expect(css)
            .click()
            .await
            .expect("click");
    }

    /// Clicks what submits a form or follows a link, and waits until the next page has loaded
    /// (the old document is marked first, so a redirect back to the same URL counts too).
    pub async fn submit(&self, css: &str) {
        self.client
            .execute("document.documentElement.dataset.left = 'no';", vec![])
            .await
            .expect("mark the page");
        self.click(css).await;
        for _ in 0..300 {
            let loaded = self
                .client
                .execute(
                    "return document.documentElement.dataset.left === undefined \
                     && document.readyState === 'complete';",
                    vec![],
                )
                .await
                .map(|v| v.as_bool().unwrap_or(false))
                .unwrap_or(false);
            if loaded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no new page after clicking {css}");
    }

    /// Saves a PNG of the viewport under `target/ui-screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        self.screenshot_in("ui-screenshots", name).await
    }

    /// Emulates a viewport `width` wide and as tall as the page, so a capture shows all of it.
    pub async fn fit_height(&self, width: u32) {
        let height = self
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .expect("script")
            .as_u64()
            .unwrap_or(900);
        self.viewport(width, height.clamp(200, 6000) as u32).await;
    }

    /// Saves a PNG of the viewport under `target/DIR/NAME.png`.
    pub async fn screenshot_in(&self, dir: &str, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let png = self.client.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Emulates the system's `prefers-color-scheme` (`light` or `dark`) through chromedriver's
    /// DevTools endpoint; the page must be reloaded to show it in a capture.
    pub async fn color_scheme(&self, scheme: &str) {
        self.cdp(
            "Emulation.setEmulatedMedia",
            serde_json::json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        )
        .await;
    }

    /// Emulates a phone's viewport `width` × `height` CSS pixels (Chromium will not make a
    /// window narrower than 500 px, so a 375 px page needs this).
    pub async fn viewport(&self, width: u32, height: u32) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500,
            }),
        )
        .await;
    }

    /// Back to the window's own viewport.
    pub async fn clear_viewport(&self) {
        self.cdp(
            "Emulation.clearDeviceMetricsOverride",
            serde_json::json!({}),
        )
        .await;
    }

    /// One Chrome DevTools command through chromedriver.
    async fn cdp(&self, cmd: &str, params: serde_json::Value) {
        let id = self
            .client
            .session_id()
            .await
            .expect("session")
            .expect("a session id");
        let r = reqwest::Client::new()
            .post(format!("{}/session/{id}/goog/cdp/execute", self.driver_url))
            .header("content-type", "application/json")
            .body(serde_json::json!({ "cmd": cmd, "params": params }).to_string())
            .send()
            .await
            .expect("cdp");
        assert!(r.status().is_success(), "{:?}", r.text().await);
    }

    /// The viewport's width in CSS pixels, as the page sees it.
    pub async fn inner_width(&self) -> u64 {
        self.client
            .execute("return window.innerWidth;", vec![])
            .await
            .expect("script")
            .as_u64()
            .unwrap_or(0)
    }

    /// Whether the system prefers dark, as the page sees it.
    pub async fn prefers_dark(&self) -> bool {
        self.client
            .execute(
                "return window.matchMedia('(prefers-color-scheme: dark)').matches;",
                vec![],
            )
            .await
            .expect("script")
            .as_bool()
            .unwrap_or(false)
    }

    /// The page's computed background colour.
    pub async fn background(&self) -> String {
        self.client
            .execute(
                "return getComputedStyle(document.body).backgroundColor;",
                vec![],
            )
            .await
            .expect("script")
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Whether the page is wider than the window (a horizontal scroll bar).
    pub async fn overflows(&self) -> bool {
        let v = self
            .client
            .execute(
                "return document.documentElement.scrollWidth > window.innerWidth;",
                vec![],
            )
            .await
            .expect("script");
        v.as_bool().unwrap_or(true)
    }

    pub async fn stop(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A test that panics before [`Browser::stop`] still stops its chromedriver and the Chromium
/// it started (whose session nobody closed): their whole process group.
impl Drop for Browser {
    fn drop(&mut self) {
        if let (Ok(None), Ok(group)) = (self.driver.try_wait(), i32::try_from(self.driver.id())) {
            // SAFETY: kill(2) with a negative pid signals only that process group: the one
            // chromedriver leads (`process_group(0)` above), still running, so not reused.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.driver.wait();
    }
}
