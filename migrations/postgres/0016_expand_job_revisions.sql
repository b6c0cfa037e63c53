-- Reissued reports: a revision of a finished job is a job of its own, keyed
-- `report:date.rN`, on the same report and local date. `revision` numbers them (1 for every
-- job made before) and `supersedes` names the revision it corrects. One job per report and
-- date becomes one per report, date and revision. Older versions insert with a column list
-- and read `SELECT *`: they never see the difference.
ALTER TABLE jobs ADD COLUMN revision BIGINT NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN supersedes TEXT;
ALTER TABLE jobs DROP CONSTRAINT jobs_report_local_date_key;
CREATE UNIQUE INDEX jobs_revision ON jobs (report, local_date, revision);
