-- What `send_when = "changed"` and `"alert"` decided for each rendered job of such a report:
-- sent or not, what happened (an alert triggered, still triggered, recovered; the data changed
-- or not), in words, and the alert's state after it. One row per job key, written in the
-- transaction that records the job's render or its skip; the next job of the report reads the
-- latest row of an earlier date. Older versions neither write nor read it.
CREATE TABLE send_decisions (
    job_key      TEXT    PRIMARY KEY,
    report_id    TEXT    NOT NULL,
    local_date   TEXT    NOT NULL,
    revision     BIGINT NOT NULL,
    rule         TEXT    NOT NULL CHECK (rule IN ('changed', 'alert')),
    event        TEXT    NOT NULL,
    sent         BIGINT NOT NULL CHECK (sent IN (0, 1)),
    words        TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    value        DOUBLE PRECISION,
    triggered    BIGINT CHECK (triggered IN (0, 1)),
    since_key    TEXT,
    alerted_at   BIGINT,
    decided_at   BIGINT NOT NULL
);
CREATE INDEX send_decisions_report ON send_decisions (report_id, local_date, revision);

-- Test sends: a report rendered for a date and emailed to one address an operator typed, with
-- who asked, through what, and what the relay answered. No job, delivery, recipient list,
-- suppression or decision counts them.
CREATE TABLE test_sends (
    id          BIGSERIAL PRIMARY KEY,
    report_id   TEXT    NOT NULL,
    local_date  TEXT    NOT NULL,
    address     TEXT    NOT NULL,
    sent_by     TEXT    NOT NULL,
    via         TEXT    NOT NULL,
    at          BIGINT NOT NULL,
    outcome     TEXT    NOT NULL,
    detail      TEXT    NOT NULL
);
CREATE INDEX test_sends_report ON test_sends (report_id, at);
