//! `[database]`: where the ledger is, how many connections a process holds, and whether
//! commands migrate it when they open it.

use super::ConfigError;
use super::fields::Fields;

/// Connections a PostgreSQL ledger holds per process unless `database.max_connections` says.
pub(crate) const DEFAULT_PG_CONNECTIONS: u32 = 16;

#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `sqlite://PATH` (relative to the project root) or `postgres://…`.
    /// Default `sqlite://var/dawnpost.db`; `DAWNPOST_DATABASE_URL` overrides it.
    pub url: String,
    /// PostgreSQL only: the connections one process may hold. Default 16.
    pub max_connections: u32,
    /// PostgreSQL only: `manual` (the default: `dawnpost migrate` is a deploy step, and a
    /// command refuses a ledger behind it) or `auto` (every command migrates when it opens the
    /// ledger). SQLite always migrates.
    pub migrate_on_open: bool,
}

/// Reads `[database]` into `d`.
pub(super) fn read(mut f: Fields<'_, '_>, d: &mut DatabaseSettings, errors: &mut Vec<ConfigError>) {
    if let Some(url) = f.opt::<String>("url", errors) {
        if url.starts_with("sqlite:")
            || url.starts_with("postgres://")
            || url.starts_with("postgresql://")
        {
            d.url = url;
        } else {
            errors.push(f.place.error(
                "url",
                format!("unsupported database URL {url:?}: use sqlite://PATH or postgres://…"),
            ));
        }
    }
    match f.opt::<String>("migrate", errors).as_deref() {
        None | Some("manual") => {}
        Some("auto") => d.migrate_on_open = true,
        Some(other) => errors.push(f.place.error(
            "migrate",
            format!("{other:?} is not \"auto\" or \"manual\""),
        )),
    }
    if let Some(n) = f.opt::<u32>("max_connections", errors) {
        if (2..=1000).contains(&n) {
            d.max_connections = n;
        } else {
            errors.push(f.place.error(
                "max_connections",
                format!("{n} is out of range: 2 to 1000 (the pool, the completer and the server share them)"),
            ));
        }
    }
    f.finish(errors);
}
