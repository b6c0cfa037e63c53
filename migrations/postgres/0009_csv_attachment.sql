-- A report may attach its data as CSV: the third part of its artifact, when it has one.
ALTER TABLE jobs ADD COLUMN artifact_csv_key TEXT;
