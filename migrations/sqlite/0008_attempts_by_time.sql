-- The console's overview counts attempts by class over the last hour and day.
CREATE INDEX delivery_attempts_finished ON delivery_attempts (finished_at);
