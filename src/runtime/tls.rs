//! Trust for outgoing TLS (the SMTP relay, webhooks, http sources): the platform's roots, plus
//! the CA bundle `tls.ca_file` names, for a relay or receiver whose certificate a private CA
//! signed. And the words for a certificate that is not trusted, which is a misconfiguration (a
//! permanent failure), not something a retry mends.

use std::path::{Path, PathBuf};

/// A PEM file of one or more CA certificates, read and checked once.
#[derive(Debug, Clone)]
pub struct CaBundle {
    path: PathBuf,
    pem: Vec<u8>,
}

/// Why a CA bundle cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", .0.display())]
    Empty(PathBuf),
    #[error("{}: a certificate does not parse: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("the HTTP client cannot be built: {0}")]
    Client(#[from] reqwest::Error),
}

impl CaBundle {
    /// Reads `path` and checks that it holds at least one certificate that parses.
    pub fn load(path: &Path) -> Result<CaBundle, TlsError> {
        let pem = std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let bundle = CaBundle {
            path: path.to_path_buf(),
            pem,
        };
        if bundle.reqwest_certificates()?.is_empty() {
            return Err(TlsError::Empty(bundle.path));
        }
        Ok(bundle)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    /// The bundle's certificates, for a reqwest client (webhooks, http sources).
    pub(crate) fn reqwest_certificates(&self) -> Result<Vec<reqwest::Certificate>, TlsError> {
        reqwest::Certificate::from_pem_bundle(&self.pem).map_err(|e| TlsError::Invalid {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }
}

/// Adds `ca`'s certificates to the platform's roots of a reqwest client.
pub fn trust(
    builder: reqwest::ClientBuilder,
    ca: Option<&CaBundle>,
) -> Result<reqwest::ClientBuilder, TlsError> {
    match ca {
        None => Ok(builder),
        Some(ca) => Ok(builder.tls_certs_merge(ca.reqwest_certificates()?)),
    }
}

/// If a TLS certificate the peer presented was refused somewhere in `e`'s chain, why, in words:
/// `certificate not trusted: signed by an unknown authority …`.
pub(crate) fn untrusted_certificate(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    crate::domain::words::causes(e)
        .find_map(rustls_error)
        .and_then(certificate_words)
}

/// A rustls error at this level of a chain: itself, or inside `io::Error`s (whose `source`
/// skips the error they wrap; hyper wraps tokio-rustls' `io::Error` in another).
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut level = e;
    for _ in 0..8 {
        if let Some(r) = level.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        let inner = level.downcast_ref::<std::io::Error>()?.get_ref()?;
        level = inner;
    }
    None
}

fn certificate_words(e: &rustls::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let why = match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "it is signed by an authority this host does not trust (a private CA? set tls.ca_file)".to_string(),
            // webpki's own reasons arrive as `Other`, named by their variant.
            C::Other(o) if o.to_string().contains("CaUsedAsEndEntity") => {
                "the peer presents a CA certificate as its own".to_string()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "it is not valid for the host name connected to".to_string()
            }
            C::Expired | C::ExpiredContext { .. } => "it has expired".to_string(),
            C::NotValidYet | C::NotValidYetContext { .. } => "it is not valid yet".to_string(),
            C::Revoked => "it has been revoked".to_string(),
            C::BadSignature => "its signature does not verify".to_string(),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "it is not issued for a TLS server".to_string()
            }
            C::BadEncoding => "it does not parse".to_string(),
            _ => format!("it was refused ({e})"),
        },
        rustls::Error::NoCertificatesPresented => "the peer presented none".to_string(),
        _ => return None,
    };
    Some(format!("certificate not trusted: {why}"))
}
