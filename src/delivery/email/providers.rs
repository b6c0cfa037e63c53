//! Bounces and complaints as email providers' webhooks post them, each checked as its provider
//! documents before a word of it is believed: Postmark's (HTTP Basic credentials, checked by the
//! server), Mailgun's (an HMAC-SHA256 of its timestamp and token with the signing key) and
//! SendGrid's (an ECDSA P-256 signature of its timestamp and body with the verification key).
//! Events that are no bounce or complaint (deliveries, opens, deferrals the provider retries
//! itself) read as none.

use serde_json::Value;

use crate::domain::bounce::{Bounce, BounceKind, address};

/// How far a signed webhook's timestamp may be from now, in seconds: an older one is a replay.
pub const TOLERANCE_SECS: i64 = 5 * 60;

/// Why a provider's post was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProviderError {
    /// Its credentials or signature do not verify: nothing in it is believed.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// It verifies but is not what the provider posts.
    #[error("{0}")]
    Invalid(String),
}

fn json(body: &[u8]) -> Result<Value, ProviderError> {
    serde_json::from_slice(body)
        .map_err(|e| ProviderError::Invalid(format!("the body is not JSON: {e}")))
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The delivery and Message-ID that returned headers name (a dump of the message).
fn returned(b: &mut Bounce, headers: &str) {
    use mailparse::MailHeaderMap;
    if let Ok((h, _)) = mailparse::parse_headers(headers.as_bytes()) {
        b.delivery = h
            .get_first_value("X-Dawnpost-Delivery")
            .map(|v| v.trim().to_string());
        if b.message_id.is_none() {
            b.message_id = h
                .get_first_value("Message-ID")
                .map(|v| v.trim().to_string());
        }
    }
}

/// A Postmark bounce or spam complaint webhook (one record). Postmark's own `MessageID` is not
/// the message's: the match comes from the dump of the message (`Content`, posted when the
/// webhook includes the bounce content).
pub fn postmark(body: &[u8]) -> Result<Vec<Bounce>, ProviderError> {
    let v = json(body)?;
    let record = text(&v, &["RecordType"])
        .ok_or_else(|| ProviderError::Invalid("not a Postmark webhook: no RecordType".into()))?;
    let kind = match (record, text(&v, &["Type"]).unwrap_or("")) {
        ("SpamComplaint", _) | ("Bounce", "SpamComplaint" | "SpamNotification") => {
            BounceKind::Complaint
        }
        ("Bounce", "HardBounce" | "BadEmailAddress" | "ManuallyDeactivated") => BounceKind::Hard,
        ("Bounce", "SoftBounce" | "Transient" | "DnsError") => BounceKind::Soft,
        _ => return Ok(Vec::new()),
    };
    let mut b = Bounce::new("postmark", kind);
    b.address = text(&v, &["Email"]).and_then(address);
    if let Some(dump) = text(&v, &["Content"]) {
        returned(&mut b, dump);
    }
    let details = text(&v, &["Details"]).or_else(|| text(&v, &["Description"]));
    Ok(vec![match details {
        Some(d) => b.with_diagnostic(d),
        None => b,
    }])
}

/// A Mailgun webhook (one event), its signature checked with `key` at `now` (Unix seconds).
pub fn mailgun(body: &[u8], key: &[u8], now: i64) -> Result<Vec<Bounce>, ProviderError> {
    use hmac::{Hmac, KeyInit, Mac};
    let v = json(body)?;
    let unsigned = ProviderError::Unauthorized("the Mailgun signature is missing or wrong");
    let ts = text(&v, &["signature", "timestamp"]).ok_or(ProviderError::Unauthorized(
        "not a Mailgun webhook: no signature",
    ))?;
    let token = text(&v, &["signature", "token"]).unwrap_or("");
    let sig = text(&v, &["signature", "signature"]).unwrap_or("");
    let sig = hex::decode(sig)
        .map_err(|_| ProviderError::Unauthorized("the Mailgun signature is not hex"))?;
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
        .map_err(|_| ProviderError::Unauthorized("the Mailgun signing key is unusable"))?;
    mac.update(ts.as_bytes());
    mac.update(token.as_bytes());
    mac.verify_slice(&sig).map_err(|_| unsigned)?;
    fresh(ts, now)?;
    let e = v
        .get("event-data")
        .ok_or_else(|| ProviderError::Invalid("not a Mailgun event: no event-data".into()))?;
    let kind = match (text(e, &["event"]), text(e, &["severity"])) {
        (Some("failed"), Some("temporary")) => BounceKind::Soft,
        (Some("failed"), _) => BounceKind::Hard,
        (Some("complained"), _) => BounceKind::Complaint,
        _ => return Ok(Vec::new()),
    };
    let mut b = Bounce::new("mailgun", kind);
    b.address = text(e, &["recipient"]).and_then(address);
    b.message_id = text(e, &["message", "headers", "message-id"]).map(str::to_string);
    let code = e.pointer("/delivery-status/code").and_then(Value::as_i64);
    let said = text(e, &["delivery-status", "message"])
        .or_else(|| text(e, &["delivery-status", "description"]));
    b.status = said.and_then(enhanced_status);
    Ok(vec![match (code, said) {
        (Some(c), Some(m)) => b.with_diagnostic(&format!("{c} {m}")),
        (None, Some(m)) => b.with_diagnostic(m),
        (Some(c), None) => b.with_diagnostic(&c.to_string()),
        (None, None) => b,
    }])
}

/// A SendGrid event webhook post (an array of events), its signature (base64, the header
/// `X-Twilio-Email-Event-Webhook-Signature`) over `timestamp` and the body checked with the
/// verification key `public_key` (base64 DER) at `now`.
pub fn sendgrid(
    body: &[u8],
    (signature, timestamp): (&str, &str),
    public_key: &str,
    now: i64,
) -> Result<Vec<Bounce>, ProviderError> {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let unsigned = || ProviderError::Unauthorized("the SendGrid signature is missing or wrong");
    let key = b64
        .decode(public_key.trim())
        .map_err(|_| ProviderError::Unauthorized("the SendGrid verification key is not base64"))?;
    let sig = b64.decode(signature.trim()).map_err(|_| unsigned())?;
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(body);
    let spki = rustls_pki_types::SubjectPublicKeyInfoDer::from(key.as_slice());
    let entity = webpki::RawPublicKeyEntity::try_from(&spki).map_err(|_| {
        ProviderError::Unauthorized("the SendGrid verification key is not a public key")
    })?;
    let verified = entity.verify_signature(webpki::aws_lc_rs::ECDSA_P256_SHA256, &signed, &sig);
    if verified.is_err() {
        // A key given as the bare point rather than its SubjectPublicKeyInfo.
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &key)
            .verify(&signed, &sig)
            .map_err(|_| unsigned())?;
    }
    fresh(timestamp, now)?;
    let events = json(body)?;
    let events = events
        .as_array()
        .ok_or_else(|| ProviderError::Invalid("not a SendGrid event post: not an array".into()))?;
    Ok(events.iter().filter_map(sendgrid_event).collect())
}

