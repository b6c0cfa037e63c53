//! `dawnpost.toml`: where the ledger, artifacts and outbox live, and the limits of the pool.
//! Every section and field is optional; the defaults are the ones documented on each field.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use lettre::message::Mailbox;

use super::ConfigError;
use super::database::{DEFAULT_PG_CONNECTIONS, DatabaseSettings};
use super::fields::{Fields, Place, parse_file};
use super::server::ServerSettings;
use crate::domain::duration::Span;

#[derive(Debug, Clone)]
pub struct Settings {
    pub database: DatabaseSettings,
    pub artifacts: ArtifactSettings,
    pub email: EmailSettings,
    pub pool: PoolSettings,
    pub retry: RetrySettings,
    pub schedule: ScheduleSettings,
    pub server: ServerSettings,
    pub services: super::services::ServiceSettings,
    pub recipients: super::recipients::RecipientSettings,
    pub webhook: WebhookSettings,
    /// `[[rate_limit]]`: per-destination send rates, in file order.
    pub rate_limits: Vec<super::RateLimitSpec>,
    pub tls: TlsSettings,
}

/// `[tls]`: trust for outgoing TLS (the relay, webhooks, http sources).
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// A PEM bundle of CA certificates trusted besides the platform's. Default none.
    pub ca_file: Option<PathBuf>,
    /// The bundle, read and checked when the configuration loads.
    pub ca: Option<std::sync::Arc<crate::runtime::tls::CaBundle>>,
}

#[derive(Debug, Clone, Copy)]
pub struct WebhookSettings {
    /// The bound of one whole webhook request, connect included. Default 30s.
    pub timeout: Span,
    /// The largest body a receiver is sent. Default 1 MiB.
    pub max_body_bytes: u64,
}

/// The largest `max_message_bytes` or `max_body_bytes`.
pub(crate) const MAX_MESSAGE_LIMIT: u64 = 1 << 30;

