//! Standard Webhooks signatures, for outgoing webhooks and incoming verification alike:
//! `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`, where the key is the
//! base64-decoded part of a `whsec_…` secret.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// A decoded signing secret. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    #[error("the secret is not base64 after its whsec_ prefix")]
    BadSecret,
    #[error("no signature matches")]
    Mismatch,
    #[error("more than {MAX_SIGNATURES} signatures")]
    TooMany,
}

/// The most `webhook-signature` entries looked at (key rotation needs two or three).
pub const MAX_SIGNATURES: usize = 8;

impl Secret {
    /// Parses `whsec_<base64>`; a secret without the prefix is taken as base64 too.
    pub fn parse(secret: &str) -> Result<Secret, SigningError> {
        let b64 = secret
            .trim()
            .strip_prefix("whsec_")
            .unwrap_or(secret.trim());
        let key = STANDARD.decode(b64).map_err(|_| SigningError::BadSecret)?;
        if key.is_empty() {
            return Err(SigningError::BadSecret);
        }
        Ok(Secret(key))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC accepts any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` header value.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let tag = self.mac(id, timestamp, body).finalize().into_bytes();
        format!("v1,{}", STANDARD.encode(tag))
    }

    /// Checks a `webhook-signature` header (space-separated `v1,<base64>` entries, at most
    /// [`MAX_SIGNATURES`]): the HMAC is computed once, then compared with each entry in
    /// constant time.
    pub fn verify(
        &self,
        id: &str,
        timestamp: i64,
        body: &[u8],
        header: &str,
    ) -> Result<(), SigningError> {
        if header.split_whitespace().nth(MAX_SIGNATURES).is_some() {
            return Err(SigningError::TooMany);
        }
        let expected = self.mac(id, timestamp, body).finalize().into_bytes();
        let mut matched = subtle::Choice::from(0);
        for entry in header.split_whitespace() {
            let Some(tag) = entry
                .strip_prefix("v1,")
                .and_then(|sig| STANDARD.decode(sig).ok())
            else {
                continue;
            };
            if tag.len() == expected.len() {
                matched |= tag.as_slice().ct_eq(expected.as_slice());
            }
        }
        if bool::from(matched) {
            Ok(())
        } else {
            Err(SigningError::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The published vector from the Standard Webhooks reference library tests.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn signs_the_published_vector() {
        let s = Secret::parse(SECRET).expect("secret");
        assert_eq!(s.sign(ID, TS, BODY), SIG);
    }

    #[test]
    fn verifies_and_refuses() {
        let s = Secret::parse(SECRET).expect("secret");
        assert_eq!(
            s.verify(ID, TS, BODY, &format!("v1,bm90IHRoaXM= {SIG}")),
            Ok(())
        );
        assert_eq!(
            s.verify(ID, TS, br#"{"test": 1}"#, SIG),
            Err(SigningError::Mismatch)
        );
        assert_eq!(s.verify(ID, TS + 1, BODY, SIG), Err(SigningError::Mismatch));
        let other = Secret::parse("whsec_c2VjcmV0LWIK").expect("secret");
        assert_eq!(other.verify(ID, TS, BODY, SIG), Err(SigningError::Mismatch));
        assert_eq!(
            Secret::parse("whsec_!!!").map(|_| ()),
            Err(SigningError::BadSecret)
        );
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let many = ["v1,bm90IHRoaXM="; MAX_SIGNATURES].join(" ");
        assert_eq!(
            s.verify(ID, TS, BODY, &format!("{many} {SIG}")),
            Err(SigningError::TooMany)
        );
        let just_enough = ["v1,bm90IHRoaXM="; MAX_SIGNATURES - 1].join(" ");
        assert_eq!(
            s.verify(ID, TS, BODY, &format!("{just_enough} {SIG}")),
            Ok(())
        );
    }
}
