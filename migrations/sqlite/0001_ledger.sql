-- The ledger. Instants are UTC milliseconds since the Unix epoch.
-- Keep in step with migrations/postgres/0001_ledger.sql: same tables, columns and constraints.

CREATE TABLE jobs (
    key               TEXT    PRIMARY KEY,           -- <report>:<YYYY-MM-DD>
    report            TEXT    NOT NULL,
    local_date        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('ready', 'rendering', 'delivering', 'done', 'quarantined', 'cancelled')),
    origin            TEXT    NOT NULL,              -- schedule | backfill | enqueue | run | ingest
    fire_at           INTEGER NOT NULL,
    window_start      INTEGER NOT NULL,
    window_end        INTEGER NOT NULL,
    ready_at          INTEGER NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,    -- render attempts (leases taken)
    lease_owner       TEXT,
    lease_token       INTEGER NOT NULL DEFAULT 0,    -- fencing token: +1 on every lease
    lease_expires_at  INTEGER,
    artifact_key      TEXT,                          -- the HTML part
    artifact_text_key TEXT,                          -- the plain-text part
    artifact_sha256   TEXT,
    artifact_bytes    INTEGER,
    artifact_deleted_at INTEGER,
    last_error        TEXT,
    redrive_count     INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    terminal_at       INTEGER,                       -- when it entered done/quarantined/cancelled
    UNIQUE (report, local_date)
);
CREATE INDEX jobs_ready ON jobs (state, ready_at);
CREATE INDEX jobs_terminal ON jobs (terminal_at) WHERE terminal_at IS NOT NULL;

CREATE TABLE deliveries (
    key               TEXT    PRIMARY KEY,           -- <job-key>/<kind>:<destination>
    job_key           TEXT    NOT NULL REFERENCES jobs (key),
    kind              TEXT    NOT NULL CHECK (kind IN ('email', 'webhook')),
    destination       TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'quarantined')),
    ready_at          INTEGER NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT,
    lease_token       INTEGER NOT NULL DEFAULT 0,
    lease_expires_at  INTEGER,
    last_class        TEXT,
    last_error        TEXT,
    redrive_count     INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    terminal_at       INTEGER
);
CREATE INDEX deliveries_job ON deliveries (job_key);
CREATE INDEX deliveries_ready ON deliveries (state, ready_at);

CREATE TABLE delivery_attempts (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_key      TEXT    NOT NULL REFERENCES deliveries (key),
    attempt           INTEGER NOT NULL,
    requested_at      INTEGER NOT NULL,
    finished_at       INTEGER NOT NULL,
    class             TEXT    NOT NULL,              -- accepted | rate_limited | transient | ambiguous | permanent | unknown
    code              INTEGER,                       -- HTTP status or SMTP reply code
    retry_after_ms    INTEGER,
    next_ready_at     INTEGER,
    reason            TEXT,                          -- redacted: never a full recipient address
    diagnostics       TEXT,                          -- bounded transport detail; cleared by retention
    UNIQUE (delivery_key, attempt)
);

CREATE TABLE redrives (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    job_key           TEXT    NOT NULL REFERENCES jobs (key),
    delivery_key      TEXT,                          -- null: the whole job
    redriven_by       TEXT    NOT NULL,
    reason            TEXT    NOT NULL,
    at                INTEGER NOT NULL
);
CREATE INDEX redrives_job ON redrives (job_key);

CREATE TABLE ingest_events (
    webhook_id        TEXT    PRIMARY KEY,
    job_key           TEXT    NOT NULL,
    received_at       INTEGER NOT NULL
);

CREATE TABLE schedule_state (
    report            TEXT    PRIMARY KEY,
    last_tick_at      INTEGER NOT NULL
);