#[derive(Debug, Clone, Default)]
pub struct ArtifactSettings {
    /// An object_store URL. Default `file://var/artifacts` (relative to the project root).
    pub url: String,
    /// `s3://` only: the endpoint of an S3-compatible store (MinIO, R2, moto); default AWS's.
    pub endpoint: Option<String>,
    /// `s3://` only: the bucket's region; default `AWS_REGION` or `us-east-1`.
    pub region: Option<String>,
    /// `s3://` only: allow a plain `http://` endpoint. Default false.
    pub allow_http: bool,
    /// `s3://` only: the variables holding the access key id and secret; default
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (without either: the instance's role).
    pub access_key_id_env: Option<String>,
    pub secret_access_key_env: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailTransport {
    /// `.eml` files in `outbox_dir`.
    File,
    /// The SMTP relay at `smtp_url`.
    Smtp,
}

#[derive(Debug, Clone)]
pub struct EmailSettings {
    /// Default `Dawnpost <dawnpost@localhost>`.
    pub from: Mailbox,
    /// Default `file`.
    pub transport: EmailTransport,
    /// Default `var/outbox`, resolved against the project root.
    pub outbox_dir: PathBuf,
    /// Default `smtp://127.0.0.1:2525`.
    pub smtp_url: String,
    pub smtp_user_env: Option<String>,
    pub smtp_password_env: Option<String>,
    /// The bound of one whole SMTP send. Default 60s.
    pub timeout: Span,
    /// `Reply-To` of every email; none by default.
    pub reply_to: Option<Mailbox>,
    /// The domain of `List-Id: <REPORT.dawnpost.DOMAIN>`; default: the `from` address's.
    pub list_domain: Option<String>,
    /// The name given in `EHLO`; default [`EmailSettings::helo_name`]'s.
    pub helo_name: Option<String>,
    /// The largest message a relay is sent, measured encoded (base64 included). Default 10 MiB.
    pub max_message_bytes: u64,
}

impl EmailSettings {
    /// The name given in `EHLO`: `helo_name`, else this host's name when it is fully qualified
    /// (has a dot), else the `from` address's domain — never a bare `vm`, which spam filters
    /// score (HELO_NO_DOMAIN, FSL_HELO_NON_FQDN_1).
    pub fn helo_name(&self) -> String {
        if let Some(name) = &self.helo_name {
            return name.clone();
        }
        let host = hostname();
        if host.contains('.') && is_domain(&host) {
            host.to_ascii_lowercase()
        } else {
            self.from.email.domain().to_ascii_lowercase()
        }
    }

    /// The `List-Id` domain: `list_domain`, or the `from` address's domain.
    pub fn list_domain(&self) -> &str {
        self.list_domain
            .as_deref()
            .unwrap_or_else(|| self.from.email.domain())
    }
}

#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// In-flight work items. Default 16.
    pub concurrency: u32,
    /// New leases per second. Default 50.
    pub admission_per_second: u32,
    /// Lease length; the owner extends it while working. Default 5m.
    pub lease: Span,
    /// How long in-flight work may finish on shutdown. Default 30s.
    pub drain_timeout: Span,
    /// How far this node's wall clock may be off the shared ledger's before it stops leasing
    /// and rescuing. Default 30s.
    pub max_clock_offset: Span,
}

#[derive(Debug, Clone, Copy)]
pub struct RetrySettings {
    /// First backoff step. Default 30s.
    pub base: Span,
    /// Largest backoff step. Default 15m.
    pub cap: Span,
    /// Largest Retry-After honoured. Default 15m.
    pub max_retry_after: Span,
    /// Attempts per delivery before quarantine. Default 8.
    pub max_attempts: u32,
    /// Age of a delivery after which it is quarantined. Default 6h.
    pub max_age: Span,
}

#[derive(Debug, Clone, Copy)]
pub struct ScheduleSettings {
    /// Fires missed while the scheduler was down are enqueued if newer than this. Default 24h.
    pub catch_up: Span,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            database: DatabaseSettings {
                url: "sqlite://var/dawnpost.db".into(),
                max_connections: DEFAULT_PG_CONNECTIONS,
                migrate_on_open: false,
            },
            artifacts: ArtifactSettings {
                url: "file://var/artifacts".into(),
                ..ArtifactSettings::default()
            },
            email: EmailSettings {
                from: "Dawnpost <dawnpost@localhost>".parse().unwrap_or_else(|_| {
                    Mailbox::new(
                        None,
                        lettre::Address::new("dawnpost", "localhost").expect("static address"),
                    )
                }),
                transport: EmailTransport::File,
                outbox_dir: PathBuf::from("var/outbox"),
                smtp_url: "smtp://127.0.0.1:2525".into(),
                smtp_user_env: None,
                smtp_password_env: None,
                timeout: Span::from_secs(60),
                reply_to: None,
                list_domain: None,
                helo_name: None,
                max_message_bytes: 10 << 20,
            },
            pool: PoolSettings {
                concurrency: 16,
                admission_per_second: 50,
                lease: Span::from_secs(300),
                drain_timeout: Span::from_secs(30),
                max_clock_offset: Span::from_secs(30),
            },
            retry: RetrySettings {
                base: Span::from_secs(30),
                cap: Span::from_secs(900),
                max_retry_after: Span::from_secs(900),
                max_attempts: 8,
                max_age: Span::from_secs(6 * 3600),
            },
            schedule: ScheduleSettings {
                catch_up: Span::from_secs(24 * 3600),
            },
            server: ServerSettings {
                bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
                ops_token_env: "DAWNPOST_OPS_TOKEN".into(),
                ingest_secret_env: "DAWNPOST_INGEST_SECRET".into(),
                viewer_token_env: "DAWNPOST_VIEWER_TOKEN".into(),
                header_timeout: Span::from_secs(10),
                body_timeout: Span::from_secs(10),
                max_connections: 512,
                public_url: None,
                link_secret_env: "DAWNPOST_LINK_SECRET".into(),
            },
            services: super::services::ServiceSettings::default(),
            recipients: super::recipients::RecipientSettings::default(),
            webhook: WebhookSettings {
                timeout: Span::from_secs(30),
                max_body_bytes: 1 << 20,
            },
            rate_limits: Vec::new(),
            tls: TlsSettings::default(),
        }
    }
}

