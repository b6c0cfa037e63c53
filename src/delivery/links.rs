//! Links to a job's artifact, for a destination it is too large for: signed with a key only
//! the daemon knows (`[server] link_secret_env`), over the job and the artifact's sha256, so a
//! link opens exactly one artifact and cannot be made for another. The daemon serves them
//! (`GET /r/{job}/{sha256}[/text|/csv]?s=…`) while the artifact is kept.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::keys::JobKey;

/// The shortest signing key accepted: 32 bytes, as for an HMAC-SHA256 key.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// One part of an artifact, as a link names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Html,
    Text,
    Csv,
}

impl Part {
    /// The link's last path segment (none for the HTML, the report itself).
    fn suffix(self) -> &'static str {
        match self {
            Part::Html => "",
            Part::Text => "/text",
            Part::Csv => "/csv",
        }
    }

    /// The part a link's last path segment names.
    pub fn parse(segment: Option<&str>) -> Option<Part> {
        match segment {
            None => Some(Part::Html),
            Some("text") => Some(Part::Text),
            Some("csv") => Some(Part::Csv),
            Some(_) => None,
        }
    }
}

/// Why links cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error(
        "environment variable {0} is not set: links to reports too large to send cannot be signed"
    )]
    MissingKey(String),
    #[error(
        "environment variable {0} holds fewer than {MIN_KEY_BYTES} bytes: too short a key to sign links with"
    )]
    ShortKey(String),
}

/// Why an unsubscribe token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the link is not an unsubscribe link")]
    Malformed,
    #[error("the link was not made by this server")]
    Forged,
}

/// Makes and checks links under one base URL and key.
#[derive(Clone)]
pub struct Links {
    base: String,
    key: Vec<u8>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Links({})", self.base)
    }
}

impl Links {
    /// Links under `base` signed with the key in variable `key_env`.
    pub(crate) fn from_env(base: &url::Url, key_env: &str) -> Result<Links, LinkError> {
        let key = std::env::var(key_env).map_err(|_| LinkError::MissingKey(key_env.into()))?;
        if key.len() < MIN_KEY_BYTES {
            return Err(LinkError::ShortKey(key_env.into()));
        }
        Ok(Links::new(base, key.into_bytes()))
    }

    /// The links `[server]` configures: none without `public_url`.
    pub fn from_settings(s: &crate::config::ServerSettings) -> Result<Option<Links>, LinkError> {
        s.public_url
            .as_ref()
            .map(|base| Links::from_env(base, &s.link_secret_env))
            .transpose()
    }

    pub fn new(base: &url::Url, key: Vec<u8>) -> Links {
        Links {
            base: base.as_str().trim_end_matches('/').to_string(),
            key,
        }
    }

    /// The link to `part` of job `job`'s artifact with digest `sha256`.
    pub fn link(&self, job: &JobKey, sha256: &str, part: Part) -> String {
        let sig = hex::encode(self.mac(job, sha256).finalize().into_bytes());
        format!("{}/r/{job}/{sha256}{}?s={sig}", self.base, part.suffix())
    }

    /// Whether `sig` (hex) is this key's signature over `job` and `sha256`, compared in
    /// constant time.
    pub fn verify(&self, job: &JobKey, sha256: &str, sig: &str) -> bool {
        let Ok(sig) = hex::decode(sig) else {
            return false;
        };
        self.mac(job, sha256).verify_slice(&sig).is_ok()
    }

    /// The link to job `job`'s report, whatever its artifact's digest: what a message made
    /// before its artifact is stored (a chat message, a part of that artifact) links to.
    pub fn report(&self, job: &JobKey) -> String {
        let sig = hex::encode(self.report_mac(job).finalize().into_bytes());
        format!("{}/r/{job}?s={sig}", self.base)
    }

    /// The link to chart `id` of job `job`'s report: signed as [`Links::report`]'s link is.
    pub fn chart(&self, job: &JobKey, id: &str) -> String {
        crate::report::render::chart_url(&self.report(job), id)
    }

    /// Whether `sig` (hex) is this key's signature of [`Links::report`]'s link to `job`.
    pub fn verify_report(&self, job: &JobKey, sig: &str) -> bool {
        let Ok(sig) = hex::decode(sig) else {
            return false;
        };
        self.report_mac(job).verify_slice(&sig).is_ok()
    }