fn sendgrid_event(e: &Value) -> Option<Bounce> {
    let status = text(e, &["status"]).map(str::to_string);
    let class = status.as_deref().and_then(BounceKind::of_status);
    let kind = match (text(e, &["event"])?, text(e, &["type"])) {
        ("spamreport", _) => BounceKind::Complaint,
        ("bounce", Some("blocked")) => class.unwrap_or(BounceKind::Soft),
        ("bounce", _) => class.unwrap_or(BounceKind::Hard),
        _ => return None,
    };
    let mut b = Bounce::new("sendgrid", kind);
    b.address = text(e, &["email"]).and_then(address);
    b.message_id = text(e, &["smtp-id"]).map(str::to_string);
    b.status = status.filter(|s| BounceKind::of_status(s).is_some());
    Some(match text(e, &["reason"]) {
        Some(r) => b.with_diagnostic(r),
        None => b,
    })
}

/// Refuses a signed timestamp (Unix seconds) further than [`TOLERANCE_SECS`] from `now`.
fn fresh(ts: &str, now: i64) -> Result<(), ProviderError> {
    let ts: i64 = (ts.trim().parse())
        .map_err(|_| ProviderError::Unauthorized("the signed timestamp is not a number"))?;
    match now.checked_sub(ts).map(i64::abs) {
        Some(d) if d <= TOLERANCE_SECS => Ok(()),
        _ => Err(ProviderError::Unauthorized(
            "the signed timestamp is too far from now: a replay, or a clock off",
        )),
    }
}

/// The first enhanced status code (`5.1.1`) in a server's words.
fn enhanced_status(words: &str) -> Option<String> {
    (words.split(|c: char| c.is_whitespace() || c == ','))
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_digit()))
        .find(|w| BounceKind::of_status(w).is_some())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enhanced_status_is_found_in_words() {
        assert_eq!(
            enhanced_status("550 5.1.1 The email account does not exist.").as_deref(),
            Some("5.1.1")
        );
        assert_eq!(enhanced_status("mailbox full"), None);
    }

    #[test]
    fn a_timestamp_far_from_now_is_a_replay() {
        assert!(fresh("1000", 1000 + TOLERANCE_SECS).is_ok());
        assert!(fresh("1000", 1001 + TOLERANCE_SECS).is_err());
        assert!(fresh("-9223372036854775808", i64::MAX).is_err());
        assert!(fresh("soon", 0).is_err());
    }
}
