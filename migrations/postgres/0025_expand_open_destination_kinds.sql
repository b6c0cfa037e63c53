-- Destination kinds are no longer listed in the schema: which kinds a version sends is its own
-- registry's to say (a row of a kind a version does not send still reads, and its sends fail
-- saying so), so a new kind needs no migration. Older versions only ever write `email` and
-- `webhook`, so this only widens what is stored.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE notice_sends DROP CONSTRAINT notice_sends_kind_check;
