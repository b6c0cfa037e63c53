-- SQLite uses a partial index only for a query whose WHERE clause it can prove implies the
-- index's predicate, and its prover takes `state = 'ready'` to imply `state = 'ready' OR
-- state = 'waiting'` but not `state IN ('ready', 'waiting')`: every claim of jobs, the next-due
-- read and the other reads of ready or waiting jobs scanned the whole table (every job a night
-- ever made, until retention deletes it) and sorted it. The same index, its predicate an OR.
-- (PostgreSQL's planner proves both forms: its `jobs_due` stays.) Older versions' claims use
-- it too; their rescuer's read of live jobs, written with IN, reads the table instead.
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (state, ready_at, key) WHERE state = 'ready' OR state = 'waiting';
