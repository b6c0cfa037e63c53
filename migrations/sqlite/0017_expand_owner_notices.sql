-- Owners' notices (deliver_by, owners, owner_webhook): what a report's owners are told, once,
-- when a job is late or quarantined. Older versions never read these tables (nor notify).
--
-- notices: one row per job and cause (key '<job>/late' or '<job>/quarantined'), owed to the
-- owners; 'message' names the message that told it (NULL while it waits for one: quarantines
-- are batched, a report's first at once and the rest of that hour in one more). The job may
-- not exist ('late' judges the schedule, not the ledger), so nothing references jobs.
CREATE TABLE notices (
    key          TEXT    PRIMARY KEY,
    report       TEXT    NOT NULL,
    job_key      TEXT    NOT NULL,
    cause        TEXT    NOT NULL CHECK (cause IN ('late', 'quarantined')),
    detail       TEXT    NOT NULL,
    noticed_at   INTEGER  NOT NULL,
    message      TEXT
);
CREATE INDEX notices_waiting ON notices (report, noticed_at) WHERE message IS NULL;
CREATE INDEX notices_job ON notices (job_key);
-- One message to a report's owners, its text fixed when made (a retry sends the same words):
-- key '<job>/late', or '<report>/quarantined/<window start, ms>/<1 or 2>'.
CREATE TABLE notice_messages (
    key          TEXT    PRIMARY KEY,
    report       TEXT    NOT NULL,
    cause        TEXT    NOT NULL CHECK (cause IN ('late', 'quarantined')),
    window_start INTEGER  NOT NULL,
    seq          INTEGER  NOT NULL,
    subject      TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    webhook_body TEXT    NOT NULL,
    created_at   INTEGER  NOT NULL
);
CREATE INDEX notice_messages_window ON notice_messages (report, cause, window_start);
-- A message's send to one owner (key '<message>/email:<address>' or '<message>/webhook'),
-- leased and retried like a delivery: claimed 'pending' or with an expired lease.
CREATE TABLE notice_sends (
    key              TEXT    PRIMARY KEY,
    message          TEXT    NOT NULL REFERENCES notice_messages (key) ON DELETE CASCADE,
    kind             TEXT    NOT NULL CHECK (kind IN ('email', 'webhook')),
    destination      TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'sending', 'sent', 'quarantined')),
    ready_at         INTEGER  NOT NULL,
    attempts         INTEGER  NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_token      INTEGER  NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    last_class       TEXT,
    last_error       TEXT,
    created_at       INTEGER  NOT NULL,
    updated_at       INTEGER  NOT NULL
);
CREATE INDEX notice_sends_due ON notice_sends (state, ready_at);
CREATE INDEX notice_sends_message ON notice_sends (message);
-- Every attempt of a send, as for deliveries.
CREATE TABLE notice_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    send_key     TEXT    NOT NULL REFERENCES notice_sends (key) ON DELETE CASCADE,
    attempt      INTEGER  NOT NULL,
    at           INTEGER  NOT NULL,
    class        TEXT    NOT NULL,
    code         INTEGER,
    reason       TEXT    NOT NULL
);
CREATE INDEX notice_attempts_send ON notice_attempts (send_key);
