//! The webhook kind's keys: `[[report.webhook]]` (distinct http(s) URLs, each with the variable
//! holding its signing secret) and a report's `owner_webhook`.

use std::sync::Arc;

use crate::domain::keys::DestinationKind;

use crate::config::{ConfigError, DestinationConfig, Fields, Place, Read};

impl DestinationConfig for super::Webhook {
    fn kind(&self) -> DestinationKind {
        super::KIND
    }

    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        hooks(f, errors, warnings)
    }

    fn read_owners(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read {
        owner_hook(f, errors, warnings)
    }
}

/// One webhook as configured: where it posts and the variable holding its signing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Parsed once, when the configuration is loaded.
    pub url: url::Url,
    /// The variable holding the `whsec_…` Standard Webhooks secret.
    pub secret_env: Option<String>,
}

/// What a report's (or its owners') webhooks keep beyond their URLs.
pub type Hooks = Vec<Hook>;

/// `[[report.webhook]]`: distinct http(s) URLs, each with an optional signing secret's variable.
fn hooks(
    f: &mut Fields<'_, '_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Read {
    let place = f.place.clone();
    let mut hooks: Hooks = Vec::new();
    let items = match f.raw("webhook") {
        None => return Read::default(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            errors.push(place.error("webhook", "expected [[report.webhook]] tables"));
            return Read::default();
        }
    };
    for (i, item) in items.iter().enumerate() {
        let wplace = place.nested(&format!("webhook[{i}]"));
        let toml::Value::Table(t) = item else {
            errors.push(wplace.error("(table)", "expected a [[report.webhook]] table"));
            continue;
        };
        let Some(hook) = read_hook(t, &wplace, errors, warnings) else {
            continue;
        };
        if hooks.iter().any(|x| x.url == hook.url) {
            errors.push(wplace.error("url", format!("{} is listed twice", hook.url)));
        } else {
            hooks.push(hook);
        }
    }
    read(hooks)
}

/// `owner_webhook`: one signed webhook told when the report is late or quarantined.
fn owner_hook(
    f: &mut Fields<'_, '_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Read {
    let place = f.place.clone();
    match f.raw("owner_webhook") {
        None => Read::default(),
        Some(toml::Value::Table(t)) => {
            let hook = read_hook(t, &place.nested("owner_webhook"), errors, warnings);
            read(hook.into_iter().collect())
        }
        Some(_) => {
            let message = "expected a table such as { url = \"https://…\", secret_env = \"…\" }";
            errors.push(place.error("owner_webhook", message));
            Read::default()
        }
    }
}

fn read(hooks: Hooks) -> Read {
    Read {
        to: hooks.iter().map(|h| h.url.to_string()).collect(),
        detail: Some(Arc::new(hooks)),
    }
}

/// One webhook's table: its `url` and `secret_env`.
fn read_hook(
    t: &toml::Table,
    place: &Place<'_>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Option<Hook> {
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
    Some(Hook {
        url: url?,
        secret_env,
    })
}
