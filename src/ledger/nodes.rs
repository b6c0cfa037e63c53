//! The registry of nodes: each daemon's row (its id — the owner its leases name —, version,
//! the newest schema version and the work formats it knows, when it started, its last
//! heartbeat). A node is live while its heartbeat is recent; stale rows are deleted.

use chrono::{DateTime, Utc};

use super::tx::Statement;
use super::{Ledger, Result};
use crate::clock::{from_millis, to_millis};

/// One node as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `hostname:pid`: the owner its leases name.
    pub id: String,
    /// The binary's version.
    pub version: String,
    /// The newest schema version the binary knows.
    pub schema_version: i64,
    /// The work formats it reads and writes.
    pub formats: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
}

#[derive(Debug, sqlx::FromRow)]
struct NodeRecord {
    id: String,
    version: String,
    schema_version: i64,
    formats: String,
    started_at: i64,
    heartbeat_at: i64,
}

impl From<NodeRecord> for Node {
    fn from(r: NodeRecord) -> Node {
        Node {
            id: r.id,
            version: r.version,
            schema_version: r.schema_version,
            formats: r.formats,
            started_at: from_millis(r.started_at),
            heartbeat_at: from_millis(r.heartbeat_at),
        }
    }
}

impl Ledger {
    /// Records `node`'s heartbeat (registering it the first time): one upsert.
    pub async fn node_heartbeat(&self, node: &Node) -> Result<()> {
        let st = Statement::new(
            "INSERT INTO nodes (id, version, schema_version, formats, started_at, heartbeat_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (id) DO UPDATE SET version = excluded.version,
                 schema_version = excluded.schema_version, formats = excluded.formats,
                 heartbeat_at = excluded.heartbeat_at",
        )
        .bind(node.id.as_str())
        .bind(node.version.as_str())
        .bind(node.schema_version)
        .bind(node.formats.as_str())
        .bind(to_millis(node.started_at))
        .bind(to_millis(node.heartbeat_at));
        self.execute(&st).await.map(|_| ())
    }

    /// Removes node `id` (a clean shutdown).
    pub async fn node_leave(&self, id: &str) -> Result<()> {
        let st = Statement::new("DELETE FROM nodes WHERE id = $1").bind(id);
        self.execute(&st).await.map(|_| ())
    }

    /// Deletes the rows of nodes silent since before `before`; how many.
    pub async fn node_expire(&self, before: DateTime<Utc>) -> Result<u64> {
        let st =
            Statement::new("DELETE FROM nodes WHERE heartbeat_at < $1").bind(to_millis(before));
        self.execute(&st).await
    }

    /// The nodes that heartbeat at or after `since` (the live ones), oldest start first. None
    /// on a ledger older than the registry.
    pub async fn node_list(&self, since: DateTime<Utc>) -> Result<Vec<Node>> {
        const LIVE: &str = "SELECT * FROM nodes WHERE heartbeat_at >= $1 ORDER BY started_at, id";
        if !self.has_table("nodes").await? {
            return Ok(Vec::new());
        }
        let since = to_millis(since);
        let rows: Vec<NodeRecord> = on_backend!(self, |p, _d| sqlx::query_as(LIVE)
            .bind(since)
            .fetch_all(p)
            .await?);
        Ok(rows.into_iter().map(Node::from).collect())
    }
}
