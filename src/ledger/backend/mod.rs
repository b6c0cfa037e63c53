//! What differs between the ledger's two backends: connecting and opening (`sqlite.rs`,
//! `postgres.rs`), a transaction on either with statements that carry their binds (`tx.rs`),
//! and how the domain's keys bind to SQL (`bind.rs`). The rest of the ledger writes its logic
//! once over these; a statement whose text differs between the backends is a `PerBackend`
//! pair beside the function that runs it.

pub(in crate::ledger) mod bind;
pub(in crate::ledger) mod postgres;
pub(in crate::ledger) mod sqlite;
pub(in crate::ledger) mod tx;
