-- A redrive gives a delivery a fresh retry budget without renumbering its attempts:
-- the budget counts attempts after budget_attempts, and age from budget_since.
ALTER TABLE deliveries ADD COLUMN budget_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN budget_since BIGINT;
