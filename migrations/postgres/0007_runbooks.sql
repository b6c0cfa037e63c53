-- Bulk redrives as runbooks (DESIGN §12): a group of quarantined deliveries (report, host,
-- class, quarantined since) redriven a canary first, then in batches, stopping by itself when
-- the work comes back quarantined with the same class. Keep in step with the other backend.
CREATE TABLE runbooks (
    id          BIGSERIAL PRIMARY KEY,
    report      TEXT    NOT NULL,
    host        TEXT    NOT NULL,               -- '' matches every host
    class       TEXT    NOT NULL,
    since       BIGINT,                         -- quarantined at or after; NULL: any time
    canary      BIGINT  NOT NULL,
    batch       BIGINT  NOT NULL,
    planned     BIGINT  NOT NULL,               -- the dry run's count
    redriven_by TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    via         TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('planned', 'running', 'stopped', 'done')),
    step        BIGINT  NOT NULL DEFAULT 0,     -- redrive steps taken: 1 is the canary
    outcome     TEXT,                           -- why it stopped or how it ended
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
CREATE INDEX runbooks_state ON runbooks (state);

-- The deliveries each step redrove: the next step judges them, and none is redriven twice.
CREATE TABLE runbook_items (
    runbook_id   BIGINT NOT NULL REFERENCES runbooks (id),
    delivery_key TEXT   NOT NULL,
    step         BIGINT NOT NULL,
    PRIMARY KEY (runbook_id, delivery_key)
);

-- Every step, audited: plan (the dry run), start, canary, batch, stopped, done.
CREATE TABLE runbook_steps (
    id          BIGSERIAL PRIMARY KEY,
    runbook_id  BIGINT  NOT NULL REFERENCES runbooks (id),
    step        BIGINT  NOT NULL,
    action      TEXT    NOT NULL,
    count       BIGINT  NOT NULL,
    detail      TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    at          BIGINT  NOT NULL
);
CREATE INDEX runbook_steps_runbook ON runbook_steps (runbook_id);
