-- Shared maps (docs/architecture.md, "Shared maps"; docs/admin.md, "Shared maps").
--
-- Every row of a map's data (pins, photos, album jobs, versions, share links, imports) carries the
-- id of the map's holder in user_id. A person's own map is held by the person; a shared map is held
-- by a users row of its own, kind 'map', which cannot sign in (no email, no password). So every
-- query keeps filtering by one holder as before, and who may reach a shared map's holder is decided
-- by map_members, checked in the statement that reads the session.
ALTER TABLE users ADD COLUMN kind text NOT NULL DEFAULT 'person' CHECK (kind IN ('person', 'map'));
ALTER TABLE users ALTER COLUMN email DROP NOT NULL;
ALTER TABLE users ADD CONSTRAINT users_email_only_people CHECK ((kind = 'person') = (email IS NOT NULL));
ALTER TABLE users ADD COLUMN shown_map bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE users ADD COLUMN editors_share boolean NOT NULL DEFAULT false;
COMMENT ON TABLE users IS 'People who can sign in (kind person) and the holders of shared maps (kind map, no email or password: they never sign in). Delete a row to delete the person or the map and everything it holds.';
COMMENT ON COLUMN users.kind IS 'person: an account; map: a shared map''s holder (display_name is the map''s name), its members in map_members.';
COMMENT ON COLUMN users.email IS 'Sign-in name, unique ignoring case; NULL for a shared map.';
COMMENT ON COLUMN users.editors_share IS 'A shared map''s: its editors may make share links too (owners always may).';
COMMENT ON COLUMN users.shown_map IS 'The shared map this person last switched to (NULL: their own map); ignored unless they are still a member.';

CREATE TABLE map_members (
    map_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
    added_at   timestamptz NOT NULL DEFAULT now(),
    center_lat double precision CHECK (center_lat BETWEEN -90 AND 90),
    center_lon double precision CHECK (center_lon BETWEEN -180 AND 180),
    zoom       double precision CHECK (zoom BETWEEN 0 AND 22),
    PRIMARY KEY (map_id, user_id),
    CHECK ((center_lat IS NULL) = (zoom IS NULL) AND (center_lon IS NULL) = (zoom IS NULL))
);
CREATE INDEX map_members_user_id_idx ON map_members (user_id);
COMMENT ON TABLE map_members IS 'Who may open each shared map, and as what. Delete a row to remove a member (they lose access at their next request). Keep at least one owner per map.';
COMMENT ON COLUMN map_members.map_id IS 'The shared map (users.id of kind map).';
COMMENT ON COLUMN map_members.user_id IS 'The member (users.id of kind person).';
COMMENT ON COLUMN map_members.role IS 'owner: members, roles, rename, delete, share links; editor: pins, albums, photos, import; viewer: look and download.';
COMMENT ON COLUMN map_members.added_at IS 'When they joined.';
COMMENT ON COLUMN map_members.center_lat IS 'Where this member left this map (NULL: never moved it), as map_regions for their own map.';
COMMENT ON COLUMN map_members.center_lon IS 'Longitude of that centre, degrees.';
COMMENT ON COLUMN map_members.zoom IS 'Zoom level of that view.';

CREATE TABLE map_invitations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    map_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash  bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
    role       text NOT NULL CHECK (role IN ('editor', 'viewer')),
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    used_by    bigint REFERENCES users (id) ON DELETE SET NULL,
    CHECK (used_by IS NULL OR used_at IS NOT NULL)
);
CREATE INDEX map_invitations_map_id_idx ON map_invitations (map_id);
COMMENT ON TABLE map_invitations IS 'Links that make a signed-in person a member of a shared map: single use, expiring. Delete a row to withdraw it.';
COMMENT ON COLUMN map_invitations.id IS 'Surrogate key.';
COMMENT ON COLUMN map_invitations.map_id IS 'The map it joins.';
COMMENT ON COLUMN map_invitations.code_hash IS 'sha256 of the code in the link (/maps/join/CODE); the code itself is never stored.';
COMMENT ON COLUMN map_invitations.role IS 'The role it gives.';
COMMENT ON COLUMN map_invitations.created_by IS 'The owner who made it.';
COMMENT ON COLUMN map_invitations.created_at IS 'When it was made.';
COMMENT ON COLUMN map_invitations.expires_at IS 'After this it lets nobody in.';
COMMENT ON COLUMN map_invitations.used_at IS 'When it was used (set: it cannot be used again).';
COMMENT ON COLUMN map_invitations.used_by IS 'Who joined with it.';

