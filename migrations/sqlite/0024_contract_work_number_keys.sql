-- As PostgreSQL's 0024: deliveries and their attempts keyed by the numbers migration 23 gave
-- them, no index on a text key of theirs (SQLite's b-trees then compare two integers where
-- they compared ~70-byte strings). SQLite changes a primary key only by building the table
-- anew: both tables are copied into their new shape, the old ones dropped (their indexes and
-- triggers with them; only versions before 23 inserted rows without numbers) and the new ones
-- renamed, which points the attempts' foreign key at the new deliveries.
CREATE TABLE deliveries_new (
    job_number        INTEGER NOT NULL REFERENCES jobs (number),
    ordinal           INTEGER NOT NULL,
    key               TEXT    NOT NULL,              -- <job-key>/<kind>:<destination>
    job_key           TEXT    NOT NULL,
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
    terminal_at       INTEGER,
    budget_attempts   INTEGER NOT NULL DEFAULT 0,
    budget_since      INTEGER,
    lease_losses      INTEGER NOT NULL DEFAULT 0,
    format            INTEGER NOT NULL DEFAULT 1,
    due_at            INTEGER GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN ready_at END) VIRTUAL,
    quarantined_at    INTEGER GENERATED ALWAYS AS (CASE WHEN state = 'quarantined' THEN updated_at END) VIRTUAL,
    PRIMARY KEY (job_number, ordinal)
);
INSERT INTO deliveries_new (job_number, ordinal, key, job_key, kind, destination, state, ready_at,
    attempts, lease_owner, lease_token, lease_expires_at, last_class, last_error, redrive_count,
    created_at, updated_at, terminal_at, budget_attempts, budget_since, lease_losses, format)
SELECT job_number, ordinal, key, job_key, kind, destination, state, ready_at,
    attempts, lease_owner, lease_token, lease_expires_at, last_class, last_error, redrive_count,
    created_at, updated_at, terminal_at, budget_attempts, budget_since, lease_losses, format
FROM deliveries;

CREATE TABLE delivery_attempts_new (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    job_number        INTEGER NOT NULL,
    ordinal           INTEGER NOT NULL,
    delivery_key      TEXT    NOT NULL,
    attempt           INTEGER NOT NULL,
    requested_at      INTEGER NOT NULL,
    finished_at       INTEGER NOT NULL,
    class             TEXT    NOT NULL,              -- accepted | rate_limited | transient | ambiguous | permanent | unknown
    code              INTEGER,                       -- HTTP status or SMTP reply code
    retry_after_ms    INTEGER,
    next_ready_at     INTEGER,
    reason            TEXT,                          -- redacted: never a full recipient address
    diagnostics       TEXT,                          -- bounded transport detail; cleared by retention
    UNIQUE (job_number, ordinal, attempt),
    FOREIGN KEY (job_number, ordinal) REFERENCES deliveries_new (job_number, ordinal)
);
INSERT INTO delivery_attempts_new (id, job_number, ordinal, delivery_key, attempt, requested_at,
    finished_at, class, code, retry_after_ms, next_ready_at, reason, diagnostics)
SELECT id, job_number, ordinal, delivery_key, attempt, requested_at,
    finished_at, class, code, retry_after_ms, next_ready_at, reason, diagnostics
FROM delivery_attempts;

DROP TABLE delivery_attempts;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
ALTER TABLE delivery_attempts_new RENAME TO delivery_attempts;
CREATE INDEX deliveries_due_at ON deliveries (due_at, job_number, ordinal) WHERE due_at IS NOT NULL;
CREATE INDEX deliveries_quarantined_at ON deliveries (quarantined_at, job_number, ordinal)
    WHERE quarantined_at IS NOT NULL;
CREATE INDEX delivery_attempts_finished ON delivery_attempts (finished_at);
