-- A delivery's finish (`sending → sent`) changes its state, and `state` stood in the predicate
-- of each queue index of deliveries (due, leased, quarantined). PostgreSQL counts a predicate's
-- columns as indexed: no finish was a HOT update, and each wrote, besides its row, a new entry
-- in the primary key and in deliveries_job (pg_waldump: an eighth of a delivery's WAL, and more
-- once older keys surround the new ones). Two generated columns say what those predicates said
-- and stay NULL through a finish: `due_at`, a pending delivery's `ready_at`, and
-- `quarantined_at`, a quarantined one's `updated_at`. Older versions write `state` as before and
-- the columns follow it. Sends in flight are found through their live jobs, not an index of
-- their own. The indexes on `state` stay for older versions until 0021, a contract migration,
-- drops them; from then on a finish is a HOT update. Adding a stored column rewrites the table
-- once, under its lock.
ALTER TABLE deliveries
    ADD COLUMN due_at BIGINT GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN ready_at END) STORED,
    ADD COLUMN quarantined_at BIGINT GENERATED ALWAYS AS (CASE WHEN state = 'quarantined' THEN updated_at END) STORED;
CREATE INDEX deliveries_due_at ON deliveries (due_at, key) WHERE due_at IS NOT NULL;
CREATE INDEX deliveries_quarantined_at ON deliveries (quarantined_at, key) WHERE quarantined_at IS NOT NULL;
