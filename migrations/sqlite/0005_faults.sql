-- The instant of a job's first render lease: the `generated_at` every render of the job prints,
-- so a render repeated after a crash or a redrive writes the same bytes (the same sha256).
ALTER TABLE jobs ADD COLUMN generated_at BIGINT;
-- Leases lost (expired and returned by the rescuer). They count against the retry budget:
-- work that kills or hangs its worker every time is quarantined, not retried forever.
ALTER TABLE jobs ADD COLUMN lease_losses BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN lease_losses BIGINT NOT NULL DEFAULT 0;
