-- Numbered work, the expand half (docs/design/integer-keys.md). Every job gets a number from a
-- sequence, every delivery its job's number and its place in the job (`ordinal`: how many of
-- the job's deliveries existed before it, 0, 1, 2 …), and every attempt its delivery's pair,
-- each unique. Migration 24 (contract) then keys deliveries and attempts by these integers
-- instead of text: a b-tree page split on text keys that arrive out of order (three nodes
-- rendering their own claims) halves the page, while PostgreSQL splits a page of narrow
-- integer keys after the new item (benches/support/btree_splits.sql).
--
-- The columns are added empty (a volatile default on ADD COLUMN would rewrite the table), new
-- jobs then take `nextval` by default, and the rows already there are numbered here: jobs in
-- the order they were made, a job's deliveries in theirs. The three tables are locked from
-- the first ALTER to the commit, numbering and index builds included: other nodes' writes
-- wait that long (their leases run on), none is lost.
--
-- Versions before this one insert deliveries and attempts without numbers: the triggers fill
-- them. This version writes them itself, and the triggers' WHEN skips its rows.
CREATE SEQUENCE job_numbers AS BIGINT;
ALTER TABLE jobs ADD COLUMN number BIGINT;
ALTER TABLE deliveries ADD COLUMN job_number BIGINT, ADD COLUMN ordinal INTEGER;
ALTER TABLE delivery_attempts ADD COLUMN job_number BIGINT, ADD COLUMN ordinal INTEGER;

UPDATE jobs SET number = n.number
FROM (SELECT key, nextval('job_numbers') AS number
      FROM (SELECT key FROM jobs ORDER BY created_at, key) ordered) n
WHERE n.key = jobs.key;
UPDATE deliveries SET job_number = n.job_number, ordinal = n.ordinal
FROM (SELECT d.key, j.number AS job_number,
             row_number() OVER (PARTITION BY d.job_key ORDER BY d.created_at, d.key) - 1 AS ordinal
      FROM deliveries d JOIN jobs j ON j.key = d.job_key) n
WHERE n.key = deliveries.key;
UPDATE delivery_attempts SET job_number = d.job_number, ordinal = d.ordinal
FROM deliveries d WHERE d.key = delivery_attempts.delivery_key;

ALTER TABLE jobs ALTER COLUMN number SET DEFAULT nextval('job_numbers');
ALTER TABLE jobs ALTER COLUMN number SET NOT NULL;
ALTER TABLE deliveries ALTER COLUMN job_number SET NOT NULL, ALTER COLUMN ordinal SET NOT NULL;
ALTER TABLE delivery_attempts
    ALTER COLUMN job_number SET NOT NULL, ALTER COLUMN ordinal SET NOT NULL;
CREATE UNIQUE INDEX jobs_number ON jobs (number);
CREATE UNIQUE INDEX deliveries_numbers ON deliveries (job_number, ordinal);
CREATE UNIQUE INDEX delivery_attempts_numbers ON delivery_attempts (job_number, ordinal, attempt);

-- The functions find the tables in the schema they were made in, whatever a connection's
-- search_path says. A job's deliveries are inserted under its render lease, by one
-- transaction at a time, so the next place after the job's greatest is free; a row-level
-- BEFORE trigger sees the rows its statement inserted before it.
CREATE FUNCTION deliveries_numbered() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.job_number IS NULL THEN
        SELECT number INTO NEW.job_number FROM jobs WHERE key = NEW.job_key;
    END IF;
    IF NEW.ordinal IS NULL THEN
        SELECT COALESCE(MAX(ordinal) + 1, 0) INTO NEW.ordinal
            FROM deliveries WHERE job_number = NEW.job_number;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER deliveries_numbered BEFORE INSERT ON deliveries FOR EACH ROW
    WHEN (NEW.job_number IS NULL OR NEW.ordinal IS NULL) EXECUTE FUNCTION deliveries_numbered();

CREATE FUNCTION delivery_attempts_numbered() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    SELECT job_number, ordinal INTO NEW.job_number, NEW.ordinal
        FROM deliveries WHERE key = NEW.delivery_key;
    RETURN NEW;
END $$;
CREATE TRIGGER delivery_attempts_numbered BEFORE INSERT ON delivery_attempts FOR EACH ROW
    WHEN (NEW.job_number IS NULL OR NEW.ordinal IS NULL)
    EXECUTE FUNCTION delivery_attempts_numbered();
