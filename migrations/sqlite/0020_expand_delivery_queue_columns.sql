-- As PostgreSQL's 0020: `due_at` and `quarantined_at` say what the queue indexes' `state`
-- predicates said, so that a finish changes no indexed column there. SQLite adds a generated
-- column only as a virtual one; its indexes store the values.
ALTER TABLE deliveries ADD COLUMN due_at INTEGER GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN ready_at END) VIRTUAL;
ALTER TABLE deliveries ADD COLUMN quarantined_at INTEGER GENERATED ALWAYS AS (CASE WHEN state = 'quarantined' THEN updated_at END) VIRTUAL;
CREATE INDEX deliveries_due_at ON deliveries (due_at, key) WHERE due_at IS NOT NULL;
CREATE INDEX deliveries_quarantined_at ON deliveries (quarantined_at, key) WHERE quarantined_at IS NOT NULL;
