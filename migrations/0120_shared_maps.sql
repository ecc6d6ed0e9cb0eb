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
COMMENT ON TABLE users IS 'People who can sign in (kind person) and the holders of shared maps (kind map, no email or password: they never sign in). Delete a row to delete the person or the map and everything it holds.';
COMMENT ON COLUMN users.kind IS 'person: an account; map: a shared map''s holder (display_name is the map''s name), its members in map_members.';
COMMENT ON COLUMN users.email IS 'Sign-in name, unique ignoring case; NULL for a shared map.';
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
UPDATE pins SET dropped_by = user_id;
-- The update queued map_versions_pins (a deferred constraint trigger, 0097) for every pin: run
-- them now, or the CREATE INDEX and ALTER TABLE on pins below fail with "pending trigger events".
SET CONSTRAINTS ALL IMMEDIATE;
CREATE INDEX pins_dropped_by_idx ON pins (dropped_by);
COMMENT ON COLUMN pins.dropped_by IS 'The person who dropped or imported it (NULL once their account is deleted); their max_pins counts it.';

-- Who last asked for a pin's album (a New Collection, the drop itself): shown on the album.
ALTER TABLE pins ADD COLUMN collected_by bigint REFERENCES users (id) ON DELETE SET NULL;
COMMENT ON COLUMN pins.collected_by IS 'The person who last took a New Collection for it (NULL: the one who dropped it, or a deleted account).';

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
COMMENT ON COLUMN admin_maps.id IS 'users.id of the map (kind map).';
COMMENT ON COLUMN admin_maps.name IS 'The map''s name (users.display_name).';
COMMENT ON COLUMN admin_maps.created_at IS 'When it was made.';
COMMENT ON COLUMN admin_maps.pins IS 'Pins on it.';
COMMENT ON COLUMN admin_maps.photos IS 'Photo rows on it.';
COMMENT ON COLUMN admin_maps.members IS 'Members, owners included.';
COMMENT ON COLUMN admin_maps.owners IS 'The owners'' emails, comma-separated.';

-- A member removed loses the map's photos at once: their sessions' photo grants are dropped on
-- every instance (NOTIFY photo_access, as when a session is deleted; migration 0115).
CREATE FUNCTION map_members_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM photo_access_notify('s', ARRAY(SELECT encode(s.token_hash, 'hex') FROM sessions s
                                           WHERE s.user_id IN (SELECT user_id FROM gone)));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION map_members_gone() IS
    'Statement trigger: NOTIFY photo_access s:hashes for the sessions of members removed from a shared map.';
CREATE TRIGGER map_members_gone AFTER DELETE ON map_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_members_gone();
