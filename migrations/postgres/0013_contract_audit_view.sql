-- Versions before migration 12 wrote the audit trail through `redrives`; once no live node is
-- one of them, the old name goes.
DROP VIEW redrives;
