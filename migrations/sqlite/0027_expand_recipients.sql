-- Recipients: the bounces and complaints that come back after a send, and the addresses no
-- report is sent to any more. A delivery to a suppressed address ends `suppressed`, and the
-- report's owners are told (a notice of cause `suppressed`), both only while every live node
-- reads work format 5. Older versions neither read nor write the
-- new tables; the state CHECKs only widen.
CREATE TABLE bounces (
    id           INTEGER PRIMARY KEY,
    received_at  INTEGER NOT NULL,
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
    id            INTEGER PRIMARY KEY,
    address       TEXT    NOT NULL,
    report_id     TEXT    NOT NULL DEFAULT '',
    since         INTEGER NOT NULL,
    cause         TEXT    NOT NULL CHECK (cause IN ('bounce', 'soft_bounces', 'complaint', 'unsubscribe', 'operator')),
    why           TEXT    NOT NULL,
    bounce_id     INTEGER,
    by            TEXT,
    via           TEXT,
    lifted_at     INTEGER,
    lifted_by     TEXT,
    lifted_reason TEXT,
    lifted_via    TEXT
);
CREATE UNIQUE INDEX suppressions_in_force ON suppressions (address, report_id) WHERE lifted_at IS NULL;

-- SQLite cannot alter a CHECK constraint: the definitions are edited in place (as 0014 and 0025
-- did), which changes nothing stored, and the schema cookie moved so other connections reload.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql,
       'CHECK (state IN (''pending'', ''sending'', ''sent'', ''quarantined''))',
       'CHECK (state IN (''pending'', ''sending'', ''sent'', ''quarantined'', ''suppressed''))')
 WHERE type = 'table' AND name IN ('deliveries', 'notice_sends');
UPDATE sqlite_schema
   SET sql = replace(sql,
       'CHECK (cause IN (''late'', ''quarantined''))',
       'CHECK (cause IN (''late'', ''quarantined'', ''suppressed''))')
 WHERE type = 'table' AND name IN ('notices', 'notice_messages');
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER);
DROP TABLE schema_cookie_bump;
