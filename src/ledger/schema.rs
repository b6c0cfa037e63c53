//! The ledger's schema: which migrations this binary knows, which the ledger has applied, and
//! whether the two fit. A migration is *expand* (older versions keep working after it: a new
//! table, a new column with a default) or *contract* (it removes or changes what an older
//! version uses), by its file name: `0010_expand_nodes.sql`, `0011_contract_drop_x.sql`. The
//! first nine, older than the distinction, count as expand.
//!
//! A binary runs on a ledger that has every expand migration it knows (its own contract
//! migrations may still be pending: it works before and after them), and may have more, as long
//! as each one it does not know is an expand migration: after an expand migration an older node
//! restarts, and a rollback to the previous binary works. On PostgreSQL no command migrates by
//! itself (`dawnpost migrate` does, or `database.migrate = "auto"`); SQLite, one node's file,
//! migrates when it opens. Opening never contracts (a new, empty ledger aside): a contract
//! migration is `dawnpost migrate`'s, once nothing of the old shape is in the way (`deploy.rs`).
//!
//! The rule for whoever writes one: an expand migration never depends on a contract migration
//! numbered before it. Expand migrations apply while an earlier contract migration waits for
//! the old nodes, so the ledger may have 14 applied and 13 pending.

use super::handles::Schema;
use std::collections::BTreeMap;

use sqlx::migrate::Migrator;

use super::{Backend, Ledger, LedgerError, Result};

/// How a command opens the ledger's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Apply pending migrations (`database.migrate = "auto"`, SQLite, tests).
    Migrate,
    /// Refuse a ledger that lacks a migration this binary needs (PostgreSQL's default).
    Check,
    /// Only refuse a ledger a newer version contracted: what `dawnpost migrate` opens with.
    AsIs,
}

/// PostgreSQL's migrations, embedded at build time; applying them tolerates newer migrations
/// this binary does not know (whether those fit is [`fit`]'s to say).
pub(super) fn postgres() -> Migrator {
    let mut m = sqlx::migrate!("./migrations/postgres");
    m.set_ignore_missing(true);
    m
}

/// SQLite's migrations (see [`postgres`]).
pub(super) fn sqlite() -> Migrator {
    let mut m = sqlx::migrate!("./migrations/sqlite");
    m.set_ignore_missing(true);
    m
}

/// Migrations up to this version predate the expand/contract names; all of them expand.
const BASELINE: i64 = 9;

/// Whether older versions keep working after a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationKind {
    Expand,
    Contract,
}

impl MigrationKind {
    /// The kind a migration's description (its file name after the version) says.
    pub fn of(version: i64, description: &str) -> MigrationKind {
        if version > BASELINE && description.starts_with("contract") {
            MigrationKind::Contract
        } else {
            MigrationKind::Expand
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MigrationKind::Expand => "expand",
            MigrationKind::Contract => "contract",
        }
    }
}

/// One migration, as `migrate --dry-run` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationInfo {
    pub version: i64,
    pub description: String,
    pub kind: MigrationKind,
}

/// How the ledger's schema fits this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFit {
    /// The newest version applied (0: none).
    pub applied: i64,
    /// The newest version this binary needs applied: its newest expand migration (it works
    /// before and after its own contract migrations).
    pub needed: i64,
    /// Known migrations the ledger does not have yet, oldest first.
    pub pending: Vec<MigrationInfo>,
    /// Applied migrations this binary does not know (a newer version applied them).
    pub unknown: Vec<MigrationInfo>,
}

impl SchemaFit {
    /// Whether this binary may use the ledger as it is (pending migrations aside).
    pub(crate) fn check_newer(&self) -> Result<()> {
        let contract = self
            .unknown
            .iter()
            .find(|m| m.kind == MigrationKind::Contract);
        match contract {
            None => Ok(()),
            Some(m) => Err(LedgerError::Schema(format!(
                "the ledger was migrated by a newer version of dawnpost (migration {} \
                 \"{}\" is a contract migration this binary does not know): run the newer \
                 binary",
                m.version, m.description
            ))),
        }
    }

