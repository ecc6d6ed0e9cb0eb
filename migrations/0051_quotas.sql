-- Quotas an administrator sets per person in SQL (docs/admin.md); NULL means the instance's
-- default (QUOTA_* settings). Stored bytes per photo become a column, so a person's total is a
-- sum of integers rather than a walk over every image's TOAST data.
ALTER TABLE users ADD COLUMN IF NOT EXISTS max_pins integer CHECK (max_pins >= 0);
ALTER TABLE users ADD COLUMN IF NOT EXISTS max_collections_per_hour integer CHECK (max_collections_per_hour >= 0);
ALTER TABLE users ADD COLUMN IF NOT EXISTS max_photo_bytes bigint CHECK (max_photo_bytes >= 0);

ALTER TABLE photos ADD COLUMN IF NOT EXISTS byte_size integer;
UPDATE photos SET byte_size = octet_length(bytes) WHERE bytes IS NOT NULL AND byte_size IS NULL;

CREATE OR REPLACE VIEW admin_users AS
SELECT u.id, u.email, u.display_name, u.created_at, u.disabled_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = u.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = u.id) AS photos,
       (SELECT coalesce(sum(ph.byte_size), 0) FROM photos ph WHERE ph.user_id = u.id) AS photo_bytes,
       (SELECT max(s.last_seen_at) FROM sessions s WHERE s.user_id = u.id) AS last_seen_at,
       u.max_pins, u.max_collections_per_hour, u.max_photo_bytes
FROM users u;

COMMENT ON COLUMN users.max_pins IS 'Most pins this person may have; NULL: the instance default (QUOTA_PINS).';
COMMENT ON COLUMN users.max_collections_per_hour IS 'New Collections (and retries) per hour; NULL: the instance default (QUOTA_COLLECTIONS_PER_HOUR).';
COMMENT ON COLUMN users.max_photo_bytes IS 'Stored image bytes past which no new album starts; NULL: the instance default (QUOTA_PHOTO_MB).';
COMMENT ON COLUMN photos.byte_size IS 'Size of the stored image in bytes (NULL until downloaded).';
COMMENT ON COLUMN admin_users.photo_bytes IS 'Bytes of stored images (sum of photos.byte_size).';
COMMENT ON COLUMN admin_users.max_pins IS 'users.max_pins (NULL: the default).';
COMMENT ON COLUMN admin_users.max_collections_per_hour IS 'users.max_collections_per_hour (NULL: the default).';
COMMENT ON COLUMN admin_users.max_photo_bytes IS 'users.max_photo_bytes (NULL: the default).';
