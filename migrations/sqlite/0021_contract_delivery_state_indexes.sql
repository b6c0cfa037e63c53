-- As PostgreSQL's 0021: the indexes on `state` that versions before migration 20 read.
DROP INDEX deliveries_due;
DROP INDEX deliveries_leased;
DROP INDEX deliveries_quarantined;
