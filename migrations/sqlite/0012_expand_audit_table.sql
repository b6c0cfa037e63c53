-- The audit trail holds cancels as well as redrives: its table is `audit` from now on. Older
-- versions still read and write `redrives`, so that name stays, as a view of the same rows
-- whose inserts and deletes triggers carry to the table, until migration 13 drops it once no
-- live node uses it.
ALTER TABLE redrives RENAME TO audit;
DROP INDEX redrives_job;
CREATE INDEX audit_job ON audit (job_key);
CREATE VIEW redrives AS SELECT * FROM audit;
CREATE TRIGGER redrives_insert INSTEAD OF INSERT ON redrives BEGIN
    INSERT INTO audit (job_key, delivery_key, redriven_by, reason, at, action, via)
    VALUES (NEW.job_key, NEW.delivery_key, NEW.redriven_by, NEW.reason, NEW.at,
            COALESCE(NEW.action, 'redrive'), NEW.via);
END;
CREATE TRIGGER redrives_delete INSTEAD OF DELETE ON redrives BEGIN
    DELETE FROM audit WHERE id = OLD.id;
END;
