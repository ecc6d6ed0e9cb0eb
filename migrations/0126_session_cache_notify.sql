-- NOTIFY session_cache whenever something a signed-in request reads with its session changes, so
-- every instance drops the sessions it keeps in memory for it (docs/architecture.md, "Sessions kept
-- in memory"). What the session's statement reads (AccountStore.session): the session row, the
-- person's row, the shared map shown (its membership and its holder's row), the saved region and the
-- map's version. Payloads: u:ids (people or map holders whose kept sessions go), v:ids (map
-- holders whose version moved: their kept sessions forget the version), s:hashes (sessions by
-- token hash, hex), * (everything: a TRUNCATE). A deleted session or person is already announced
-- on photo_access (migrations 0115, 0116, 0120), which the cache hears too.
-- One chunking loop for both caches' notifications (photo_access since 0115, session_cache here).
CREATE OR REPLACE FUNCTION notify_ids(channel text, kind text, ids text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    chunk text;
BEGIN
    -- Chunks of 90 ids keep each payload far below NOTIFY's 8000 bytes (a hash is 64 characters).
    FOR chunk IN
        SELECT string_agg(id, ',') FROM (SELECT id, (row_number() OVER () - 1) / 90 AS n
                                         FROM (SELECT DISTINCT id FROM unnest(ids) AS id) d) c GROUP BY n
    LOOP
        PERFORM pg_notify(channel, kind || ':' || chunk);
    END LOOP;
END
$$;
COMMENT ON FUNCTION notify_ids(text, text, text[]) IS 'Sends NOTIFY CHANNEL KIND:id,id,… in chunks of 90 distinct ids.';

CREATE OR REPLACE FUNCTION photo_access_notify(kind text, ids text[]) RETURNS void LANGUAGE sql AS $$
    SELECT notify_ids('photo_access', kind, ids)
$$;
COMMENT ON FUNCTION photo_access_notify(text, text[]) IS 'Sends NOTIFY photo_access KIND:id,id,… in chunks of 90 distinct ids (the photo cache of every instance drops them).';

CREATE OR REPLACE FUNCTION session_cache_notify(kind text, ids text[]) RETURNS void LANGUAGE sql AS $$
    SELECT notify_ids('session_cache', kind, ids)
$$;
COMMENT ON FUNCTION session_cache_notify(text, text[]) IS 'Sends NOTIFY session_cache KIND:id,id,… in chunks of 90 distinct ids (every instance drops the sessions it keeps for them).';

-- One statement trigger function for every table: the argument names the table, and so the column
-- that says whose sessions are concerned (the token's hash for sessions, id for users, user_id for
-- the others). An UPDATE names the rows as they were too (`gone`): one that rewrites a session's
-- token_hash, or hands a region or a version row to another person, must reach the sessions kept
-- under the old value, not only those under the new one. A map's version moving is its own kind,
-- v: the sessions showing that map stay, only their version is forgotten (the next view renders
-- the page without reading the session again).
CREATE OR REPLACE FUNCTION session_cache_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kind text := CASE TG_ARGV[0] WHEN 'sessions' THEN 's' WHEN 'map_versions' THEN 'v' ELSE 'u' END;
BEGIN
    IF TG_ARGV[0] = 'sessions' THEN
        PERFORM session_cache_notify(kind, ARRAY(SELECT encode(token_hash, 'hex') FROM changed));
    ELSIF TG_ARGV[0] = 'users' THEN
        PERFORM session_cache_notify(kind, ARRAY(SELECT id::text FROM changed));
    ELSE
        PERFORM session_cache_notify(kind, ARRAY(SELECT user_id::text FROM changed));
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF TG_ARGV[0] = 'sessions' THEN
            PERFORM session_cache_notify(kind, ARRAY(SELECT encode(token_hash, 'hex') FROM gone
                                                     EXCEPT SELECT encode(token_hash, 'hex') FROM changed));
        ELSIF TG_ARGV[0] = 'users' THEN
            PERFORM session_cache_notify(kind, ARRAY(SELECT id::text FROM gone EXCEPT SELECT id::text FROM changed));
        ELSE
            PERFORM session_cache_notify(kind, ARRAY(SELECT user_id::text FROM gone EXCEPT SELECT user_id::text FROM changed));
        END IF;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION session_cache_rows_changed() IS
    'Statement trigger: NOTIFY session_cache for the rows a statement changed (the argument is the table).';

CREATE OR REPLACE FUNCTION session_cache_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('session_cache', '*');
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION session_cache_truncated() IS 'Statement trigger: NOTIFY session_cache * (every kept session goes) after a TRUNCATE.';

-- A transition table serves one event per trigger, so one trigger per event. The sessions' own
-- deletions are on photo_access; an update (a renewal, once per renewal interval, or an
-- administrator's) is here.
DROP TRIGGER IF EXISTS session_cache_sessions_updated ON sessions;
CREATE TRIGGER session_cache_sessions_updated AFTER UPDATE ON sessions
    REFERENCING NEW TABLE AS changed OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('sessions');
DROP TRIGGER IF EXISTS session_cache_users_updated ON users;
CREATE TRIGGER session_cache_users_updated AFTER UPDATE ON users
    REFERENCING NEW TABLE AS changed OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('users');

DROP TRIGGER IF EXISTS session_cache_regions_inserted ON map_regions;
CREATE TRIGGER session_cache_regions_inserted AFTER INSERT ON map_regions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_regions');
DROP TRIGGER IF EXISTS session_cache_regions_updated ON map_regions;
CREATE TRIGGER session_cache_regions_updated AFTER UPDATE ON map_regions
    REFERENCING NEW TABLE AS changed OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_regions');
DROP TRIGGER IF EXISTS session_cache_regions_deleted ON map_regions;
CREATE TRIGGER session_cache_regions_deleted AFTER DELETE ON map_regions
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_regions');

DROP TRIGGER IF EXISTS session_cache_members_inserted ON map_members;
CREATE TRIGGER session_cache_members_inserted AFTER INSERT ON map_members
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_members');
DROP TRIGGER IF EXISTS session_cache_members_updated ON map_members;
CREATE TRIGGER session_cache_members_updated AFTER UPDATE ON map_members
    REFERENCING NEW TABLE AS changed OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_members');
DROP TRIGGER IF EXISTS session_cache_members_deleted ON map_members;
CREATE TRIGGER session_cache_members_deleted AFTER DELETE ON map_members
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_members');

-- A map's version moved (a pin dropped by any member, a photo count changed, an administrator's
-- SQL): the sessions showing that map forget its version, so the next view renders the page (and
-- learns the version it read with the pins).
DROP TRIGGER IF EXISTS session_cache_versions_inserted ON map_versions;
CREATE TRIGGER session_cache_versions_inserted AFTER INSERT ON map_versions
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_versions');
DROP TRIGGER IF EXISTS session_cache_versions_updated ON map_versions;
CREATE TRIGGER session_cache_versions_updated AFTER UPDATE ON map_versions
    REFERENCING NEW TABLE AS changed OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION session_cache_rows_changed('map_versions');

DROP TRIGGER IF EXISTS session_cache_sessions_truncated ON sessions;
CREATE TRIGGER session_cache_sessions_truncated AFTER TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION session_cache_truncated();
DROP TRIGGER IF EXISTS session_cache_users_truncated ON users;
CREATE TRIGGER session_cache_users_truncated AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION session_cache_truncated();
DROP TRIGGER IF EXISTS session_cache_regions_truncated ON map_regions;
CREATE TRIGGER session_cache_regions_truncated AFTER TRUNCATE ON map_regions
    FOR EACH STATEMENT EXECUTE FUNCTION session_cache_truncated();
DROP TRIGGER IF EXISTS session_cache_members_truncated ON map_members;
CREATE TRIGGER session_cache_members_truncated AFTER TRUNCATE ON map_members
    FOR EACH STATEMENT EXECUTE FUNCTION session_cache_truncated();
