-- no-transaction
-- Reissued reports: a revision of a finished job is a job of its own, keyed
-- `report:date.rN`, on the same report and local date. `revision` numbers them (1 for every
-- job made before) and `supersedes` names the revision it corrects. One job per report and
-- date becomes one per report, date and revision. Older versions insert with a column list
-- and read `SELECT *`: they never see the difference.
-- The UNIQUE constraint is part of the table's definition on SQLite, so the table is rebuilt
-- the way SQLite's ALTER TABLE documentation gives (a new table, the rows copied, the old one
-- dropped, the new one renamed), with foreign keys off around it and checked before the
-- commit. Renaming the new table leaves the other tables' references to `jobs` as they are.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;
CREATE TABLE jobs_rebuilt (
    key               TEXT    PRIMARY KEY,           -- <report>:<YYYY-MM-DD>[.r<revision>]
    report            TEXT    NOT NULL,
    local_date        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('ready', 'waiting', 'rendering', 'delivering', 'done', 'quarantined', 'cancelled', 'skipped')),
    origin            TEXT    NOT NULL,              -- schedule | backfill | enqueue | run | ingest | reissue
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
    terminal_at       INTEGER,                       -- when it entered a terminal state
    diagnostics_cleared_at BIGINT,
    generated_at      BIGINT,
    lease_losses      BIGINT  NOT NULL DEFAULT 0,
    artifact_csv_key  TEXT,
    format            INTEGER NOT NULL DEFAULT 1,
    wait_until        INTEGER,
    late_at           INTEGER,
    revision          INTEGER NOT NULL DEFAULT 1,
    supersedes        TEXT,
    UNIQUE (report, local_date, revision)
);
INSERT INTO jobs_rebuilt (key, report, local_date, state, origin, fire_at, window_start,
    window_end, ready_at, attempts, lease_owner, lease_token, lease_expires_at, artifact_key,
    artifact_text_key, artifact_sha256, artifact_bytes, artifact_deleted_at, last_error,
    redrive_count, created_at, updated_at, terminal_at, diagnostics_cleared_at, generated_at,
    lease_losses, artifact_csv_key, format, wait_until, late_at)
SELECT key, report, local_date, state, origin, fire_at, window_start, window_end, ready_at,
    attempts, lease_owner, lease_token, lease_expires_at, artifact_key, artifact_text_key,
    artifact_sha256, artifact_bytes, artifact_deleted_at, last_error, redrive_count,
    created_at, updated_at, terminal_at, diagnostics_cleared_at, generated_at, lease_losses,
    artifact_csv_key, format, wait_until, late_at
FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_rebuilt RENAME TO jobs;
CREATE INDEX jobs_terminal ON jobs (terminal_at) WHERE terminal_at IS NOT NULL;
CREATE INDEX jobs_ready ON jobs (state, ready_at, key);
CREATE INDEX jobs_by_date ON jobs (local_date, key);
PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
