-- The indexes of leased and delivering work are read for their rows only (the rescuer's expired
-- leases, the rolling deploy's work in flight: `state = … AND lease_expires_at < …`), never in
-- key order. Keyed by the row's key they copied a long text into an entry at each claim, born
-- delivery and render, and with several nodes inserting keys at once their pages split half
-- empty (`pg_waldump`: those splits were most of the WAL three nodes wrote beyond one). Keyed
-- by the lease token, a small integer only a claim changes (a claim changes the state too, so it
-- is never a HOT update anyway), an entry is a few bytes and equal tokens share one posting
-- list. A lease's extension changes neither column: it stays a HOT update.
DROP INDEX deliveries_leased;
CREATE INDEX deliveries_leased ON deliveries (lease_token) WHERE state = 'sending';
DROP INDEX jobs_leased;
CREATE INDEX jobs_leased ON jobs (lease_token) WHERE state = 'rendering';
DROP INDEX jobs_delivering;
CREATE INDEX jobs_delivering ON jobs (lease_token) WHERE state = 'delivering';
