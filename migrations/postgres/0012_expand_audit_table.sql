-- The audit trail holds cancels as well as redrives: its table is `audit` from now on. Older
-- versions still read and write `redrives`, so that name stays, as a view of the same rows
-- (PostgreSQL inserts and deletes through a simple view), until migration 13 drops it once no
-- live node uses it.
ALTER TABLE redrives RENAME TO audit;
ALTER INDEX redrives_job RENAME TO audit_job;
CREATE VIEW redrives AS SELECT * FROM audit;