impl Settings {
    /// The environment variables this file names for secrets.
    pub(crate) fn secret_envs(&self) -> Vec<&str> {
        let mut v = Vec::new();
        if self.email.transport == EmailTransport::Smtp {
            v.extend(self.email.smtp_user_env.as_deref());
            v.extend(self.email.smtp_password_env.as_deref());
        }
        v.extend(self.artifacts.access_key_id_env.as_deref());
        v.extend(self.artifacts.secret_access_key_env.as_deref());
        if self.server.public_url.is_some() {
            v.push(&self.server.link_secret_env);
        }
        let r = &self.recipients;
        v.extend(r.postmark_credentials_env.as_deref());
        v.extend(r.mailgun_signing_key_env.as_deref());
        v.extend(r.sendgrid_verification_key_env.as_deref());
        v
    }
}

pub(super) fn load(file: &Path, errors: &mut Vec<ConfigError>) -> Settings {
    let mut s = Settings::default();
    if !file.is_file() {
        errors.push(Place::new(file).error(
            "(file)",
            "missing: dawnpost.toml is required (it may be empty)",
        ));
        return s;
    }
    let Some(table) = parse_file(file, errors) else {
        return s;
    };
    let mut top = Fields::new(&table, Place::new(file));
    let place = top.place.clone();
    let mut section = |name: &'static str, errors: &mut Vec<ConfigError>| {
        top.table(name, errors)
            .map(|t| Fields::new(t, place.nested(name)))
    };

    if let Some(f) = section("database", errors) {
        super::database::read(f, &mut s.database, errors);
    }
    if let Some(f) = section("artifacts", errors) {
        artifacts(f, &mut s.artifacts, errors);
    }
    if let Some(f) = section("email", errors) {
        email(f, &mut s.email, errors);
    }
    if let Some(f) = section("pool", errors) {
        pool(f, &mut s.pool, errors);
    }
    if let Some(f) = section("retry", errors) {
        retry(f, &mut s.retry, errors);
    }
    if let Some(mut f) = section("schedule", errors) {
        if let Some(t) = f.opt::<Span>("catch_up", errors) {
            s.schedule.catch_up = t;
        }
        f.finish(errors);
    }
    if let Some(f) = section("server", errors) {
        super::server::read(f, &mut s.server, errors);
    }
    if let Some(f) = section("recipients", errors) {
        super::recipients::read(f, &mut s.recipients, errors);
    }
    if let Some(f) = section("services", errors) {
        super::services::read(f, &mut s.services, errors);
    }
    if let Some(mut f) = section("tls", errors) {
        if let Some(path) = f.opt::<PathBuf>("ca_file", errors) {
            s.tls.ca_file = Some(path);
        }
        f.finish(errors);
    }
    if let Some(mut f) = section("webhook", errors) {
        if let Some(t) = f.positive("timeout", errors) {
            s.webhook.timeout = t;
        }
        if let Some(n) = f.bytes("max_body_bytes", MAX_MESSAGE_LIMIT, errors) {
            s.webhook.max_body_bytes = n;
        }
        f.finish(errors);
    }
    let rate_limits = top.raw("rate_limit");
    s.rate_limits = super::rate_limits::load(rate_limits, &place, errors);
    top.finish(errors);
    s
}