    /// Refuses a ledger that lacks an expand migration this binary needs (a pending contract
    /// migration only removes what older versions use).
    pub(crate) fn check_current(&self) -> Result<()> {
        if !self.pending.iter().any(|m| m.kind == MigrationKind::Expand) {
            return Ok(());
        }
        let names: Vec<String> = self
            .pending
            .iter()
            .filter(|m| m.version <= self.needed)
            .map(|m| format!("{} {} ({})", m.version, m.description, m.kind.as_str()))
            .collect();
        Err(LedgerError::Schema(format!(
            "the ledger's schema is at version {}; this binary needs version {}: run \
             `dawnpost migrate` (pending: {})",
            self.applied,
            self.needed,
            names.join(", ")
        )))
    }
}

/// One row of `_sqlx_migrations`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct AppliedRow {
    pub version: i64,
    pub description: String,
    pub success: bool,
    pub checksum: Vec<u8>,
}

/// What `migrator` knows against what `applied` says; refuses a failed migration or one whose
/// text changed since it was applied (a corrupted migration table, or an edited file).
pub(super) fn fit(migrator: &Migrator, applied: &[AppliedRow]) -> Result<SchemaFit> {
    let known: BTreeMap<i64, &sqlx::migrate::Migration> = migrator
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .map(|m| (m.version, m))
        .collect();
    let mut unknown = Vec::new();
    for row in applied {
        if !row.success {
            return Err(LedgerError::Schema(format!(
                "migration {} \"{}\" failed part-way and is marked dirty: restore the database \
                 or repair the migration by hand before any node uses it",
                row.version, row.description
            )));
        }
        match known.get(&row.version) {
            Some(m) if *m.checksum != *row.checksum => {
                return Err(LedgerError::Schema(format!(
                    "migration {} \"{}\" was applied with other contents than this binary's: \
                     the migration table or the file was changed",
                    row.version, row.description
                )));
            }
            Some(_) => {}
            None => unknown.push(MigrationInfo {
                version: row.version,
                description: row.description.clone(),
                kind: MigrationKind::of(row.version, &row.description),
            }),
        }
    }
    let pending = known
        .values()
        .filter(|m| !applied.iter().any(|a| a.version == m.version))
        .map(|m| MigrationInfo {
            version: m.version,
            description: m.description.to_string(),
            kind: MigrationKind::of(m.version, &m.description),
        })
        .collect();
    Ok(SchemaFit {
        applied: applied.iter().map(|a| a.version).max().unwrap_or(0),
        needed: known
            .values()
            .filter(|m| MigrationKind::of(m.version, &m.description) == MigrationKind::Expand)
            .map(|m| m.version)
            .max()
            .unwrap_or(0),
        pending,
        unknown,
    })
}

impl Ledger {
    /// Whether table `name` exists (in the search path, on PostgreSQL): a ledger older than a
    /// table, or one never migrated, lacks it.
    pub(super) async fn has_table(&self, name: &str) -> Result<bool> {
        Ok(match &self.backend {
            Backend::Sqlite(p) => {
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
                )
                .bind(name)
                .fetch_one(p)
                .await?;
                n > 0
            }
            Backend::Postgres(p) => {
                let (exists,): (bool,) = sqlx::query_as("SELECT to_regclass($1) IS NOT NULL")
                    .bind(name)
                    .fetch_one(p)
                    .await?;
                exists
            }
        })
    }

    /// The migrations `_sqlx_migrations` records (none before the first migration).
    async fn applied(&self) -> Result<Vec<AppliedRow>> {
        if !self.has_table("_sqlx_migrations").await? {
            return Ok(Vec::new());
        }
        let rows = "SELECT version, description, success, checksum
                    FROM _sqlx_migrations ORDER BY version";
        Ok(on_backend!(self, |p, _d| sqlx::query_as(rows)
            .fetch_all(p)
            .await?))
    }

    pub(super) fn migrator(&self) -> Migrator {
        match &self.backend {
            Backend::Sqlite(_) => sqlite(),
            Backend::Postgres(_) => postgres(),
        }
    }

    /// Checks (and with [`Opening::Migrate`], or on SQLite, brings up to date) the schema.
    pub(super) async fn prepare_schema(&self, opening: Opening) -> Result<()> {
        let fit = self.schema().fit().await?;
        fit.check_newer()?;
        let sqlite = matches!(self.backend, Backend::Sqlite(_));
        let migrate = match opening {
            Opening::Migrate => true,
            Opening::Check => sqlite,
            Opening::AsIs => false,
        };
        if !migrate {
            return match opening {
                Opening::Check => fit.check_current(),
                _ => Ok(()),
            };
        }
        // A new ledger gets every migration: nothing older uses it. Otherwise opening never
        // contracts: a contract migration waits for `dawnpost migrate`, which checks the live
        // nodes and leases first; the expand migrations apply now.
        let fresh = fit.applied == 0;
        let apply: Vec<MigrationInfo> = fit
            .pending
            .iter()
            .filter(|m| fresh || m.kind == MigrationKind::Expand)
            .cloned()
            .collect();
        self.apply(&apply).await?;
        let fit = self.schema().fit().await?;
        if let Some(m) = fit.pending.first() {
            tracing::info!(
                migration = m.version,
                "migration {} \"{}\" ({}) is pending: run `dawnpost migrate` once every node \
                 runs this version",
                m.version,
                m.description,
                m.kind.as_str()
            );
        }
        fit.check_current()
    }
}

