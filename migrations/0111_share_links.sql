-- Share links (/s/TOKEN): an album, or a person's whole map, shown read-only to whoever has the
-- link. Only the token's SHA-256 is stored, like sessions and invitations, so a leaked table
-- opens no album; a password is kept as a crypt(3) hash like the account's.
CREATE TABLE share_links (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    pin_id         bigint REFERENCES pins (id) ON DELETE CASCADE,
    token_hash     bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    label          text NOT NULL DEFAULT '' CHECK (length(label) <= 100),
    password_hash  text CHECK (password_hash <> ''),
    hide_location  boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    revoked_at     timestamptz,
    CHECK (expires_at IS NULL OR expires_at > created_at)
);

-- The owner's list (every query names the owner), newest first.
CREATE INDEX share_links_owner_idx ON share_links (user_id, pin_id, id);

COMMENT ON TABLE share_links IS 'Share links: /s/TOKEN shows one album (pin_id set) or the owner''s whole map (pin_id NULL), read-only, to anyone with the link. Set revoked_at to withdraw one.';
COMMENT ON COLUMN share_links.id IS 'Surrogate key (the owner''s revoke form names it).';
COMMENT ON COLUMN share_links.user_id IS 'Owner: the person whose album or map the link shows.';
COMMENT ON COLUMN share_links.pin_id IS 'The shared album''s pin; NULL for a link to the owner''s whole map.';
COMMENT ON COLUMN share_links.token_hash IS 'sha256 of the token in the link (/s/TOKEN); the token itself is never stored.';
COMMENT ON COLUMN share_links.label IS 'The owner''s name for the link ("for Grandma"); also the preview title when set.';
COMMENT ON COLUMN share_links.password_hash IS 'crypt(3) hash of the link''s password; NULL: no password.';
COMMENT ON COLUMN share_links.hide_location IS 'Leave out coordinates, the small map and all but the country of the place name; strip image metadata.';
COMMENT ON COLUMN share_links.created_at IS 'When it was made.';
COMMENT ON COLUMN share_links.expires_at IS 'After this the link shows nothing; NULL: never expires.';
COMMENT ON COLUMN share_links.revoked_at IS 'When the owner withdrew it; set: the link shows nothing.';
