-- Leases take due work in (ready_at, key) order with a LIMIT. With the key in the index the
-- scan yields rows in that order and stops at the limit; without it every lease sorted all due
-- rows (10,000 ready jobs sharing one ready_at: a full sort per lease).
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (state, ready_at, key);
DROP INDEX deliveries_ready;
CREATE INDEX deliveries_ready ON deliveries (state, ready_at, key);
