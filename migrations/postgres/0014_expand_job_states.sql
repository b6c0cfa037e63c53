-- Two job states: `skipped` (terminal: nothing to send, with the reason in last_error) and
-- `waiting` (a job waiting for its report's data to be ready; no version writes it yet). Older
-- versions never write them, and no node writes them while an older node is live (work
-- format 2), so this only widens the check.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('ready', 'waiting', 'rendering', 'delivering', 'done', 'quarantined', 'cancelled', 'skipped'));
