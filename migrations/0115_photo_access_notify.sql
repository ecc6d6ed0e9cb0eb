-- NOTIFY photo_access whenever a right to see a photo ends, so every instance drops what its
-- PhotoAccess cache kept (docs/architecture.md, "Photos on the hot path"). Payloads are a kind and
-- ids: s: session token hashes (hex), u: people, p: pins, ph: photos, comma-separated, at most a
-- few thousand bytes each (NOTIFY takes 8000). Statement triggers: a sweep that deletes thousands
-- of rows sends a handful of notifications, not thousands.
CREATE OR REPLACE FUNCTION photo_access_notify(kind text, ids text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    chunk text;
BEGIN
    FOR chunk IN
        SELECT string_agg(id, ',') FROM (SELECT id, (row_number() OVER () - 1) / 90 AS n FROM unnest(ids) AS id) c GROUP BY n
    LOOP
        PERFORM pg_notify('photo_access', kind || ':' || chunk);
    END LOOP;
END
$$;
COMMENT ON FUNCTION photo_access_notify(text, text[]) IS 'Sends NOTIFY photo_access KIND:id,id,… in chunks of 90 ids (the photo cache of every instance drops them).';

CREATE OR REPLACE FUNCTION photo_access_sessions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('s', ARRAY(SELECT encode(token_hash, 'hex') FROM gone));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_sessions_deleted() IS 'A signed-out or expired session loses its photos on every instance.';
DROP TRIGGER IF EXISTS photo_access_sessions_deleted ON sessions;
CREATE TRIGGER photo_access_sessions_deleted AFTER DELETE ON sessions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_sessions_deleted();

CREATE OR REPLACE FUNCTION photo_access_users_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('u', ARRAY(SELECT id::text FROM gone));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_users_deleted() IS 'A deleted person loses their photos on every instance.';
DROP TRIGGER IF EXISTS photo_access_users_deleted ON users;
CREATE TRIGGER photo_access_users_deleted AFTER DELETE ON users
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_users_deleted();

-- Row triggers with a WHEN for updates: the condition is checked per row and nothing is kept for
-- the many updates that do not matter here (album progress, sign-ins).
CREATE OR REPLACE FUNCTION photo_access_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('photo_access', TG_ARGV[0] || ':' || OLD.id::text);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_row_changed() IS 'NOTIFY photo_access KIND:id for one row (KIND is the trigger argument).';
DROP TRIGGER IF EXISTS photo_access_users_disabled ON users;
CREATE TRIGGER photo_access_users_disabled AFTER UPDATE OF disabled_at ON users
    FOR EACH ROW WHEN (NEW.disabled_at IS NOT NULL AND OLD.disabled_at IS NULL) EXECUTE FUNCTION photo_access_row_changed('u');

CREATE OR REPLACE FUNCTION photo_access_pins_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('p', ARRAY(SELECT id::text FROM gone));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_pins_deleted() IS 'A deleted pin loses its photos on every instance.';
DROP TRIGGER IF EXISTS photo_access_pins_deleted ON pins;
CREATE TRIGGER photo_access_pins_deleted AFTER DELETE ON pins
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_pins_deleted();
DROP TRIGGER IF EXISTS photo_access_pins_changed ON pins;
CREATE TRIGGER photo_access_pins_changed AFTER UPDATE OF generation, user_id ON pins
    FOR EACH ROW WHEN (NEW.generation IS DISTINCT FROM OLD.generation OR NEW.user_id IS DISTINCT FROM OLD.user_id)
    EXECUTE FUNCTION photo_access_row_changed('p');

CREATE OR REPLACE FUNCTION photo_access_photos_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('ph', ARRAY(SELECT id::text FROM gone WHERE status = 'ready'));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION photo_access_photos_deleted() IS 'A deleted ready photo is dropped from the photo cache of every instance.';
DROP TRIGGER IF EXISTS photo_access_photos_deleted ON photos;
CREATE TRIGGER photo_access_photos_deleted AFTER DELETE ON photos
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION photo_access_photos_deleted();
-- Only a ready photo is ever cached; its blobs or owner changing afterwards is rare.
DROP TRIGGER IF EXISTS photo_access_photos_changed ON photos;
CREATE TRIGGER photo_access_photos_changed AFTER UPDATE ON photos
    FOR EACH ROW WHEN (OLD.status = 'ready' AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.hash IS DISTINCT FROM OLD.hash
                       OR NEW.thumb_256 IS DISTINCT FROM OLD.thumb_256 OR NEW.thumb_512 IS DISTINCT FROM OLD.thumb_512
                       OR NEW.user_id IS DISTINCT FROM OLD.user_id OR NEW.pin_id IS DISTINCT FROM OLD.pin_id))
    EXECUTE FUNCTION photo_access_row_changed('ph');
