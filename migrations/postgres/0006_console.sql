-- The console's job list walks jobs newest date first, then by key (keyset pagination).
CREATE INDEX jobs_by_date ON jobs (local_date, key);
-- The audit: what an action did (`redrive` or `cancel`) and through what, with which role
-- (`cli`, `api`, `console:operator`); NULL on rows written before this column.
ALTER TABLE redrives ADD COLUMN action TEXT NOT NULL DEFAULT 'redrive';
ALTER TABLE redrives ADD COLUMN via TEXT;
