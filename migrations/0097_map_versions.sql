-- A number per person that changes whenever anything their map page shows changes: a pin added,
-- removed, moved, renamed or changing status, or a pin's count of ready photos. The session's
-- statement returns it, so the app can keep a person's rendered map page and serve it again while
-- the number stands (docs/architecture.md, "Pages"), with no second round trip. Kept by triggers,
-- so changes made in SQL by an administrator count as well as the app's own.
CREATE TABLE IF NOT EXISTS map_versions (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    version bigint NOT NULL
);
COMMENT ON TABLE map_versions IS 'A counter per person, moved on by triggers whenever their pins or pin photo counts change; pages the app keeps in memory are valid while it stands. Safe to empty (every page is then rendered afresh once).';
COMMENT ON COLUMN map_versions.user_id IS 'The person.';
COMMENT ON COLUMN map_versions.version IS 'Goes up when a transaction that changed their pins or photo counts commits (once per row changed).';

-- Moves a person's counter on. A person being deleted by the statement that fired the trigger (a
-- cascade from users) is skipped: their row goes with them.
CREATE OR REPLACE FUNCTION map_versions_bump(person bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO map_versions AS v (user_id, version)
    SELECT u.id, 1 FROM users u WHERE u.id = person
    ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1;
END
$$;

-- Deferred to commit (constraint triggers, so row-level): the counter's row lock is the last lock
-- a transaction takes, held only while it commits. Taken mid-transaction — a worker's photo batch,
-- a pin drop, a claim that marks the pin downloading all bump the same person's row — it made
-- transactions that took the same locks in other orders wait on each other in a cycle (a POST /pins
-- answered 500 in script/bench albums with eight workers on the dropper's own albums).
CREATE OR REPLACE FUNCTION map_versions_pin_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN PERFORM map_versions_bump(OLD.user_id); END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.user_id IS DISTINCT FROM OLD.user_id) THEN
        PERFORM map_versions_bump(NEW.user_id);
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION map_versions_count_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A count deleted with its pin (the cascade) finds no pin here; the pins trigger bumped.
    PERFORM map_versions_bump(p.user_id) FROM pins p
    WHERE p.id = CASE WHEN TG_OP = 'DELETE' THEN OLD.pin_id ELSE NEW.pin_id END;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS map_versions_pins ON pins;
CREATE CONSTRAINT TRIGGER map_versions_pins AFTER INSERT OR UPDATE OR DELETE ON pins
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION map_versions_pin_changed();
DROP TRIGGER IF EXISTS map_versions_counts ON pin_photo_counts;
CREATE CONSTRAINT TRIGGER map_versions_counts AFTER INSERT OR UPDATE OR DELETE ON pin_photo_counts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION map_versions_count_changed();