impl Schema<'_> {
    /// The newest schema version this binary knows.
    pub(crate) fn known(self) -> i64 {
        self.migrator().iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// How the ledger's schema fits this binary.
    pub async fn fit(self) -> Result<SchemaFit> {
        fit(&self.migrator(), &self.applied().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_new_migration_says_whether_it_expands_or_contracts() {
        for migrator in [&postgres(), &sqlite()] {
            for m in migrator.iter().filter(|m| m.version > BASELINE) {
                assert!(
                    m.description.starts_with("expand ") || m.description.starts_with("contract "),
                    "migration {} \"{}\": name it NNNN_expand_… or NNNN_contract_…",
                    m.version,
                    m.description
                );
            }
        }
        let versions = |m: &Migrator| m.iter().map(|m| m.version).collect::<Vec<_>>();
        assert_eq!(
            versions(&postgres()),
            versions(&sqlite()),
            "one migration per backend"
        );
    }

    fn row(version: i64, description: &str) -> AppliedRow {
        let checksum = postgres()
            .iter()
            .find(|m| m.version == version)
            .map(|m| m.checksum.to_vec())
            .unwrap_or_default();
        AppliedRow {
            version,
            description: description.into(),
            success: true,
            checksum,
        }
    }

    #[test]
    fn a_newer_expand_migration_fits_and_a_contract_one_does_not() {
        let pg = postgres();
        let mut applied: Vec<AppliedRow> =
            pg.iter().map(|m| row(m.version, &m.description)).collect();
        let fits = fit(&postgres(), &applied).expect("fit");
        assert!(fits.pending.is_empty() && fits.unknown.is_empty());
        applied.push(row(9001, "expand a new table"));
        let fits = fit(&postgres(), &applied).expect("fit");
        assert!(fits.check_newer().is_ok() && fits.check_current().is_ok());
        applied.push(row(9002, "contract drop a column"));
        let err = fit(&postgres(), &applied).and_then(|f| f.check_newer());
        assert!(err.is_err_and(|e| e.to_string().contains("9002")));
    }

    #[test]
    fn a_ledger_behind_names_what_to_run() {
        let applied = vec![row(1, "ledger")];
        let fits = fit(&postgres(), &applied).expect("fit");
        let err = fits.check_current().expect_err("behind").to_string();
        assert!(err.contains("run `dawnpost migrate`"), "{err}");
        assert!(err.contains("at version 1"), "{err}");
    }

    #[test]
    fn a_dirty_or_changed_migration_is_refused() {
        let mut dirty = row(1, "ledger");
        dirty.success = false;
        assert!(fit(&postgres(), &[dirty]).is_err_and(|e| e.to_string().contains("dirty")));
        let mut changed = row(1, "ledger");
        changed.checksum = vec![0; 48];
        assert!(fit(&postgres(), &[changed]).is_err_and(|e| e.to_string().contains("changed")));
    }
}
