-- Each job and delivery records the format its payload and states are written in (1: this
-- format). A node leases only work whose format it knows, so a newer node's work waits for a
-- node that reads it instead of being misread. Rows written before this column are format 1.
ALTER TABLE jobs ADD COLUMN format BIGINT NOT NULL DEFAULT 1;
ALTER TABLE deliveries ADD COLUMN format BIGINT NOT NULL DEFAULT 1;