-- Who dropped each pin: pins count against the quota of the person who drops them, wherever.
ALTER TABLE pins ADD COLUMN dropped_by bigint REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX pins_dropped_by_idx ON pins (dropped_by);
COMMENT ON COLUMN pins.dropped_by IS 'The person who dropped or imported it (NULL once their account is deleted); their max_pins counts it.';

-- Who last asked for a pin's album (a New Collection, the drop itself): shown on the album.
ALTER TABLE pins ADD COLUMN collected_by bigint REFERENCES users (id) ON DELETE SET NULL;
COMMENT ON COLUMN pins.collected_by IS 'The person who last took a New Collection for it (NULL: the one who dropped it, or a deleted account).';

-- Each person's import preview is theirs, also on a shared map (two editors' uploads no longer
-- replace each other's, nor can one confirm the other's).
ALTER TABLE pin_imports ADD COLUMN imported_by bigint REFERENCES users (id) ON DELETE CASCADE;
COMMENT ON COLUMN pin_imports.imported_by IS 'Who uploaded it: only they see, confirm or cancel it (NULL: anyone who may change the map, as rows made before 1.1.0).';

-- The fair queue takes turns per person who asked, not per map.
ALTER TABLE album_jobs ADD COLUMN asked_by bigint REFERENCES users (id) ON DELETE SET NULL;
COMMENT ON COLUMN album_jobs.asked_by IS 'The person whose drop or New Collection made it (NULL: the map''s holder); the queue takes turns by this person.';

CREATE OR REPLACE VIEW admin_users AS
SELECT u.id, u.email, u.display_name, u.created_at, u.disabled_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = u.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = u.id) AS photos,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.user_id = u.id) AS photo_bytes,
       (SELECT max(s.last_seen_at) FROM sessions s WHERE s.user_id = u.id) AS last_seen_at,
       u.max_pins, u.max_collections_per_hour, u.max_photo_bytes
FROM users u WHERE u.kind = 'person';
COMMENT ON VIEW admin_users IS 'One row per person with what they hold on their own map (shared maps: admin_maps).';

CREATE VIEW admin_maps AS
SELECT m.id, m.display_name AS name, m.created_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = m.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = m.id) AS photos,
       (SELECT count(*) FROM map_members mm WHERE mm.map_id = m.id) AS members,
       (SELECT string_agg(o.email, ', ' ORDER BY o.email) FROM map_members mm JOIN users o ON o.id = mm.user_id
         WHERE mm.map_id = m.id AND mm.role = 'owner') AS owners
FROM users m WHERE m.kind = 'map';
COMMENT ON VIEW admin_maps IS 'One row per shared map: its name, what it holds, its members and owners'' emails.';
COMMENT ON COLUMN admin_maps.id IS 'The map (users.id of kind map; map_members.map_id).';
COMMENT ON COLUMN admin_maps.name IS 'Its name.';
COMMENT ON COLUMN admin_maps.created_at IS 'When it was made.';
COMMENT ON COLUMN admin_maps.pins IS 'Pins on it.';
COMMENT ON COLUMN admin_maps.photos IS 'Photo rows of its albums.';
COMMENT ON COLUMN admin_maps.members IS 'Members, owners included.';
COMMENT ON COLUMN admin_maps.owners IS 'The owners'' emails, comma-separated; NULL: it has none (docs/admin.md, Shared maps).';

-- A member removed loses the map's photos at once: their sessions' photo grants are dropped on
-- every instance (NOTIFY photo_access, as when a session is deleted; migration 0115).
-- A deleted account (its rows go by ON DELETE CASCADE) leaves no map behind without an owner: a
-- map that has no member left goes too; one left without an owner passes to its longest-standing
-- editor, else viewer. Removing a member any other way is the app's (or the administrator's) to
-- get right: the app refuses to remove the last owner.
CREATE FUNCTION map_members_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('s', ARRAY(SELECT encode(s.token_hash, 'hex') FROM sessions s
                                           WHERE s.user_id IN (SELECT user_id FROM gone)));
    DELETE FROM users m
    WHERE m.kind = 'map'
      AND m.id IN (SELECT g.map_id FROM gone g WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = g.user_id))
      AND NOT EXISTS (SELECT 1 FROM map_members c WHERE c.map_id = m.id);
    UPDATE map_members mm SET role = 'owner'
    FROM (SELECT DISTINCT ON (c.map_id) c.map_id, c.user_id FROM map_members c
          WHERE c.map_id IN (SELECT g.map_id FROM gone g WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = g.user_id))
            AND NOT EXISTS (SELECT 1 FROM map_members o WHERE o.map_id = c.map_id AND o.role = 'owner')
          ORDER BY c.map_id, CASE c.role WHEN 'editor' THEN 0 ELSE 1 END, c.added_at, c.user_id) heir
    WHERE mm.map_id = heir.map_id AND mm.user_id = heir.user_id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION map_members_gone() IS
    'Statement trigger: NOTIFY photo_access for removed members'' sessions; after an account is deleted, deletes its maps left without members and hands those left without an owner to their longest-standing member.';
