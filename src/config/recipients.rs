//! `[recipients]`: what bounces and complaints do to the addresses they name. A hard bounce
//! or a complaint suppresses its address at once; soft bounces count, and `soft_bounces` of
//! them within `soft_bounce_window` suppress it. The providers' webhooks are enabled by naming
//! the variable that holds each one's secret.

use super::ConfigError;
use super::fields::Fields;
use crate::domain::duration::Span;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipientSettings {
    /// How many soft bounces (4.x.x) within the window suppress an address. Default 3.
    pub soft_bounces: u32,
    /// The window they are counted in. Default 7d.
    pub soft_bounce_window: Span,
    /// The variable holding `user:password`, the HTTP Basic credentials Postmark's webhook
    /// sends to `POST /v1/bounces/postmark`. Unset: that endpoint answers 404.
    pub postmark_credentials_env: Option<String>,
    /// The variable holding Mailgun's HTTP webhook signing key (`POST /v1/bounces/mailgun`).
    pub mailgun_signing_key_env: Option<String>,
    /// The variable holding SendGrid's event webhook verification key, base64
    /// (`POST /v1/bounces/sendgrid`).
    pub sendgrid_verification_key_env: Option<String>,
    /// The SNS topics whose SES notifications `POST /v1/bounces/ses` takes; none: that
    /// endpoint answers 404.
    pub ses_topic_arns: Vec<String>,
    /// A folder of SNS signing certificates (`<name>.pem`, as the `SigningCertURL` ends), read
    /// instead of fetching them from AWS: for a node that cannot reach AWS. Resolved against
    /// the project root.
    pub ses_certificates_dir: Option<std::path::PathBuf>,
}

impl Default for RecipientSettings {
    fn default() -> Self {
        RecipientSettings {
            soft_bounces: 3,
            soft_bounce_window: Span::from_secs(7 * 24 * 3600),
            postmark_credentials_env: None,
            mailgun_signing_key_env: None,
            sendgrid_verification_key_env: None,
            ses_topic_arns: Vec::new(),
            ses_certificates_dir: None,
        }
    }
}

/// Reads `[recipients]` into `s`.
pub(super) fn read(
    mut f: Fields<'_, '_>,
    s: &mut RecipientSettings,
    errors: &mut Vec<ConfigError>,
) {
    if let Some(n) = f.opt::<u32>("soft_bounces", errors) {
        if n == 0 {
            errors.push(f.place.error("soft_bounces", "must be at least 1"));
        } else {
            s.soft_bounces = n;
        }
    }
    if let Some(t) = f.positive("soft_bounce_window", errors) {
        s.soft_bounce_window = t;
    }
    for (key, slot) in [
        ("postmark_credentials_env", &mut s.postmark_credentials_env),
        ("mailgun_signing_key_env", &mut s.mailgun_signing_key_env),
        (
            "sendgrid_verification_key_env",
            &mut s.sendgrid_verification_key_env,
        ),
    ] {
        if let Some(name) = f.opt::<String>(key, errors) {
            *slot = Some(name);
        }
    }
    if let Some(arns) = f.opt::<Vec<String>>("ses_topic_arns", errors) {
        for arn in &arns {
            if !arn.starts_with("arn:aws") || arn.split(':').count() != 6 {
                let why =
                    format!("{arn:?} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC)");
                errors.push(f.place.error("ses_topic_arns", why));
            }
        }
        s.ses_topic_arns = arns;
    }
    if let Some(dir) = f.opt::<std::path::PathBuf>("ses_certificates_dir", errors) {
        s.ses_certificates_dir = Some(dir);
    }
    f.finish(errors);
}
