//! Migrating a ledger other nodes are using. Expand migrations apply at once; a contract
//! migration removes or changes what older versions use, so it waits until nothing of the old
//! shape is in the way: no live node that does not know it (it still reads and writes the old
//! shape), and no unexpired lease held by such a node or by an owner the registry does not know
//! (a paused or older process may still finish that work in the old meaning). What is in the
//! way is named, so `dawnpost migrate` can wait for it or refuse.

use super::handles::{Leases, Schema};
use chrono::{DateTime, Utc};

use super::schema::{MigrationInfo, MigrationKind};
use super::{Backend, Ledger, Node, Result};
use crate::domain::clock::{from_millis, to_millis};

/// How many held leases a refusal names at most.
const LEASES_NAMED: i64 = 20;

/// One unexpired lease: a render of a job or a send of a delivery, its owner and its expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    /// `render` or `send`.
    pub work: &'static str,
    /// The job's or the delivery's key.
    pub key: String,
    pub owner: String,
    pub until: DateTime<Utc>,
}

/// What keeps a contract migration from running now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blockers {
    pub migration: MigrationInfo,
    /// Live nodes that do not know the migration.
    pub nodes: Vec<Node>,
    /// Leases held by owners that do not know it.
    pub leases: Vec<HeldLease>,
}

impl Blockers {
    /// What is in the way, for a person.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.nodes.is_empty() {
            let nodes: Vec<String> = self
                .nodes
                .iter()
                .map(|n| format!("{} ({}, schema {})", n.id, n.version, n.schema_version))
                .collect();
            parts.push(format!(
                "live nodes still need the old shape: {}",
                nodes.join(", ")
            ));
        }
        if !self.leases.is_empty() {
            let leases: Vec<String> = self
                .leases
                .iter()
                .map(|l| {
                    format!(
                        "{} {} by {} until {}",
                        l.work,
                        l.key,
                        l.owner,
                        crate::domain::window::rfc3339(l.until)
                    )
                })
                .collect();
            parts.push(format!(
                "leases of the old meaning are held: {}",
                leases.join(", ")
            ));
        }
        format!(
            "migration {} \"{}\" is a contract migration and {}",
            self.migration.version,
            self.migration.description,
            parts.join("; ")
        )
    }
}

/// What one `migrate` did: the migrations it applied, and the contract migration it stopped
/// at (with what is in the way), if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Migrated {
    pub applied: Vec<MigrationInfo>,
    pub blocked: Option<Blockers>,
}

/// The live nodes that do not know migration `m` and the leases whose owners are not live
/// nodes that know it.
fn blockers(m: &MigrationInfo, live: &[Node], leases: &[HeldLease]) -> Option<Blockers> {
    let knows = |owner: &str| {
        live.iter()
            .any(|n| n.id == owner && n.schema_version >= m.version)
    };
    let b = Blockers {
        migration: m.clone(),
        nodes: live
            .iter()
            .filter(|n| n.schema_version < m.version)
            .cloned()
            .collect(),
        leases: leases
            .iter()
            .filter(|l| !knows(&l.owner))
            .cloned()
            .collect(),
    };
    (!b.nodes.is_empty() || !b.leases.is_empty()).then_some(b)
}

/// Of `pending` (oldest first), the migrations to apply now, in order — every expand migration,
/// and each contract migration nothing is in the way of (none, `expand_only`) — and the first
/// contract migration something is in the way of. An expand migration never depends on a
/// contract migration before it (a version works before and after its own contract
/// migrations), so it applies while that one waits.
pub(super) fn plan(
    pending: &[MigrationInfo],
    expand_only: bool,
    live: &[Node],
    leases: &[HeldLease],
) -> (Vec<MigrationInfo>, Option<Blockers>) {
    let mut apply = Vec::new();
    let mut blocked = None;
    for m in pending {
        if m.kind == MigrationKind::Contract {
            if expand_only {
                continue;
            }
            if let Some(b) = blockers(m, live, leases) {
                blocked.get_or_insert(b);
                continue;
            }
        }
        apply.push(m.clone());
    }
    (apply, blocked)
}

#[derive(Debug, sqlx::FromRow)]
struct LeaseRecord {
    work: String,
    key: String,
    lease_owner: String,
    lease_expires_at: i64,
}

impl Ledger {
    /// Applies the migrations `these` (pending ones, by version), oldest first, each in its own
    /// transaction, leaving any other pending one for later.
    pub(super) async fn apply(&self, these: &[MigrationInfo]) -> Result<()> {
        if these.is_empty() {
            return Ok(());
        }
        let all = self.migrator();
        let chosen: Vec<sqlx::migrate::Migration> = all
            .iter()
            .filter(|m| these.iter().any(|t| t.version == m.version))
            .cloned()
            .collect();
        let mut subset = sqlx::migrate::Migrator::with_migrations(chosen);
        subset.set_ignore_missing(true);
        match &self.backend {
            Backend::Sqlite(p) => subset.run(p).await?,
            Backend::Postgres(p) => subset.run(p).await?,
        }
        Ok(())
    }
}