CREATE TRIGGER map_members_gone AFTER DELETE ON map_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_members_gone();

-- admin_jobs names the person who asked, and the shared map the album is on.
CREATE OR REPLACE VIEW admin_jobs AS
SELECT j.id, concat_ws(' ', coalesce(a.email, u.email), CASE WHEN u.kind = 'map' THEN 'on map "' || u.display_name || '"' END) AS email,
       j.pin_id, p.place_name, j.kind, j.state, j.attempts, j.run_after, j.locked_by,
       j.locked_until, j.last_error, j.created_at, j.finished_at,
       (j.state = 'running' AND j.locked_until < now()) AS lease_expired,
       j.lapses, (j.state = 'failed' AND j.last_error LIKE 'parked:%') AS parked
FROM album_jobs j JOIN users u ON u.id = j.user_id JOIN pins p ON p.id = j.pin_id AND p.user_id = j.user_id
LEFT JOIN users a ON a.id = j.asked_by;
COMMENT ON COLUMN admin_jobs.email IS 'Who asked for the album (else whose map it is), and the shared map it is on.';

-- The switcher's list, kept on the person's row for the session's statement: a subquery there
-- (json_agg over map_members) cost every signed-in request about 6 % (script/bench shared).
ALTER TABLE users ADD COLUMN map_choices text;
COMMENT ON COLUMN users.map_choices IS 'The shared maps this person belongs to, as the switcher lists them (JSON: id, name, role); kept by triggers on map_members and on maps'' names. NULL: none.';
CREATE FUNCTION map_choices_refresh(people bigint[]) RETURNS void LANGUAGE sql AS $$
    UPDATE users u SET map_choices = (
        SELECT json_agg(json_build_object('id', c.map_id, 'name', m.display_name, 'role', c.role)
                        ORDER BY lower(m.display_name), c.map_id)::text
        FROM map_members c JOIN users m ON m.id = c.map_id WHERE c.user_id = u.id)
    WHERE u.id = ANY(people) AND u.kind = 'person';
$$;
COMMENT ON FUNCTION map_choices_refresh(bigint[]) IS 'Rebuilds users.map_choices for these people.';
CREATE FUNCTION map_choices_members_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM map_choices_refresh(ARRAY(SELECT user_id FROM added));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM map_choices_refresh(ARRAY(SELECT user_id FROM gone));
    ELSE
        PERFORM map_choices_refresh(ARRAY(SELECT user_id FROM added UNION SELECT user_id FROM gone));
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION map_choices_members_changed() IS 'Statement trigger: members added, removed or given another role get their switcher''s list rebuilt.';
CREATE TRIGGER map_choices_members_added AFTER INSERT ON map_members
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION map_choices_members_changed();
CREATE TRIGGER map_choices_members_gone AFTER DELETE ON map_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_choices_members_changed();
CREATE TRIGGER map_choices_members_changed AFTER UPDATE ON map_members
    REFERENCING NEW TABLE AS added OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_choices_members_changed();
CREATE FUNCTION map_choices_map_renamed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM map_choices_refresh(ARRAY(SELECT user_id FROM map_members WHERE map_id = NEW.id));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION map_choices_map_renamed() IS 'Row trigger: a shared map renamed rebuilds its members'' switcher lists.';
CREATE TRIGGER map_choices_map_renamed AFTER UPDATE OF display_name ON users
    FOR EACH ROW WHEN (NEW.kind = 'map' AND OLD.display_name IS DISTINCT FROM NEW.display_name)
    EXECUTE FUNCTION map_choices_map_renamed();

-- Everyone's existing pins were dropped by them. Last: the UPDATE leaves pins with pending
-- (deferred) trigger events, after which no DDL may touch the table in this transaction.
UPDATE pins SET dropped_by = user_id;