fn artifacts(mut f: Fields<'_, '_>, a: &mut ArtifactSettings, errors: &mut Vec<ConfigError>) {
    if let Some(url) = f.opt::<String>("url", errors) {
        match artifact_url(&url) {
            Ok(()) => a.url = url,
            Err(message) => errors.push(f.place.error("url", message)),
        }
    }
    if let Some(endpoint) = f.opt::<String>("endpoint", errors) {
        match url::Url::parse(&endpoint) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                a.endpoint = Some(endpoint);
            }
            _ => errors.push(f.place.error(
                "endpoint",
                format!("{endpoint:?} is not an http(s) URL such as https://s3.example.com"),
            )),
        }
    }
    a.region = f.opt::<String>("region", errors);
    a.allow_http = f.opt::<bool>("allow_http", errors).unwrap_or(false);
    a.access_key_id_env = f.env_name("access_key_id_env", errors);
    a.secret_access_key_env = f.env_name("secret_access_key_env", errors);
    let s3_only = [
        ("endpoint", a.endpoint.is_some()),
        ("region", a.region.is_some()),
        ("allow_http", a.allow_http),
        ("access_key_id_env", a.access_key_id_env.is_some()),
        ("secret_access_key_env", a.secret_access_key_env.is_some()),
    ];
    if !a.url.starts_with("s3://") {
        for (field, set) in s3_only {
            if set {
                errors.push(f.place.error(
                    field,
                    format!("only applies to an s3:// store; url is {:?}", a.url),
                ));
            }
        }
    }
    if !a.allow_http
        && let Some(e) = a.endpoint.as_deref().filter(|e| e.starts_with("http://"))
    {
        errors.push(f.place.error(
            "endpoint",
            format!("{e:?} is plain http: set allow_http = true to use it"),
        ));
    }
    f.finish(errors);
}

fn email(mut f: Fields<'_, '_>, e: &mut EmailSettings, errors: &mut Vec<ConfigError>) {
    if let Some(from) = f.opt::<String>("from", errors) {
        match from.parse::<Mailbox>() {
            Ok(m) => e.from = m,
            Err(err) => errors.push(
                f.place
                    .error("from", format!("invalid address {from:?}: {err}")),
            ),
        }
    }
    if let Some(t) = f.opt::<String>("transport", errors) {
        match t.as_str() {
            "file" => e.transport = EmailTransport::File,
            "smtp" => e.transport = EmailTransport::Smtp,
            _ => errors.push(f.place.error(
                "transport",
                format!("{t:?} is not a transport: use \"file\" or \"smtp\""),
            )),
        }
    }
    if let Some(dir) = f.opt::<PathBuf>("outbox_dir", errors) {
        e.outbox_dir = dir;
    }
    if let Some(url) = f.opt::<String>("smtp_url", errors) {
        match url::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "smtp" | "smtps") && u.host().is_some() => {
                e.smtp_url = url
            }
            _ => errors.push(f.place.error(
                "smtp_url",
                format!("{url:?} is not an smtp:// or smtps:// URL with a host"),
            )),
        }
    }
    if let Some(env) = f.env_name("smtp_user_env", errors) {
        e.smtp_user_env = Some(env);
    }
    if let Some(env) = f.env_name("smtp_password_env", errors) {
        e.smtp_password_env = Some(env);
    }
    if let Some(t) = f.positive("timeout", errors) {
        e.timeout = t;
    }
    if let Some(n) = f.bytes("max_message_bytes", MAX_MESSAGE_LIMIT, errors) {
        e.max_message_bytes = n;
    }
    if let Some(r) = f.opt::<String>("reply_to", errors) {
        match r.parse::<Mailbox>() {
            Ok(m) => e.reply_to = Some(m),
            Err(err) => errors.push(
                f.place
                    .error("reply_to", format!("invalid address {r:?}: {err}")),
            ),
        }
    }
    if let Some(h) = f.opt::<String>("helo_name", errors) {
        if is_domain(&h) && h.contains('.') {
            e.helo_name = Some(h.to_ascii_lowercase());
        } else {
            errors.push(f.place.error(
                "helo_name",
                format!("{h:?} is not a fully qualified domain name (relays score a name without a dot as spam)"),
            ));
        }
    }
    if let Some(d) = f.opt::<String>("list_domain", errors) {
        if is_domain(&d) {
            e.list_domain = Some(d.to_ascii_lowercase());
        } else {
            errors.push(
                f.place
                    .error("list_domain", format!("{d:?} is not a domain name")),
            );
        }
    }
    f.finish(errors);
}

