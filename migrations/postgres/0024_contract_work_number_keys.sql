-- Numbered work, the contract half (docs/design/integer-keys.md): deliveries and their attempts
-- are keyed by the numbers migration 23 gave them, and no index holds a text key of theirs.
-- Each node renders its own claims, so its deliveries' keys go into the indexes below keys
-- another node wrote already; a b-tree page split anywhere but at the right end halves the
-- page, except that PostgreSQL splits a page of narrow integer keys after the new item
-- (`_bt_afternewitemoff`), which text keys never get. Replayed, three nodes' deliveries wrote
-- ~48 bytes more each than one node's with the text keys, ~3 with these
-- (benches/support/btree_splits.sql).
--
-- Versions before 23 look deliveries up by their text keys: this waits until none is live. The
-- text keys stay as columns, for people and the API; the ledger finds one through its job.
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_key_fkey;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_key_attempt_key;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_pkey PRIMARY KEY USING INDEX deliveries_numbers;
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_delivery_fkey
    FOREIGN KEY (job_number, ordinal) REFERENCES deliveries (job_number, ordinal);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_job_key_fkey;
DROP INDEX deliveries_job;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_job_number_fkey
    FOREIGN KEY (job_number) REFERENCES jobs (number);
DROP INDEX deliveries_due_at;
CREATE INDEX deliveries_due_at ON deliveries (due_at, job_number, ordinal) WHERE due_at IS NOT NULL;
DROP INDEX deliveries_quarantined_at;
CREATE INDEX deliveries_quarantined_at ON deliveries (quarantined_at, job_number, ordinal)
    WHERE quarantined_at IS NOT NULL;
-- Only versions before 23 inserted rows without numbers.
DROP TRIGGER deliveries_numbered ON deliveries;
DROP FUNCTION deliveries_numbered();
DROP TRIGGER delivery_attempts_numbered ON delivery_attempts;
DROP FUNCTION delivery_attempts_numbered();
