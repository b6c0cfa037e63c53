//! What may be printed: URLs without their password, endpoints without their path and query
//! (webhook URLs often carry a token there), recipient addresses masked, transport errors
//! without the URL they name. Full values stay in the ledger, where they are identities.

/// A URL safe to print: the password replaced.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// A destination of any kind as a person may read it, by its shape: a URL as
/// [`redact_endpoint`] shows it, an address as [`redact_address`] does, a plain name (an
/// environment variable's, a channel's: letters, digits, `_`, `-`, `.`, `#`, at most 64) as it
/// is, and anything else not at all.
pub(crate) fn redact_destination(destination: &str) -> String {
    if destination.contains("://") {
        redact_endpoint(destination)
    } else if destination.contains('@') {
        redact_address(destination)
    } else if !destination.is_empty()
        && destination.len() <= 64
        && (destination.chars()).all(|c| c.is_ascii_alphanumeric() || "_-.#".contains(c))
    {
        destination.to_string()
    } else {
        "***".into()
    }
}

/// `ops-17@example.com` → `o***@example.com`.
pub(crate) fn redact_address(addr: &str) -> String {
    match addr.split_once('@') {
        Some((local, domain)) => {
            let first = local.chars().next().map(String::from).unwrap_or_default();
            format!("{first}***@{domain}")
        }
        None => "***".into(),
    }
}

/// An endpoint safe to print: scheme, host and port only; a path or query (which often holds a
/// token) becomes `/…`, credentials are dropped. `https://hooks.example/t/abc?k=1` →
/// `https://hooks.example/…`.
pub(crate) fn redact_endpoint(url: &str) -> String {
    let Ok(u) = url::Url::parse(url) else {
        return "(not a URL)".into();
    };
    let host = u.host_str().unwrap_or("");
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let hidden = (u.path() != "/" && !u.path().is_empty()) || u.query().is_some();
    format!(
        "{}://{host}{port}{}",
        u.scheme(),
        if hidden { "/…" } else { "" }
    )
}

/// A transport error with its causes, without the URL it names (see [`redact_endpoint`]).
pub(crate) fn http_error(e: &reqwest::Error) -> String {
    let mut s = crate::domain::words::error_chain(e);
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), &redact_endpoint(url.as_str()));
    }
    if e.is_timeout() && !s.contains("timed out") {
        s = format!("timed out ({s})");
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_destination_is_shown_by_its_shape() {
        use super::redact_destination as shown;
        assert_eq!(
            shown("https://hooks.example/t/abc?k=1"),
            "https://hooks.example/…"
        );
        assert_eq!(
            shown("https://u:pw@hooks.example/"),
            "https://hooks.example"
        );
        assert_eq!(shown("ops-17@example.com"), "o***@example.com");
        assert_eq!(shown("SLACK_OPS_WEBHOOK"), "SLACK_OPS_WEBHOOK");
        assert_eq!(shown("a secret with spaces"), "***");
        assert_eq!(shown(""), "***");
    }

    use super::*;

    #[test]
    fn endpoints_lose_path_query_and_credentials() {
        assert_eq!(
            redact_endpoint("https://hooks.example/t/abc?k=1"),
            "https://hooks.example/…"
        );
        assert_eq!(
            redact_endpoint("http://u:p@127.0.0.1:8080/x"),
            "http://127.0.0.1:8080/…"
        );
        assert_eq!(
            redact_endpoint("https://hooks.example/"),
            "https://hooks.example"
        );
        assert_eq!(redact_endpoint("not a url"), "(not a URL)");
        assert_eq!(
            redact_url("postgres://u:secret@db/x"),
            "postgres://u:***@db/x"
        );
    }
}
