//! Amazon SES's bounce and complaint notifications, as Amazon SNS posts them over HTTP(S): the
//! SNS message is believed only when its topic is one configured and its signature verifies
//! with the certificate at its `SigningCertURL`, which must be an `https://` URL of an SNS host
//! of AWS (`sns.<region>.amazonaws.com`, or `.amazonaws.com.cn`) ending `.pem`. SignatureVersion
//! 1 is SHA1 with RSA, 2 SHA256 with RSA, over the fields AWS documents, in their order.

use serde::Deserialize;
use serde_json::Value;

use super::providers::ProviderError;
use crate::domain::bounce::{Bounce, BounceKind, address};

/// One SNS message as posted.
#[derive(Debug, Deserialize)]
pub struct SnsMessage {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "MessageId")]
    pub message_id: String,
    #[serde(rename = "TopicArn")]
    pub topic_arn: String,
    #[serde(rename = "Subject", default)]
    pub subject: Option<String>,
    #[serde(rename = "Message")]
    pub message: String,
    #[serde(rename = "Timestamp")]
    pub timestamp: String,
    #[serde(rename = "SignatureVersion")]
    pub signature_version: String,
    #[serde(rename = "Signature")]
    pub signature: String,
    #[serde(rename = "SigningCertURL")]
    pub signing_cert_url: String,
    #[serde(rename = "SubscribeURL", default)]
    pub subscribe_url: Option<String>,
    #[serde(rename = "Token", default)]
    pub token: Option<String>,
}

/// Reads an SNS post: refused unless its topic is one of `topics`.
pub fn sns(body: &[u8], topics: &[String]) -> Result<SnsMessage, ProviderError> {
    let m: SnsMessage = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Invalid(format!("not an SNS message: {e}")))?;
    if !topics.contains(&m.topic_arn) {
        return Err(ProviderError::Unauthorized(
            "the SNS topic is not one [recipients] ses_topic_arns names",
        ));
    }
    Ok(m)
}

/// Whether `url` may serve an SNS signing certificate: `https://`, an SNS host of AWS, a
/// `.pem` path, no credentials or port.
pub fn certificate_url_ok(url: &str) -> bool {
    sns_url(url) && url::Url::parse(url).is_ok_and(|u| u.path().ends_with(".pem"))
}

/// Whether `url` is an `https://` URL of an SNS host of AWS, with no credentials or port (a
/// signing certificate's, a subscription's confirmation).
pub fn sns_url(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    let host = u.host_str().unwrap_or("");
    let aws = host
        .strip_prefix("sns.")
        .and_then(|rest| {
            rest.strip_suffix(".amazonaws.com")
                .or_else(|| rest.strip_suffix(".amazonaws.com.cn"))
        })
        .is_some_and(|region| {
            !region.is_empty()
                && (region.bytes())
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    u.scheme() == "https"
        && aws
        && u.port().is_none()
        && u.username().is_empty()
        && u.password().is_none()
}

/// The text SNS signs, for `m`'s type.
fn string_to_sign(m: &SnsMessage) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        out.push_str(name);
        out.push('\n');
        out.push_str(value);
        out.push('\n');
    };
    field("Message", &m.message);
    field("MessageId", &m.message_id);
    if m.kind == "Notification" {
        if let Some(s) = &m.subject {
            field("Subject", s);
        }
    } else {
        field("SubscribeURL", m.subscribe_url.as_deref().unwrap_or(""));
    }
    field("Timestamp", &m.timestamp);
    if m.kind != "Notification" {
        field("Token", m.token.as_deref().unwrap_or(""));
    }
    field("TopicArn", &m.topic_arn);
    field("Type", &m.kind);
    out
}

/// SHA1 with RSA, which webpki does not offer (SNS's SignatureVersion 1).
#[derive(Debug)]
struct RsaSha1;

impl rustls_pki_types::SignatureVerificationAlgorithm for RsaSha1 {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), rustls_pki_types::InvalidSignature> {
        use aws_lc_rs::signature::{
            RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY, UnparsedPublicKey,
        };
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY, public_key)
            .verify(message, signature)
            .map_err(|_| rustls_pki_types::InvalidSignature)
    }

    fn public_key_alg_id(&self) -> rustls_pki_types::AlgorithmIdentifier {
        rustls_pki_types::alg_id::RSA_ENCRYPTION
    }

    fn signature_alg_id(&self) -> rustls_pki_types::AlgorithmIdentifier {
        rustls_pki_types::alg_id::RSA_PKCS1_SHA256
    }
}

