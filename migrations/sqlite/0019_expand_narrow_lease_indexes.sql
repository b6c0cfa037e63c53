-- As PostgreSQL's 0019: the indexes of leased and delivering work are read for their rows only
-- (the rescuer's expired leases, the rolling deploy's work in flight), never in key order, so
-- they are keyed by the lease token, a small integer, instead of copying each row's long key.
DROP INDEX deliveries_leased;
CREATE INDEX deliveries_leased ON deliveries (lease_token) WHERE state = 'sending';
DROP INDEX jobs_leased;
CREATE INDEX jobs_leased ON jobs (lease_token) WHERE state = 'rendering';
DROP INDEX jobs_delivering;
CREATE INDEX jobs_delivering ON jobs (lease_token) WHERE state = 'delivering';
