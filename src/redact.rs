//! What may be printed: URLs without their password. (Recipient addresses and delivery keys
//! are redacted in [`crate::deliver`].)

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