    /// Signed under its own label: no link to a job can pass for a link to an artifact.
    fn report_mac(&self, job: &JobKey) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(b"dawnpost-report-link-v1\n");
        mac.update(job.to_string().as_bytes());
        mac
    }

    /// The one-click unsubscribe link (RFC 8058) of `address` from `report`:
    /// `BASE/u/TOKEN`, the token the report and address (base64url) and their signature.
    pub fn unsubscribe(&self, report: &str, address: &str) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let who = b64.encode(format!("{report}\n{address}"));
        let sig = hex::encode(
            self.unsubscribe_mac(report, address)
                .finalize()
                .into_bytes(),
        );
        format!("{}/u/{who}.{sig}", self.base)
    }

    /// The report and address an unsubscribe token names, when this key signed it.
    pub fn unsubscribed(&self, token: &str) -> Result<(String, String), TokenError> {
        use base64::Engine as _;
        let (who, sig) = token.split_once('.').ok_or(TokenError::Malformed)?;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let who = b64.decode(who).map_err(|_| TokenError::Malformed)?;
        let who = String::from_utf8(who).map_err(|_| TokenError::Malformed)?;
        let (report, address) = who.split_once('\n').ok_or(TokenError::Malformed)?;
        let sig = hex::decode(sig).map_err(|_| TokenError::Malformed)?;
        (self.unsubscribe_mac(report, address).verify_slice(&sig))
            .map_err(|_| TokenError::Forged)?;
        Ok((report.to_string(), address.to_string()))
    }

    /// Signed under its own label: no link to a report can pass for an unsubscribe.
    fn unsubscribe_mac(&self, report: &str, address: &str) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(b"dawnpost-unsubscribe-v1\n");
        mac.update(report.as_bytes());
        mac.update(b"\n");
        mac.update(address.as_bytes());
        mac
    }

    fn keyed(&self) -> Hmac<Sha256> {
        // A key of any length is accepted by HMAC; the error cannot happen.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
    }

    fn mac(&self, job: &JobKey, sha256: &str) -> Hmac<Sha256> {
        let mut mac = self.keyed();
        mac.update(b"dawnpost-link-v1\n");
        mac.update(job.to_string().as_bytes());
        mac.update(b"\n");
        mac.update(sha256.as_bytes());
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        let base = url::Url::parse("https://dawnpost.example/").expect("url");
        Links::new(&base, b"0123456789abcdef0123456789abcdef".to_vec())
    }

    #[test]
    fn an_unsubscribe_token_names_its_report_and_address_and_cannot_be_forged() {
        let l = links();
        let url = l.unsubscribe("warehouse-17", "bob@carrier-y.example");
        let token = url
            .strip_prefix("https://dawnpost.example/u/")
            .expect("under the base");
        assert!(!token.contains('/') && !token.contains('?'), "{token}");
        assert_eq!(
            l.unsubscribed(token),
            Ok(("warehouse-17".into(), "bob@carrier-y.example".into()))
        );
        // Another address under the same signature, another key, or garbage: refused.
        let (_, sig) = token.split_once('.').expect("dot");
        let other = l.unsubscribe("warehouse-17", "eve@carrier-y.example");
        let (who, _) = other
            .rsplit('/')
            .next()
            .expect("t")
            .split_once('.')
            .expect("dot");
        assert_eq!(
            l.unsubscribed(&format!("{who}.{sig}")),
            Err(TokenError::Forged)
        );
        let base = url::Url::parse("https://dawnpost.example/").expect("url");
        let stranger = Links::new(&base, b"another key of thirty-two bytes!".to_vec());
        assert_eq!(stranger.unsubscribed(token), Err(TokenError::Forged));
        for bad in ["", "nodot", "!!.00", "aGk.zz"] {
            assert_eq!(l.unsubscribed(bad), Err(TokenError::Malformed), "{bad}");
        }
    }

    #[test]
    fn a_link_verifies_for_its_job_and_digest_only() {
        let l = links();
        let job: JobKey = "warehouse-17:2026-11-30".parse().expect("key");
        let other: JobKey = "warehouse-18:2026-11-30".parse().expect("key");
        let link = l.link(&job, "ab12", Part::Text);
        assert!(
            link.starts_with("https://dawnpost.example/r/warehouse-17:2026-11-30/ab12/text?s="),
            "{link}"
        );
        let sig = link.rsplit("s=").next().expect("sig");
        assert!(l.verify(&job, "ab12", sig));
        assert!(!l.verify(&job, "ab13", sig), "another artifact");
        assert!(!l.verify(&other, "ab12", sig), "another job");
        assert!(!l.verify(&job, "ab12", "zz"), "not hex");
        let other_key = Links::new(
            &url::Url::parse("https://x.example").expect("url"),
            vec![7; 32],
        );
        assert!(!other_key.verify(&job, "ab12", sig), "another key");
    }

    #[test]
    fn a_report_link_opens_its_job_only_and_is_no_artifact_link() {
        let l = links();
        let job: JobKey = "warehouse-17:2026-11-30".parse().expect("key");
        let other: JobKey = "warehouse-17:2026-11-29".parse().expect("key");
        let link = l.report(&job);
        assert!(
            link.starts_with("https://dawnpost.example/r/warehouse-17:2026-11-30?s="),
            "{link}"
        );
        let sig = link.rsplit("s=").next().expect("sig");
        assert!(l.verify_report(&job, sig));
        assert!(!l.verify_report(&other, sig), "another job");
        assert!(!l.verify(&job, "", sig), "not an artifact's link");
        let artifact_sig = l.link(&job, "ab12", Part::Html);
        let artifact_sig = artifact_sig.rsplit("s=").next().expect("sig");
        assert!(
            !l.verify_report(&job, artifact_sig),
            "an artifact's is not a job's"
        );
    }

    #[test]
    fn every_part_of_one_artifact_shares_the_signature() {
        let l = links();
        let job: JobKey = "w:2026-11-30".parse().expect("key");
        let sig = |p| {
            l.link(&job, "ab", p)
                .rsplit("s=")
                .next()
                .map(str::to_string)
        };
        assert_eq!(sig(Part::Html), sig(Part::Csv));
        assert_eq!(Part::parse(None), Some(Part::Html));
        assert_eq!(Part::parse(Some("csv")), Some(Part::Csv));
        assert_eq!(Part::parse(Some("html")), None);
    }
}
