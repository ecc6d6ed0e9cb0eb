-- A person's own photos on the map (issue "your own photos on the map"): files they bring in,
-- kept beside the provider's album of the pin they join. Apart from `photos` on purpose: New
-- Collection, Retry and the photo retention never touch them (docs/architecture.md, "Own photos").
-- The bytes are blobs in the photo store, named by SHA-256 like the provider's: the original byte
-- for byte (its location with it, served only to who may download it), and the versions made of
-- it without any metadata (the display version and the thumbnails everyone else is served).
CREATE TABLE own_photos (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pin_id         bigint NOT NULL,
    user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_by       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    file_name      text NOT NULL CHECK (char_length(file_name) BETWEEN 1 AND 200),
    format         text NOT NULL CHECK (format IN ('jpeg', 'heif', 'png', 'webp')),
    original       bytea NOT NULL CHECK (octet_length(original) = 32),
    original_bytes bigint NOT NULL CHECK (original_bytes > 0),
    display        bytea NOT NULL CHECK (octet_length(display) = 32),
    thumb_256      bytea CHECK (octet_length(thumb_256) = 32),
    thumb_512      bytea CHECK (octet_length(thumb_512) = 32),
    byte_size      bigint NOT NULL CHECK (byte_size >= original_bytes),
    width          integer NOT NULL CHECK (width > 0),
    height         integer NOT NULL CHECK (height > 0),
    taken_local    timestamp,
    taken_offset   smallint CHECK (taken_offset BETWEEN -840 AND 840),
    lat            double precision CHECK (lat BETWEEN -90 AND 90),
    lon            double precision CHECK (lon BETWEEN -180 AND 180),
    camera         text CHECK (char_length(camera) <= 200),
    placed         text NOT NULL CHECK (placed IN ('file', 'person', 'estimated')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((lat IS NULL) = (lon IS NULL)),
    FOREIGN KEY (pin_id, user_id) REFERENCES pins (id, user_id) ON DELETE CASCADE,
    -- The same file twice on one pin is one photo.
    UNIQUE (pin_id, original)
);
CREATE INDEX own_photos_pin_id_idx ON own_photos (pin_id, taken_local);
CREATE INDEX own_photos_user_id_idx ON own_photos (user_id);
CREATE INDEX own_photos_added_by_idx ON own_photos (added_by);

COMMENT ON TABLE own_photos IS 'Photos people brought in themselves (not a provider''s), one row per photo and pin; deleted with the pin, the map or the person who added it.';
COMMENT ON COLUMN own_photos.id IS 'The photo''s id (/own-photos/ID).';
COMMENT ON COLUMN own_photos.pin_id IS 'The pin whose album shows it.';
COMMENT ON COLUMN own_photos.user_id IS 'Holder of the pin (a person, or a shared map): every query filters by it.';
COMMENT ON COLUMN own_photos.added_by IS 'The person who added it: their photo quota counts byte_size; they (and the map''s owners) may remove it.';
COMMENT ON COLUMN own_photos.file_name IS 'The file''s name as it was uploaded (shown to members, never used as a path).';
COMMENT ON COLUMN own_photos.format IS 'The original''s format, read from its first bytes.';
COMMENT ON COLUMN own_photos.original IS 'SHA-256 of the original file as uploaded (metadata and location included): a blob of the photo store.';
COMMENT ON COLUMN own_photos.original_bytes IS 'Size of the original.';
COMMENT ON COLUMN own_photos.display IS 'SHA-256 of the display version (JPEG, at most 2048 px, no metadata but its colour profile).';
COMMENT ON COLUMN own_photos.thumb_256 IS 'SHA-256 of the 256 px wide thumbnail (NULL: the display version is that small).';
COMMENT ON COLUMN own_photos.thumb_512 IS 'SHA-256 of the 512 px wide thumbnail (NULL: the display version is that small).';
COMMENT ON COLUMN own_photos.byte_size IS 'Bytes of the original and every version: what the quota counts.';
COMMENT ON COLUMN own_photos.width IS 'The original''s width as shown (after its orientation).';
COMMENT ON COLUMN own_photos.height IS 'The original''s height as shown.';
COMMENT ON COLUMN own_photos.taken_local IS 'When it was taken, on the camera''s clock (EXIF DateTimeOriginal); NULL: the file does not say.';
COMMENT ON COLUMN own_photos.taken_offset IS 'The camera clock''s offset from UTC in minutes (EXIF OffsetTimeOriginal); NULL: not written.';
COMMENT ON COLUMN own_photos.lat IS 'Where it was taken (EXIF GPS), degrees north; NULL: the file does not say. Never shown to anyone but who may download the original.';
COMMENT ON COLUMN own_photos.lon IS 'Where it was taken, degrees east.';
COMMENT ON COLUMN own_photos.camera IS 'The camera''s make and model as the file gives them.';
COMMENT ON COLUMN own_photos.placed IS 'How it came to its pin: file (its GPS), person (added to this pin by hand), estimated (beside the person''s photos taken minutes apart).';
COMMENT ON COLUMN own_photos.created_at IS 'When it was added.';

-- The admin view shows each person's own-photo bytes, and counts them in what the quota charges.
CREATE OR REPLACE VIEW admin_users AS
SELECT u.id, u.email, u.display_name, u.created_at, u.disabled_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = u.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = u.id) AS photos,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.user_id = u.id) AS photo_bytes,
       (SELECT max(s.last_seen_at) FROM sessions s WHERE s.user_id = u.id) AS last_seen_at,
       u.max_pins, u.max_collections_per_hour, u.max_photo_bytes,
       (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM pins p JOIN photos ph ON ph.pin_id = p.id
        WHERE coalesce(p.collected_by, p.dropped_by, p.user_id) = u.id AND ph.added_by IS NULL)
     + (SELECT coalesce(sum(coalesce(ph.byte_size, octet_length(ph.bytes))), 0) FROM photos ph WHERE ph.added_by = u.id)
     + (SELECT coalesce(sum(o.byte_size), 0)::bigint FROM own_photos o WHERE o.added_by = u.id) AS charged_bytes,
       (SELECT coalesce(sum(o.byte_size), 0)::bigint FROM own_photos o WHERE o.added_by = u.id) AS own_photo_bytes
FROM users u WHERE u.kind = 'person';
COMMENT ON COLUMN admin_users.charged_bytes IS 'Bytes of stored images charged to them on every map, their own and shared ones (QUOTA_PHOTO_MB and max_photo_bytes count these): a pin''s photos are charged to whoever last asked for its album, else who dropped it; a picked photo to who picked it; their own photos to them.';
COMMENT ON COLUMN admin_users.own_photo_bytes IS 'Bytes of the photos they brought in themselves, on every map (originals and versions).';
