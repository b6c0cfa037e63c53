//! What may be printed: URLs without their password, recipient addresses masked.

/// A URL safe to print: the password replaced.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// `ops-17@example.com` → `o***@example.com`.
pub fn redact_address(addr: &str) -> String {
    match addr.split_once('@') {
        Some((local, domain)) => {
            let first = local.chars().next().map(String::from).unwrap_or_default();
            format!("{first}***@{domain}")
        }
        None => "***".into(),
    }
}
