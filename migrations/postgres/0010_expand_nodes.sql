-- The nodes running on this ledger: each daemon registers when it starts and heartbeats while
-- it runs, saying its version and the newest schema version it knows. `dawnpost nodes` lists
-- the live ones; `migrate` refuses a contract migration while a live node does not know it.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    schema_version BIGINT NOT NULL,
    formats TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
