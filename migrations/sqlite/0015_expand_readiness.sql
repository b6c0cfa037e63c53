-- Waiting for a report's data (`ready_when`): a job's deadline (`wait_until`), when it passed
-- without the data (`late_at`), and one row per readiness probe with what it answered (ready,
-- not ready, or failed: an error or a timeout, which counts as not ready). Older versions
-- never write them and read rows with `SELECT *`, so new columns are invisible to them; a
-- probe row goes with its job (ON DELETE CASCADE), so an older version's retention still
-- deletes the job.
ALTER TABLE jobs ADD COLUMN wait_until INTEGER;
ALTER TABLE jobs ADD COLUMN late_at INTEGER;
CREATE TABLE probes (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    job_key  TEXT    NOT NULL REFERENCES jobs (key) ON DELETE CASCADE,
    at       INTEGER NOT NULL,
    outcome  TEXT    NOT NULL CHECK (outcome IN ('ready', 'not_ready', 'failed')),
    answer   TEXT    NOT NULL
);
CREATE INDEX probes_job ON probes (job_key, at);
