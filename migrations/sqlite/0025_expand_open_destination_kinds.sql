-- Destination kinds are no longer listed in the schema: which kinds a version sends is its own
-- registry's to say (a row of a kind a version does not send still reads, and its sends fail
-- saying so), so a new kind needs no migration. Older versions only ever write `email` and
-- `webhook`, so this only widens what is stored.
-- SQLite cannot drop a CHECK constraint; dropping one changes nothing stored, so each table's
-- definition is edited in place (as 0014 did), the connection's schema reloaded, and the schema
-- cookie moved by a real DDL statement so that every other connection reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, ' CHECK (kind IN (''email'', ''webhook''))', '')
 WHERE type = 'table' AND name IN ('deliveries', 'notice_sends');
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER);
DROP TABLE schema_cookie_bump;
