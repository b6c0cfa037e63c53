-- The ledger. Instants are UTC milliseconds since the Unix epoch.
-- Keep in step with migrations/sqlite/0001_ledger.sql: same tables, columns and constraints.

CREATE TABLE jobs (
    key               TEXT    PRIMARY KEY,           -- <report>:<YYYY-MM-DD>
    report            TEXT    NOT NULL,
    local_date        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('ready', 'rendering', 'delivering', 'done', 'quarantined', 'cancelled')),
    origin            TEXT    NOT NULL,              -- schedule | backfill | enqueue | run | ingest
    fire_at           BIGINT  NOT NULL,
    window_start      BIGINT  NOT NULL,
    window_end        BIGINT  NOT NULL,
    ready_at          BIGINT  NOT NULL,
    attempts          BIGINT  NOT NULL DEFAULT 0,    -- render attempts (leases taken)
    lease_owner       TEXT,
    lease_token       BIGINT  NOT NULL DEFAULT 0,    -- fencing token: +1 on every lease
    lease_expires_at  BIGINT,
    artifact_key      TEXT,                          -- the HTML part
    artifact_text_key TEXT,                          -- the plain-text part
    artifact_sha256   TEXT,
    artifact_bytes    BIGINT,
    artifact_deleted_at BIGINT,
    last_error        TEXT,
    redrive_count     BIGINT  NOT NULL DEFAULT 0,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    terminal_at       BIGINT,                       -- when it entered done/quarantined/cancelled
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
    ready_at          BIGINT  NOT NULL,
    attempts          BIGINT  NOT NULL DEFAULT 0,
    lease_owner       TEXT,
    lease_token       BIGINT  NOT NULL DEFAULT 0,
    lease_expires_at  BIGINT,
    last_class        TEXT,
    last_error        TEXT,
    redrive_count     BIGINT  NOT NULL DEFAULT 0,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    terminal_at       BIGINT
);
CREATE INDEX deliveries_job ON deliveries (job_key);
CREATE INDEX deliveries_ready ON deliveries (state, ready_at);

CREATE TABLE delivery_attempts (
    id                BIGSERIAL PRIMARY KEY,
    delivery_key      TEXT    NOT NULL REFERENCES deliveries (key),
    attempt           BIGINT  NOT NULL,
    requested_at      BIGINT  NOT NULL,
    finished_at       BIGINT  NOT NULL,
    class             TEXT    NOT NULL,              -- accepted | rate_limited | transient | ambiguous | permanent | unknown
    code              BIGINT,                       -- HTTP status or SMTP reply code
    retry_after_ms    BIGINT,
    next_ready_at     BIGINT,
    reason            TEXT,                          -- redacted: never a full recipient address
    diagnostics       TEXT,                          -- bounded transport detail; cleared by retention
    UNIQUE (delivery_key, attempt)
);

CREATE TABLE redrives (
    id                BIGSERIAL PRIMARY KEY,
    job_key           TEXT    NOT NULL REFERENCES jobs (key),
    delivery_key      TEXT,                          -- null: the whole job
    redriven_by       TEXT    NOT NULL,
    reason            TEXT    NOT NULL,
    at                BIGINT  NOT NULL
);
CREATE INDEX redrives_job ON redrives (job_key);

CREATE TABLE ingest_events (
    webhook_id        TEXT    PRIMARY KEY,
    job_key           TEXT    NOT NULL,
    received_at       BIGINT  NOT NULL
);

CREATE TABLE schedule_state (
    report            TEXT    PRIMARY KEY,
    last_tick_at      BIGINT  NOT NULL
);
