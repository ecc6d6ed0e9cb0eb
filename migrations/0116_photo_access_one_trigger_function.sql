-- Migration 0115's four statement trigger functions (sessions, users, pins, photos deleted) had one
-- body each, differing only in the payload's kind and which rows' ids it names. One function now
-- serves all four triggers: the kind is the trigger's argument, the ids follow from the table.
-- PL/pgSQL plans each trigger's statements per table, so a branch that names another table's
-- columns is never planned for this one.
--
-- Also: a pin whose generation was 0 (dropped, never collected) has no collection's photos to
-- drop, so its first collection no longer notifies every instance; an import of 2,000 pins would
-- have sent 2,000 notifications for nothing. Photos a person picked onto such a pin are deleted
-- by the collection's DELETE, which notifies them by id.
CREATE OR REPLACE FUNCTION photo_access_rows_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        PERFORM photo_access_notify(TG_ARGV[0], ARRAY(SELECT encode(token_hash, 'hex') FROM gone));
    ELSIF TG_TABLE_NAME = 'photos' THEN
        -- Only a ready photo is ever cached.
        PERFORM photo_access_notify(TG_ARGV[0], ARRAY(SELECT id::text FROM gone WHERE status = 'ready'));
    ELSE
        PERFORM photo_access_notify(TG_ARGV[0], ARRAY(SELECT id::text FROM gone));
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_rows_gone() IS
    'Statement trigger: NOTIFY photo_access KIND:ids for the deleted rows (KIND is the trigger argument; sessions by token hash, photos only when ready).';

DROP TRIGGER IF EXISTS photo_access_sessions_deleted ON sessions;
CREATE TRIGGER photo_access_sessions_deleted AFTER DELETE ON sessions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_rows_gone('s');
DROP TRIGGER IF EXISTS photo_access_users_deleted ON users;
CREATE TRIGGER photo_access_users_deleted AFTER DELETE ON users
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_rows_gone('u');
DROP TRIGGER IF EXISTS photo_access_pins_deleted ON pins;
CREATE TRIGGER photo_access_pins_deleted AFTER DELETE ON pins
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_rows_gone('p');
DROP TRIGGER IF EXISTS photo_access_photos_deleted ON photos;
CREATE TRIGGER photo_access_photos_deleted AFTER DELETE ON photos
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_rows_gone('ph');

DROP TRIGGER IF EXISTS photo_access_pins_changed ON pins;
CREATE TRIGGER photo_access_pins_changed AFTER UPDATE OF generation, user_id ON pins
    FOR EACH ROW WHEN ((OLD.generation > 0 AND NEW.generation IS DISTINCT FROM OLD.generation)
                       OR NEW.user_id IS DISTINCT FROM OLD.user_id)
    EXECUTE FUNCTION photo_access_row_changed('p');

DROP FUNCTION photo_access_sessions_deleted();
DROP FUNCTION photo_access_users_deleted();
DROP FUNCTION photo_access_pins_deleted();
DROP FUNCTION photo_access_photos_deleted();
