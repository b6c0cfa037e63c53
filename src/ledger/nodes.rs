//! The registry of nodes: each daemon's row (its id — the owner its leases name —, version,
//! the newest schema version and the work formats it knows, when it started, its last
//! heartbeat). A node is live while its heartbeat is recent; stale rows are deleted.

use super::handles::Nodes;
use chrono::{DateTime, Utc};

use super::backend::tx::Statement;
use super::{FIRST_WORK_FORMAT, Ledger, Result, WORK_FORMAT};
use crate::domain::clock::{from_millis, to_millis};

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

/// The node of `live` (the live nodes, the oldest start first, as `ledger.nodes().list` and
/// `ledger.nodes().beat` read them) that leads the cluster's housekeeping: the first.
pub fn leader(live: &[Node]) -> Option<&Node> {
    live.first()
}

/// What a registry's round (`ledger.nodes().beat`) read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The newest format a write may use now (every live node reads it).
    pub format: i64,
    /// The ledger's clock when the round began (PostgreSQL's `clock_timestamp()`), timed
    /// around its own statement; `None` on SQLite.
    pub server_time: Option<super::ClockReading>,
    /// The live nodes, the oldest start first (ties by id): the first leads.
    pub live: Vec<Node>,
}

/// The newest work format a node reads, from the `formats` it registered ("1", or a list
/// "1,2"); the first format if it names none this binary can read.
fn newest_read(formats: &str) -> i64 {
    formats
        .split(',')
        .filter_map(|f| f.trim().parse::<i64>().ok())
        .max()
        .unwrap_or(FIRST_WORK_FORMAT)
}

/// The newest format this binary writes that every node of `live` reads.
pub(crate) fn write_format_for(live: &[Node]) -> i64 {
    live.iter()
        .map(|n| newest_read(&n.formats))
        .fold(WORK_FORMAT, i64::min)
        .max(FIRST_WORK_FORMAT)
}

impl Ledger {
    /// Sets `ledger.nodes().write_format` to what every node of `live` reads; that format.
    fn follow(&self, live: &[Node]) -> i64 {
        let format = write_format_for(live);
        self.write_format
            .store(format, std::sync::atomic::Ordering::Relaxed);
        format
    }
}

/// The live nodes: those that heartbeat at or after `$1`, oldest start first.
const LIVE: &str = "SELECT * FROM nodes WHERE heartbeat_at >= $1 ORDER BY started_at, id";

/// `node`'s heartbeat: registers it the first time, then updates its row (its start stays).
fn heartbeat(node: &Node) -> Statement<'_> {
    Statement::new(
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
    .bind(to_millis(node.heartbeat_at))
}

/// Forgets the nodes silent since `before`.
fn expire(before: DateTime<Utc>) -> Statement<'static> {
    Statement::new("DELETE FROM nodes WHERE heartbeat_at < $1").bind(to_millis(before))
}

impl Nodes<'_> {
    /// The newest format a write may use now: every live node reads it. A transition of a
    /// newer format (format 2's `skipped`) is written only up to it.
    pub fn write_format(self) -> i64 {
        self.write_format.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Brings `ledger.nodes().write_format` up to the nodes that heartbeat at or after
    /// `live_since` (the oldest live node's format, while older nodes run); that format.
    pub async fn follow_formats(self, live_since: DateTime<Utc>) -> Result<i64> {
        Ok(self.follow(&self.nodes().list(live_since).await?))
    }

    /// Records `node`'s heartbeat (registering it the first time): one upsert.
    pub async fn heartbeat(self, node: &Node) -> Result<()> {
        self.execute(&heartbeat(node)).await.map(|_| ())
    }

    /// A registry's round in one transaction (one commit): the ledger's clock read (PostgreSQL),
    /// `node`'s heartbeat, the nodes silent since `forget_before` forgotten, and the write
    /// format the nodes live since `live_since` all read followed (see
    /// `ledger.nodes().follow_formats`).
    pub async fn beat(
        self,
        node: &Node,
        forget_before: DateTime<Utc>,
        live_since: DateTime<Utc>,
    ) -> Result<Beat> {
        let (server_time, live) = self
            .within(async |tx| {
                let server_time = tx.server_time().await?;
                tx.execute(&heartbeat(node)).await?;
                tx.execute(&expire(forget_before)).await?;
                let live_since = Statement::new(LIVE).bind(to_millis(live_since));
                let live: Vec<NodeRecord> = tx.fetch_all(&live_since).await?;
                Ok((server_time, live))
            })
            .await?;
        let live: Vec<Node> = live.into_iter().map(Node::from).collect();
        Ok(Beat {
            format: self.follow(&live),
            server_time,
            live,
        })
    }

    /// Removes node `id` (a clean shutdown).
    pub async fn leave(self, id: &str) -> Result<()> {
        let st = Statement::new("DELETE FROM nodes WHERE id = $1").bind(id);
        self.execute(&st).await.map(|_| ())
    }

    /// Deletes the rows of nodes silent since before `before`; how many.
    pub async fn expire(self, before: DateTime<Utc>) -> Result<u64> {
        self.execute(&expire(before)).await
    }

    /// The nodes that heartbeat at or after `since` (the live ones), oldest start first. None
    /// on a ledger older than the registry.
    pub async fn list(self, since: DateTime<Utc>) -> Result<Vec<Node>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(formats: &str) -> Node {
        let at = chrono::DateTime::from_timestamp(1_764_547_200, 0).expect("instant");
        Node {
            id: format!("n:{formats}"),
            version: "0.1.0".into(),
            schema_version: 11,
            formats: formats.into(),
            started_at: at,
            heartbeat_at: at,
        }
    }

    #[test]
    fn new_work_is_written_in_a_format_the_oldest_live_node_reads() {
        assert_eq!(write_format_for(&[]), WORK_FORMAT);
        assert_eq!(write_format_for(&[node("1")]), FIRST_WORK_FORMAT);
        // A node that reads newer formats than this binary writes changes nothing.
        let newer = format!("1,{}", WORK_FORMAT + 1);
        assert_eq!(write_format_for(&[node(&newer), node("7")]), WORK_FORMAT);
        // One that reads up to an older format holds every write to it.
        let older = (WORK_FORMAT - 1).to_string();
        assert_eq!(
            write_format_for(&[node(&older), node("7")]),
            WORK_FORMAT - 1
        );
        // Formats it cannot parse count as the first one.
        assert_eq!(write_format_for(&[node("next")]), FIRST_WORK_FORMAT);
        assert_eq!(newest_read("1, 4,2"), 4);
    }
}
