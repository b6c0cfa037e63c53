//! Work signals between processes sharing a PostgreSQL ledger (`LISTEN`/`NOTIFY`): whoever
//! makes work due outside a node's own pool (the tick, the server, the CLI) says so, and every
//! listening node looks at once instead of at its next poll. Only a wake-up rides on a signal:
//! one lost (a listener's connection dropped) costs the listener's poll interval, never the
//! work. SQLite's nodes share one file and poll it.

use sqlx::postgres::{PgListener, PgPoolOptions};

use super::{Backend, Ledger, Result};

/// The prefix of the channel work signals go on: `dawnpost_work_` and 16 hex digits of the
/// MD5 of the ledger's schema (`current_schema()`), so ledgers in different schemas of one
/// database do not wake each other's nodes.
pub(crate) const WORK_CHANNEL: &str = "dawnpost_work_";

/// A work signal on the channel of the session's schema (`$1`: [`WORK_CHANNEL`]).
const NOTIFY: &str =
    "SELECT pg_notify($1 || substr(md5(coalesce(current_schema(), '')), 1, 16), '')";

/// The channel of the session's schema (`$1`: [`WORK_CHANNEL`]).
const CHANNEL: &str = "SELECT $1 || substr(md5(coalesce(current_schema(), '')), 1, 16)";

impl Ledger {
    /// Tells every node listening on this ledger that work may be due now (one `pg_notify`,
    /// its own commit); nothing on SQLite.
    pub async fn signal_work(&self) -> Result<()> {
        if let Backend::Postgres(p) = &self.backend {
            sqlx::query(NOTIFY).bind(WORK_CHANNEL).execute(p).await?;
        }
        Ok(())
    }

    /// Listens for work signals on a connection of its own (outside the ledger's pool, so it
    /// takes no slot from the work); `None` on SQLite.
    pub async fn work_listener(&self) -> Result<Option<WorkListener>> {
        let Backend::Postgres(p) = &self.backend else {
            return Ok(None);
        };
        let own = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_lazy_with((*p.connect_options()).clone());
        let (channel,): (String,) = sqlx::query_as(CHANNEL)
            .bind(WORK_CHANNEL)
            .fetch_one(p)
            .await?;
        let mut listener = PgListener::connect_with(&own).await?;
        listener.listen(&channel).await?;
        Ok(Some(WorkListener(listener)))
    }
}

/// A connection listening for work signals.
#[derive(Debug)]
pub struct WorkListener(PgListener);

impl WorkListener {
    /// Waits for the next signal: `true` when one came, `false` when the connection was lost
    /// (signals sent meanwhile are lost; the next call connects and listens again). An error:
    /// it could not connect again.
    pub async fn next(&mut self) -> Result<bool> {
        Ok(self.0.try_recv().await?.is_some())
    }
}
