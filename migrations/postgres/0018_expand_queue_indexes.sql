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
-- A job's key is its report, local date and revision (`report:date`, `report:date.rN`), so its
-- primary key already makes each (report, local_date, revision) unique: this index only cost
-- an entry at every change of a job's state. A reissue's read of a date's revisions goes by
-- jobs_by_date (a date holds one job per report and revision).
DROP INDEX jobs_revision;
-- Room on each page for a row's next version: an update whose new version fits beside the old
-- one writes a smaller WAL record (only what changed) and no lock record for the old one. A
-- delivery is updated once after its insert (its finish), a job three times, each old version
-- pruned soon after: half a page leaves room for them.
ALTER TABLE deliveries SET (fillfactor = 50);
ALTER TABLE jobs SET (fillfactor = 50);
-- The console counts the attempts of the last hours and day by `finished_at`. Attempts are
-- appended in about that order, so a BRIN index (the least and greatest `finished_at` of each
-- range of pages) finds them without an entry per attempt: a new range is summarized by
-- autovacuum, and a query reads the few pages not summarized yet in full.
CREATE INDEX delivery_attempts_finished_ranges ON delivery_attempts USING brin (finished_at) WITH (autosummarize = on);
DROP INDEX delivery_attempts_finished;
