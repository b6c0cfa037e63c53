-- The queue's indexes hold only the rows their queries look for. A full (state, ready_at, key)
-- index took a new entry at every change of a row's state (no update of `state` is HOT), so a
-- delivery paid an index entry there at its insert, its claim and its finish, and a job at each
-- of its four states. PostgreSQL adds an entry to a partial index only for a row version its
-- predicate holds: due work, leased work (what the rescuer looks for) and quarantined work.
-- Leased work is indexed by key, a column no write of it changes: a lease's extension stays a
-- HOT update, and the rescuer reads the few rows in flight for their deadlines.
-- Older versions run the same queries; their planner picks these indexes as this one's does.
CREATE INDEX deliveries_due ON deliveries (ready_at, key) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (key) WHERE state = 'sending';
CREATE INDEX deliveries_quarantined ON deliveries (updated_at, key) WHERE state = 'quarantined';
DROP INDEX deliveries_ready;
CREATE INDEX jobs_due ON jobs (state, ready_at, key) WHERE state IN ('ready', 'waiting');
CREATE INDEX jobs_leased ON jobs (key) WHERE state = 'rendering';
CREATE INDEX jobs_delivering ON jobs (key) WHERE state = 'delivering';
CREATE INDEX jobs_quarantined ON jobs (updated_at, key) WHERE state = 'quarantined';
DROP INDEX jobs_ready;
-- (PostgreSQL also drops jobs_revision here, which a job's key makes redundant; on SQLite it is
-- the table's own UNIQUE constraint, which only a rebuild of the table would drop. PostgreSQL
-- also trades delivery_attempts_finished for a BRIN index, which SQLite does not have.)