impl Leases<'_> {
    /// Unexpired leases at `now`, renders and sends (at most a few, soonest expiry first). Sends
    /// are found through their live jobs: by number on a ledger with migration 23 (the
    /// deliveries' job keys are not indexed once 24 ran), by key before it.
    pub async fn held(self, now: DateTime<Utc>) -> Result<Vec<HeldLease>> {
        macro_rules! held {
            ($job:literal, $live:expr) => {
                sql!(
                    "SELECT 'render' AS work, key, lease_owner, lease_expires_at FROM jobs
                      WHERE state = 'rendering' AND lease_owner IS NOT NULL AND lease_expires_at > $1
                    UNION ALL
                    SELECT 'send' AS work, key, lease_owner, lease_expires_at FROM deliveries
                      WHERE state = 'sending' AND lease_owner IS NOT NULL AND lease_expires_at > $1
                        AND ",
                    $job,
                    " IN ",
                    $live,
                    " ORDER BY lease_expires_at, key LIMIT $2"
                )
            };
        }
        const BY_NUMBER: &str = held!("job_number", super::LIVE_JOB_NUMBERS);
        const BY_KEY: &str = held!("job_key", super::LIVE_JOB_KEYS);
        if !self.has_table("jobs").await? {
            return Ok(Vec::new());
        }
        let held = match self.schema().fit().await?.applied >= 23 {
            true => BY_NUMBER,
            false => BY_KEY,
        };
        let rows: Vec<LeaseRecord> = on_backend!(self, |p, _d| sqlx::query_as(held)
            .bind(to_millis(now))
            .bind(LEASES_NAMED)
            .fetch_all(p)
            .await?);
        Ok(rows
            .into_iter()
            .map(|r| HeldLease {
                work: if r.work == "render" { "render" } else { "send" },
                key: r.key,
                owner: r.lease_owner,
                until: from_millis(r.lease_expires_at),
            })
            .collect())
    }
}

impl Schema<'_> {
    /// What `ledger.schema().migrate` would do now: the pending expand migrations, and the contract
    /// ones nothing is in the way of (nodes that heartbeat at or after `live_since` count as
    /// live; leases unexpired at `now` as held; none, `expand_only`), in order; and the first
    /// contract migration that waits, with what it waits for.
    pub(crate) async fn plan(
        self,
        now: DateTime<Utc>,
        live_since: DateTime<Utc>,
        expand_only: bool,
    ) -> Result<Migrated> {
        let fit = self.schema().fit().await?;
        fit.check_newer()?;
        let contract = fit
            .pending
            .iter()
            .any(|m| m.kind == MigrationKind::Contract);
        // A new ledger (nothing applied) has no nodes and no work of an older shape.
        let (live, leases) = if contract && !expand_only && fit.applied > 0 {
            (
                self.nodes().list(live_since).await?,
                self.leases().held(now).await?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let (applied, blocked) = plan(&fit.pending, expand_only, &live, &leases);
        Ok(Migrated { applied, blocked })
    }

    /// Applies what `ledger.schema().plan` says, each migration in its own transaction.
    pub async fn migrate(
        self,
        now: DateTime<Utc>,
        live_since: DateTime<Utc>,
        expand_only: bool,
    ) -> Result<Migrated> {
        let plan = self.schema().plan(now, live_since, expand_only).await?;
        self.apply(&plan.applied).await?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migration(version: i64, kind: MigrationKind) -> MigrationInfo {
        MigrationInfo {
            version,
            description: format!("{} step {version}", kind.as_str()),
            kind,
        }
    }

    fn node(id: &str, schema: i64) -> Node {
        let at = chrono::DateTime::from_timestamp(1_764_547_200, 0).expect("instant");
        Node {
            id: id.into(),
            version: "0.1.0".into(),
            schema_version: schema,
            formats: "1".into(),
            started_at: at,
            heartbeat_at: at,
        }
    }

    fn lease(owner: &str) -> HeldLease {
        HeldLease {
            work: "send",
            key: "w:2026-10-25:webhook:a".into(),
            owner: owner.into(),
            until: chrono::DateTime::from_timestamp(1_764_547_260, 0).expect("instant"),
        }
    }

    #[test]
    fn expand_migrations_apply_while_a_contract_one_waits_for_the_nodes_that_do_not_know_it() {
        let pending = [
            migration(11, MigrationKind::Expand),
            migration(12, MigrationKind::Contract),
            migration(13, MigrationKind::Expand),
        ];
        let live = [node("old:1", 10), node("new:2", 13)];
        let (apply, blocked) = plan(&pending, false, &live, &[]);
        assert_eq!(
            apply,
            [pending[0].clone(), pending[2].clone()],
            "the expand migrations apply while the contract one waits"
        );
        let b = blocked.expect("blocked");
        assert_eq!(b.migration.version, 12);
        let why = b.describe();
        assert!(why.contains("old:1") && !why.contains("new:2"), "{why}");
        // Once every live node knows it, the contract migration and what follows apply.
        let (apply, blocked) = plan(&pending, false, &live[1..], &[]);
        assert_eq!((apply.len(), blocked), (3, None));
        // Expand only: every expand migration, and nothing named as blocking.
        let (apply, blocked) = plan(&pending, true, &[], &[]);
        assert_eq!((apply.len(), blocked), (2, None));
    }

    #[test]
    fn a_lease_whose_owner_is_not_a_live_node_that_knows_the_migration_is_in_the_way() {
        let pending = [migration(12, MigrationKind::Contract)];
        let live = [node("new:2", 12)];
        assert_eq!(plan(&pending, false, &live, &[lease("new:2")]).1, None);
        for owner in ["gone:9", "old:1"] {
            let b = plan(&pending, false, &live, &[lease(owner)])
                .1
                .expect("blocked");
            let why = b.describe();
            assert!(
                why.contains(&format!("send w:2026-10-25:webhook:a by {owner} until")),
                "{why}"
            );
        }
    }
}
