-- Retention records when it cleared a finished job's verbose transport diagnostics.
ALTER TABLE jobs ADD COLUMN diagnostics_cleared_at BIGINT;
