-- As PostgreSQL's 0023: jobs numbered, deliveries by their job's number and their place in it
-- (`ordinal`: how many of the job's deliveries existed before it), attempts carrying their
-- delivery's pair, each unique. The rows already there are numbered here: jobs in the order
-- they were made, a job's deliveries in the order they were created. SQLite cannot add NOT
-- NULL to a column; migration 24 rebuilds the tables with it.
ALTER TABLE jobs ADD COLUMN number INTEGER;
ALTER TABLE deliveries ADD COLUMN job_number INTEGER;
ALTER TABLE deliveries ADD COLUMN ordinal INTEGER;
ALTER TABLE delivery_attempts ADD COLUMN job_number INTEGER;
ALTER TABLE delivery_attempts ADD COLUMN ordinal INTEGER;

UPDATE jobs SET number = n.number
FROM (SELECT key, row_number() OVER (ORDER BY created_at, key) AS number FROM jobs) AS n
WHERE n.key = jobs.key;
UPDATE deliveries SET job_number = n.job_number, ordinal = n.ordinal
FROM (SELECT d.key, j.number AS job_number,
             row_number() OVER (PARTITION BY d.job_key ORDER BY d.created_at, d.key) - 1 AS ordinal
      FROM deliveries d JOIN jobs j ON j.key = d.job_key) AS n
WHERE n.key = deliveries.key;
UPDATE delivery_attempts SET job_number = d.job_number, ordinal = d.ordinal
FROM deliveries d WHERE d.key = delivery_attempts.delivery_key;

-- SQLite has no sequences, and its defaults are constants: a new job takes the next number
-- after the greatest (the index finds it).
CREATE UNIQUE INDEX jobs_number ON jobs (number);
CREATE UNIQUE INDEX deliveries_numbers ON deliveries (job_number, ordinal);
CREATE UNIQUE INDEX delivery_attempts_numbers ON delivery_attempts (job_number, ordinal, attempt);
CREATE TRIGGER jobs_numbered AFTER INSERT ON jobs WHEN NEW.number IS NULL
BEGIN
    UPDATE jobs SET number = (SELECT IFNULL(MAX(number), 0) + 1 FROM jobs) WHERE key = NEW.key;
END;
-- A delivery an older version inserts without its numbers (one that runs on this file after
-- a rollback) takes them after its insert: an AFTER trigger runs as each row goes in, so the
-- job's greatest place includes the rows its statement inserted before it.
CREATE TRIGGER deliveries_numbered AFTER INSERT ON deliveries
WHEN NEW.job_number IS NULL OR NEW.ordinal IS NULL
BEGIN
    UPDATE deliveries
    SET job_number = IFNULL(NEW.job_number, (SELECT number FROM jobs WHERE key = NEW.job_key)),
        ordinal = IFNULL(NEW.ordinal,
                         (SELECT IFNULL(MAX(d.ordinal) + 1, 0) FROM deliveries d
                          WHERE d.job_key = NEW.job_key))
    WHERE key = NEW.key;
END;
CREATE TRIGGER delivery_attempts_numbered AFTER INSERT ON delivery_attempts
WHEN NEW.job_number IS NULL OR NEW.ordinal IS NULL
BEGIN
    UPDATE delivery_attempts
    SET (job_number, ordinal) = (SELECT job_number, ordinal FROM deliveries
                                 WHERE key = NEW.delivery_key)
    WHERE id = NEW.id;
END;
