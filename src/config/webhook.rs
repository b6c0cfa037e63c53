//! A webhook destination (`[[report.webhook]]`, `owner_webhook`): an http(s) URL and the
//! variable that holds its signing secret.

use super::ConfigError;
use super::fields::{Fields, Place};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: url::Url,
    /// The variable holding the `whsec_…` Standard Webhooks secret.
    pub secret_env: Option<String>,
}

pub(super) fn load_webhook(
    t: &toml::Table,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<Webhook> {
    let mut w = Fields::new(t, place.clone());
    let url = w
        .req::<String>("url", errors)
        .and_then(|u| match url::Url::parse(&u) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                Some(url)
            }
            Ok(url) => {
                errors.push(place.error(
                    "url",
                    format!("{u:?}: scheme {:?} is not http or https", url.scheme()),
                ));
                None
            }
            Err(e) => {
                errors.push(place.error("url", format!("{u:?} is not a URL: {e}")));
                None
            }
        });
    let secret_env = w.env_name("secret_env", errors).inspect(|env| {
        if std::env::var_os(env).is_none() {
            warnings.push(place.warning(
                "secret_env",
                &format!("environment variable {env} is not set here"),
            ));
        }
    });
    w.finish(errors);
    Some(Webhook {
        url: url?,
        secret_env,
    })
}
