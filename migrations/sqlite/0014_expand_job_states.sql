-- Two job states: `skipped` (terminal: nothing to send, with the reason in last_error) and
-- `waiting` (a job waiting for its report's data to be ready; no version writes it yet). Older
-- versions never write them, and no node writes them while an older node is live (work
-- format 2), so this only widens the check.
-- SQLite cannot alter a CHECK constraint; widening one changes nothing stored, so the table's
-- definition is edited in place (the procedure SQLite's ALTER TABLE documentation gives for
-- such changes), the connection's schema reloaded, and the schema cookie moved by a real DDL
-- statement so that every other connection reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql,
       'CHECK (state IN (''ready'', ''rendering'', ''delivering'', ''done'', ''quarantined'', ''cancelled''))',
       'CHECK (state IN (''ready'', ''waiting'', ''rendering'', ''delivering'', ''done'', ''quarantined'', ''cancelled'', ''skipped''))')
 WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER);
DROP TABLE schema_cookie_bump;
