-- Versions before migration 20 find due, leased and quarantined deliveries by `state`. Once no
-- live node is one of them these indexes go, and a delivery's finish is a HOT update (see 0020).
DROP INDEX deliveries_due;
DROP INDEX deliveries_leased;
DROP INDEX deliveries_quarantined;