/// Checks `m`'s signature with the PEM certificate `pem`.
pub fn verify(m: &SnsMessage, pem: &[u8]) -> Result<(), ProviderError> {
    use base64::Engine as _;
    use rustls_pki_types::pem::PemObject as _;
    let bad = |why: &'static str| ProviderError::Unauthorized(why);
    let der = rustls_pki_types::CertificateDer::from_pem_slice(pem)
        .map_err(|_| bad("the SNS signing certificate is not PEM"))?;
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|_| bad("the SNS signing certificate does not parse"))?;
    let sig = base64::engine::general_purpose::STANDARD
        .decode(m.signature.trim())
        .map_err(|_| bad("the SNS signature is not base64"))?;
    let signed = string_to_sign(m);
    let verified = match m.signature_version.as_str() {
        "1" => cert.verify_signature(&RsaSha1, signed.as_bytes(), &sig),
        "2" => cert.verify_signature(
            webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
            signed.as_bytes(),
            &sig,
        ),
        _ => return Err(bad("the SNS SignatureVersion is neither 1 nor 2")),
    };
    verified.map_err(|_| bad("the SNS signature does not verify"))
}

/// The bounces and complaint an SES notification (the SNS message's `Message`) reports:
/// notification (`notificationType`) or event publishing (`eventType`) form.
pub fn notification(message: &str) -> Result<Vec<Bounce>, ProviderError> {
    let n: Value = serde_json::from_str(message)
        .map_err(|e| ProviderError::Invalid(format!("the SES notification is not JSON: {e}")))?;
    let kind = n
        .get("notificationType")
        .or_else(|| n.get("eventType"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mail = n.get("mail").cloned().unwrap_or(Value::Null);
    let header = |name: &str| {
        (mail
            .get("headers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .find(|h| {
            h.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
        .and_then(|h| h.get("value").and_then(Value::as_str))
        .map(str::to_string)
    };
    let delivery = header("X-Dawnpost-Delivery");
    let message_id = (mail
        .pointer("/commonHeaders/messageId")
        .and_then(Value::as_str))
    .map(str::to_string)
    .or_else(|| header("Message-ID"));
    let named = |mut b: Bounce| {
        b.delivery.clone_from(&delivery);
        b.message_id.clone_from(&message_id);
        b
    };
    let recipients = |path: &str| -> Vec<Value> {
        n.pointer(path)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    Ok(match kind {
        "Bounce" => {
            let transient =
                n.pointer("/bounce/bounceType").and_then(Value::as_str) != Some("Permanent");
            (recipients("/bounce/bouncedRecipients").iter())
                .map(|r| {
                    let status = r.get("status").and_then(Value::as_str).map(str::to_string);
                    let by_status = status.as_deref().and_then(BounceKind::of_status);
                    let kind = match transient {
                        true => BounceKind::Soft,
                        false => by_status.unwrap_or(BounceKind::Hard),
                    };
                    let mut b = named(Bounce::new("ses", kind));
                    b.address = r
                        .get("emailAddress")
                        .and_then(Value::as_str)
                        .and_then(address);
                    b.status = status.filter(|s| BounceKind::of_status(s).is_some());
                    match r.get("diagnosticCode").and_then(Value::as_str) {
                        Some(d) => b.with_diagnostic(d),
                        None => b,
                    }
                })
                .collect()
        }
        "Complaint" => (recipients("/complaint/complainedRecipients").iter())
            .map(|r| {
                let mut b = named(Bounce::new("ses", BounceKind::Complaint));
                b.address = r
                    .get("emailAddress")
                    .and_then(Value::as_str)
                    .and_then(address);
                b
            })
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_sns_host_of_aws_serves_the_certificate() {
        let ok = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem";
        assert!(certificate_url_ok(ok));
        assert!(certificate_url_ok(
            "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-x.pem"
        ));
        for bad in [
            "http://sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com.evil.example/x.pem",
            "https://evil.example/sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com:8443/x.pem",
            "https://user@sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com/x.txt",
            "https://s3.amazonaws.com/x.pem",
            "https://sns..amazonaws.com/x.pem",
            "not a url",
        ] {
            assert!(!certificate_url_ok(bad), "{bad}");
        }
    }
}