/// Dot-separated labels of letters, digits and hyphens.
fn is_domain(d: &str) -> bool {
    !d.is_empty()
        && d.split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// This host's name, as lettre would give it in EHLO (empty when it has none).
fn hostname() -> String {
    match lettre::transport::smtp::extension::ClientId::default() {
        lettre::transport::smtp::extension::ClientId::Domain(name) => name,
        _ => String::new(),
    }
}

fn pool(mut f: Fields<'_, '_>, p: &mut PoolSettings, errors: &mut Vec<ConfigError>) {
    if let Some(n) = f.at_least_one("concurrency", errors) {
        p.concurrency = n;
    }
    if let Some(n) = f.at_least_one("admission_per_second", errors) {
        p.admission_per_second = n;
    }
    if let Some(t) = f.positive("lease", errors) {
        p.lease = t;
    }
    if let Some(t) = f.opt::<Span>("drain_timeout", errors) {
        p.drain_timeout = t;
    }
    if let Some(t) = f.positive("max_clock_offset", errors) {
        p.max_clock_offset = t;
    }
    f.finish(errors);
}

fn retry(mut f: Fields<'_, '_>, r: &mut RetrySettings, errors: &mut Vec<ConfigError>) {
    if let Some(t) = f.positive("base", errors) {
        r.base = t;
    }
    if let Some(t) = f.positive("cap", errors) {
        r.cap = t;
    }
    if let Some(t) = f.positive("max_retry_after", errors) {
        r.max_retry_after = t;
    }
    if let Some(n) = f.at_least_one("max_attempts", errors) {
        r.max_attempts = n;
    }
    if let Some(t) = f.positive("max_age", errors) {
        r.max_age = t;
    }
    if r.base > r.cap {
        errors.push(f.place.error(
            "base",
            format!("base ({}) is larger than cap ({})", r.base, r.cap),
        ));
    }
    f.finish(errors);
}

/// An object store URL that `run` can open: `file://`, `memory://`, or, in a build with the
/// `cloud` feature, `s3://`, `gs://` and `az://` (and their https forms).
fn artifact_url(url: &str) -> Result<(), String> {
    use object_store::ObjectStoreScheme as Scheme;
    // As the store opens them: a path after file:// (relative to the project root), memory://.
    if url.starts_with("file://") || url.starts_with("memory://") {
        return Ok(());
    }
    let parsed = url::Url::parse(url).map_err(|e| {
        format!("{url:?} is not an object store URL (file://, memory://, s3://…): {e}")
    })?;
    match Scheme::parse(&parsed) {
        Ok((Scheme::AmazonS3, _)) if cfg!(feature = "s3") => Ok(()),
        Ok((Scheme::GoogleCloudStorage | Scheme::MicrosoftAzure, _)) if cfg!(feature = "cloud") => {
            Ok(())
        }
        Ok((Scheme::AmazonS3, _)) => Err(format!(
            "{url:?}: this build has no S3 object store (build with --features s3)"
        )),
        Ok((Scheme::GoogleCloudStorage | Scheme::MicrosoftAzure, _)) => Err(format!(
            "{url:?}: this build has no gs:// or az:// object stores (build with --features cloud)"
        )),
        _ => Err(format!(
            "{url:?}: scheme {:?} is not an object store (file://, memory://, s3://, gs://, az://)",
            parsed.scheme()
        )),
    }
}
