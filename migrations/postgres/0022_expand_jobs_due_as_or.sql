-- SQLite's 0022 rewrites the predicate of `jobs_due` as an OR, the form its planner can match a
-- claim's `state = 'ready'` against. PostgreSQL's planner proves `state = 'ready'` implies
-- `state IN ('ready', 'waiting')` already, so its `jobs_due` stays; this keeps the two
-- backends' migrations one for one.
SELECT 1;
