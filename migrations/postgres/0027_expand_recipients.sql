-- Recipients: the bounces and complaints that come back after a send, and the addresses no
-- report is sent to any more. A delivery to a suppressed address ends `suppressed`, and the
-- report's owners are told (a notice of cause `suppressed`), both only while every live node
-- reads work format 5. Older versions neither read nor write the
-- new tables; the state CHECKs only widen.
CREATE TABLE bounces (
    id           BIGSERIAL PRIMARY KEY,
    received_at  BIGINT  NOT NULL,
    provider     TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('hard', 'soft', 'complaint')),
    address      TEXT,
    status       TEXT,
    diagnostic   TEXT,
    delivery_key TEXT,
    report_id    TEXT
);
CREATE INDEX bounces_delivery ON bounces (delivery_key) WHERE delivery_key IS NOT NULL;
CREATE INDEX bounces_address ON bounces (address, received_at);

-- One row per suppression, kept when lifted: the rows are the address's history. `report_id`
-- is '' for every report. At most one row of an address and report is in force.
CREATE TABLE suppressions (
    id            BIGSERIAL PRIMARY KEY,
    address       TEXT    NOT NULL,
    report_id     TEXT    NOT NULL DEFAULT '',
    since         BIGINT  NOT NULL,
    cause         TEXT    NOT NULL CHECK (cause IN ('bounce', 'soft_bounces', 'complaint', 'unsubscribe', 'operator')),
    why           TEXT    NOT NULL,
    bounce_id     BIGINT,
    by            TEXT,
    via           TEXT,
    lifted_at     BIGINT,
    lifted_by     TEXT,
    lifted_reason TEXT,
    lifted_via    TEXT
);
CREATE UNIQUE INDEX suppressions_in_force ON suppressions (address, report_id) WHERE lifted_at IS NULL;

-- Widened NOT VALID: every row already there passes, so the table is not scanned under its lock.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state IN ('pending', 'sending', 'sent', 'quarantined', 'suppressed')) NOT VALID;
ALTER TABLE notices DROP CONSTRAINT notices_cause_check;
ALTER TABLE notices ADD CONSTRAINT notices_cause_check
    CHECK (cause IN ('late', 'quarantined', 'suppressed')) NOT VALID;
ALTER TABLE notice_messages DROP CONSTRAINT notice_messages_cause_check;
ALTER TABLE notice_messages ADD CONSTRAINT notice_messages_cause_check
    CHECK (cause IN ('late', 'quarantined', 'suppressed')) NOT VALID;
ALTER TABLE notice_sends DROP CONSTRAINT notice_sends_state_check;
ALTER TABLE notice_sends ADD CONSTRAINT notice_sends_state_check
    CHECK (state IN ('pending', 'sending', 'sent', 'quarantined', 'suppressed')) NOT VALID;
