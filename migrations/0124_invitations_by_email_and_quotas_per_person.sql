-- Consent and quotas per person on shared maps (issue 50; docs/architecture.md, "Shared maps").
--
-- Adding someone by email no longer makes them a member: it records an invitation for the
-- address, bound to the account that has the address at that moment (invitee_id), which that
-- account accepts or declines in the app. Addresses are not verified, so an account made later
-- with the address never inherits it. The row is recorded whether or not an account has the
-- address (then invitee_id is NULL and nobody can accept it), so neither the answer nor the
-- owners' list tells who has an account. A person may block a map's owners from inviting them
-- again; a blocked invitation is recorded the same and never shown to them.
ALTER TABLE map_invitations ADD COLUMN invitee_email text CHECK (invitee_email IS NULL OR invitee_email = lower(invitee_email));
ALTER TABLE map_invitations ADD COLUMN invitee_id bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE map_invitations ADD CONSTRAINT map_invitations_invitee_needs_email CHECK (invitee_id IS NULL OR invitee_email IS NOT NULL);
COMMENT ON COLUMN map_invitations.invitee_email IS 'For an invitation by email: the address it was made for, lower(); shown to the owners. NULL: an invitation link, for whoever opens it.';
COMMENT ON COLUMN map_invitations.invitee_id IS 'For an invitation by email: the account that had the address when it was made, the only one that may accept it; NULL with an address: no account had it (or it was deleted), nobody can accept it.';
-- One open invitation per address and map: inviting again replaces it (SharedMaps.inviteByEmail).
CREATE UNIQUE INDEX map_invitations_one_per_invitee ON map_invitations (map_id, invitee_email)
    WHERE invitee_email IS NOT NULL AND used_at IS NULL;
CREATE INDEX map_invitations_invitee_id_idx ON map_invitations (invitee_id) WHERE invitee_id IS NOT NULL AND used_at IS NULL;

CREATE TABLE map_invitation_blocks (
    person_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    map_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (person_id, map_id)
);
CREATE INDEX map_invitation_blocks_map_id_idx ON map_invitation_blocks (map_id);
COMMENT ON TABLE map_invitation_blocks IS 'People who declined a map''s invitation and asked not to be invited to it again: its invitations by email to them are recorded and never shown. Delete a row to lift the block.';
COMMENT ON COLUMN map_invitation_blocks.person_id IS 'The person who blocked the map.';
COMMENT ON COLUMN map_invitation_blocks.map_id IS 'The shared map whose owners may not invite them.';
COMMENT ON COLUMN map_invitation_blocks.created_at IS 'When they blocked it.';

CREATE TABLE invitations_sent (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invitations_sent_user_id_sent_at_idx ON invitations_sent (user_id, sent_at);
COMMENT ON TABLE invitations_sent IS 'One row per invitation by email a person made in the past hour (older rows are deleted as new ones are made): QUOTA_INVITATIONS_PER_HOUR counts them, withdrawn invitations included.';
COMMENT ON COLUMN invitations_sent.user_id IS 'The owner who made the invitation.';
COMMENT ON COLUMN invitations_sent.sent_at IS 'When.';

-- Quotas per person everywhere: a pin's photos count against the person who last asked for its
-- album (collected_by), else who dropped it, else the holder (a person's own map), except photos a
-- member picked into it, which count against that member (photos.added_by); a New Collection
-- against the person who asked (asked_by), else the holder.
CREATE INDEX pins_charged_to_idx ON pins ((coalesce(collected_by, dropped_by, user_id)));
ALTER TABLE photos ADD COLUMN added_by bigint REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX photos_added_by_idx ON photos (added_by) WHERE added_by IS NOT NULL;
COMMENT ON COLUMN photos.added_by IS 'The person who picked it into the album (the picker); their photo quota counts it. NULL: it came with the album, counted against whoever the pin''s album is charged to.';
CREATE INDEX album_jobs_charged_to_idx ON album_jobs ((coalesce(asked_by, user_id)), created_at) WHERE kind = 'collection';

-- The admin views show storage per person as the quota counts it, and per shared map.
CREATE OR REPLACE VIEW admin_users AS
SELECT u.id, u.email, u.display_name, u.created_at, u.disabled_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = u.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = u.id) AS photos,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.user_id = u.id) AS photo_bytes,
       (SELECT max(s.last_seen_at) FROM sessions s WHERE s.user_id = u.id) AS last_seen_at,
       u.max_pins, u.max_collections_per_hour, u.max_photo_bytes,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM pins p JOIN photos ph ON ph.pin_id = p.id
        WHERE coalesce(p.collected_by, p.dropped_by, p.user_id) = u.id AND ph.added_by IS NULL)
     + (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.added_by = u.id) AS charged_bytes
FROM users u WHERE u.kind = 'person';
COMMENT ON COLUMN admin_users.charged_bytes IS 'Bytes of stored images charged to them on every map, their own and shared ones (QUOTA_PHOTO_MB and max_photo_bytes count these): a pin''s photos are charged to whoever last asked for its album, else who dropped it; a picked photo to who picked it.';

CREATE OR REPLACE VIEW admin_maps AS
SELECT m.id, m.display_name AS name, m.created_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = m.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = m.id) AS photos,
       (SELECT count(*) FROM map_members mm WHERE mm.map_id = m.id) AS members,
       (SELECT string_agg(o.email, ', ' ORDER BY o.email) FROM map_members mm JOIN users o ON o.id = mm.user_id
         WHERE mm.map_id = m.id AND mm.role = 'owner') AS owners,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.user_id = m.id) AS photo_bytes
FROM users m WHERE m.kind = 'map';
COMMENT ON COLUMN admin_maps.photo_bytes IS 'Bytes of stored images of its albums (charged to its members: admin_users.charged_bytes).';
