-- Map versions that never repeat (docs/architecture.md, "The map page kept per person").
--
-- A kept map page is served while the person's version equals the one it was rendered with, so a
-- version must never come back with other pins behind it. Counters did: emptying the table, a restore
-- of an older dump, a point-in-time recovery or a lagging replica moved a counter back, and the next
-- changes counted up through the same numbers to the kept page's key. A version is now the database
-- clock in microseconds (and at least the last one plus one), so a later state always has a later
-- number whatever happened to the table; a restored state keeps the number it had, which names that
-- very state. TRUNCATE, which fires no row triggers, moves everyone's version too.
--
-- The foreign key to users goes: inserting a person's first row made PostgreSQL take a KEY SHARE
-- lock on their users row, at commit, while POST /pins holds that row FOR UPDATE for the pin quota —
-- a worker's batch and a pin drop of the same person then waited on each other and one was aborted
-- as a deadlock. A row of a deleted person is removed by a trigger on users instead.
ALTER TABLE map_versions DROP CONSTRAINT IF EXISTS map_versions_user_id_fkey;
COMMENT ON TABLE map_versions IS 'A version per person, moved on by triggers whenever their pins or pin photo counts change; pages the app keeps in memory are valid while it stands. Values come from the clock and never repeat, so emptying the table or restoring an older copy never brings back a kept page.';
COMMENT ON COLUMN map_versions.version IS 'Microseconds since 1970 when their map last changed (at least the previous value plus one); compared for equality only.';

-- The version a change gets: now, or one past the last if the clock has not moved past it.
CREATE OR REPLACE FUNCTION map_versions_next(previous bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT greatest(coalesce(previous, 0) + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
$$;

-- A plain read of users (no lock): a person deleted meanwhile leaves at most a row nobody reads.
CREATE OR REPLACE FUNCTION map_versions_bump(person bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO map_versions AS v (user_id, version)
    SELECT u.id, map_versions_next(NULL) FROM users u WHERE u.id = person
    ON CONFLICT (user_id) DO UPDATE SET version = map_versions_next(v.version);
END
$$;

-- Everyone's version, rows missing included (the admin recipe in docs/admin.md, TRUNCATE).
CREATE OR REPLACE FUNCTION map_versions_move_all() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO map_versions AS v (user_id, version)
    SELECT u.id, map_versions_next(NULL) FROM users u
    ON CONFLICT (user_id) DO UPDATE SET version = map_versions_next(v.version);
END
$$;

CREATE OR REPLACE FUNCTION map_versions_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM map_versions_move_all();
    RETURN NULL;
END
$$;

-- TRUNCATE fires statement triggers only (also on the tables a CASCADE empties).
DROP TRIGGER IF EXISTS map_versions_pins_truncated ON pins;
CREATE TRIGGER map_versions_pins_truncated AFTER TRUNCATE ON pins
    FOR EACH STATEMENT EXECUTE FUNCTION map_versions_truncated();
DROP TRIGGER IF EXISTS map_versions_counts_truncated ON pin_photo_counts;
CREATE TRIGGER map_versions_counts_truncated AFTER TRUNCATE ON pin_photo_counts
    FOR EACH STATEMENT EXECUTE FUNCTION map_versions_truncated();
DROP TRIGGER IF EXISTS map_versions_truncated ON map_versions;
CREATE TRIGGER map_versions_truncated AFTER TRUNCATE ON map_versions
    FOR EACH STATEMENT EXECUTE FUNCTION map_versions_truncated();

-- Emptying pins empties their cells too (they are counts of pins; 0093's triggers are per row
-- set, and TRUNCATE fires none of them): the map would go on counting pins that are gone.
CREATE OR REPLACE FUNCTION pin_cells_pins_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pin_cells;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS pin_cells_pins_truncated ON pins;
CREATE TRIGGER pin_cells_pins_truncated AFTER TRUNCATE ON pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_cells_pins_truncated();

-- What ON DELETE CASCADE did: a deleted person's version goes with them.
CREATE OR REPLACE FUNCTION map_versions_users_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM map_versions v USING gone WHERE v.user_id = gone.id;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS map_versions_users_deleted ON users;
CREATE TRIGGER map_versions_users_deleted AFTER DELETE ON users
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_versions_users_deleted();
CREATE OR REPLACE FUNCTION map_versions_users_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM map_versions;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS map_versions_users_truncated ON users;
CREATE TRIGGER map_versions_users_truncated AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION map_versions_users_truncated();

-- Everyone starts on the clock, so no version from the old counters is ever given again.
SELECT map_versions_move_all();
