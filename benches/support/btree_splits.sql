-- What the deliveries' keys cost in WAL when one node or three insert them (three nodes'
-- WAL per delivery on an empty ledger). No dawnpost process: the insert order of a night's
-- deliveries is replayed in one session, which is all the WAL depends on (commit by commit, in
-- the order the nodes' commits reach the server).
--
--   psql "$DAWNPOST_TEST_POSTGRES_URL" -q -f benches/support/btree_splits.sql
--
-- 10,000 jobs × 3 deliveries. One node renders jobs in key order and commits 128 jobs' deliveries
-- at a time. Three nodes each claim chunks of 256 jobs in turn (node 0 the 1st, 4th, …) and
-- commit 128 jobs' deliveries at a time, at the same pace but not in step, so a commit's keys
-- often go in below keys another node has already written. Each variant of the table is made
-- afresh, after a checkpoint; printed: WAL bytes per delivery (pg_current_wal_lsn before and
-- after) and each index's pages.
--   text      the ledger's keys: key TEXT PRIMARY KEY (`<report>:<date>/webhook:<url>`) and an
--             index on job_key TEXT, as `deliveries` has them
--   text_pk   the primary key alone (without the job_key index)
--   int_pair  (job_id BIGINT, ordinal BIGINT) as the primary key: narrow, equal-width keys,
--             whose "split after the new item" PostgreSQL applies to localized ascending inserts
-- Leaves a schema `btree_splits` behind (dropped at the next run).

SET client_min_messages = warning;

CREATE OR REPLACE PROCEDURE pg_temp.replay(variant text, nodes int)
LANGUAGE plpgsql AS $$
DECLARE
    jobs    constant int := 10000;
    chunk   constant int := 256;
    batch   constant int := 128;
    per     constant int := chunk / batch;  -- commits a chunk takes
    c       record;
BEGIN
    -- The k-th commit of node n covers half (k % per) of the (k / per)-th chunk that node
    -- claimed, chunks being claimed in turn. The nodes work at the same pace but not in step:
    -- each commit reaches the server at k plus a random part of one commit's time (the same
    -- random sequence at every run), so which node's commit comes first varies.
    PERFORM setseed(0.3);
    CREATE TEMP TABLE commits ON COMMIT DROP AS
    SELECT n, k, ((k / per) * nodes + n) * chunk + (k % per) * batch AS lo,
           k + CASE WHEN nodes = 1 THEN 0 ELSE random() END AS at
      FROM generate_series(0, nodes - 1) n,
           generate_series(0, ((jobs + chunk * nodes - 1) / (chunk * nodes)) * per - 1) k
     ORDER BY n, k;
    FOR c IN SELECT lo, least(lo + batch, jobs) - 1 AS hi FROM commits WHERE lo < jobs ORDER BY at, n LOOP
        IF variant = 'int_pair' THEN
            INSERT INTO btree_splits.d (job_id, ordinal, key, state)
            SELECT j, d, format('warehouse-%s:2026-12-06/webhook:http://127.0.0.1:40000/hook/%s', lpad(j::text, 5, '0'), d), 'pending'
            FROM generate_series(c.lo, c.hi) j, generate_series(0, 2) d ORDER BY j, d;
        ELSE
            INSERT INTO btree_splits.d (key, job_key, state)
            SELECT format('warehouse-%s:2026-12-06/webhook:http://127.0.0.1:40000/hook/%s', lpad(j::text, 5, '0'), d),
                   format('warehouse-%s:2026-12-06', lpad(j::text, 5, '0')), 'pending'
            FROM generate_series(c.lo, c.hi) j, generate_series(0, 2) d ORDER BY 1;
        END IF;
        COMMIT;
    END LOOP;
END $$;

CREATE OR REPLACE PROCEDURE pg_temp.measure(variant text, nodes int)
LANGUAGE plpgsql AS $$
DECLARE
    before pg_lsn;
    wal    numeric;
    pages  text;
BEGIN
    PERFORM set_config('client_min_messages', 'warning', false);
    DROP SCHEMA IF EXISTS btree_splits CASCADE;
    PERFORM set_config('client_min_messages', 'notice', false);
    CREATE SCHEMA btree_splits;
    IF variant = 'int_pair' THEN
        CREATE TABLE btree_splits.d (job_id bigint, ordinal bigint, key text NOT NULL, state text,
                                     PRIMARY KEY (job_id, ordinal));
    ELSE
        CREATE TABLE btree_splits.d (key text PRIMARY KEY, job_key text NOT NULL, state text);
        IF variant = 'text' THEN
            CREATE INDEX d_job ON btree_splits.d (job_key);
        END IF;
    END IF;
    COMMIT;
    CHECKPOINT;
    before := pg_current_wal_lsn();
    CALL pg_temp.replay(variant, nodes);
    wal := pg_wal_lsn_diff(pg_current_wal_lsn(), before);
    SELECT string_agg(format('%s %s', c.relname, pg_relation_size(c.oid) / 8192), ', ' ORDER BY c.relname)
      INTO pages
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
     WHERE t.relnamespace = 'btree_splits'::regnamespace;
    RAISE NOTICE '% nodes=% wal_bytes_per_delivery=% index_pages: %', rpad(variant, 8), nodes,
        round(wal / 30000, 1), pages;
END $$;

SET client_min_messages = notice;
CALL pg_temp.measure('text', 1);
CALL pg_temp.measure('text', 3);
CALL pg_temp.measure('text_pk', 1);
CALL pg_temp.measure('text_pk', 3);
CALL pg_temp.measure('int_pair', 1);
CALL pg_temp.measure('int_pair', 3);
