-- An album's rows took 27–29 KB in the database (script/bench albums), above the 20 KB of metadata
-- an album should cost. Measured per photo: the row 479 bytes, the (pin_id, provider, remote_id)
-- key 108 and (user_id, pin_id, position) 77 bytes of index. This migration takes out what no
-- reader needs (one table rewrite):
-- * hash, thumb_256 and thumb_512 as the 32 bytes of the SHA-256 rather than 64 hex characters
--   (65 bytes each); readers get hex back with encode(…, 'hex').
-- * remote_url only while the image is still to download (only the downloader reads it); a ready
--   photo's row keeps page_url for attribution.
-- * The licence once in photo_licenses rather than its name and URL in every row (68 bytes):
--   photos name one of a handful (Flickr has a dozen).
-- * The album key by a 64-bit hash of (provider, remote_id) instead of the text itself. Two
--   different photos of one pin would have to share those 64 bits to be taken for one
--   (odds of about n²/2⁶⁵ for n photos on a pin).
-- * (user_id) alone instead of (user_id, pin_id, position): the per-person sums (quota,
--   admin_users) and the users foreign key need user_id only, albums are read by
--   (pin_id, generation) and sorted (30 rows), and a one-column index is deduplicated.

CREATE TABLE IF NOT EXISTS photo_licenses (
    id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    url  text NOT NULL DEFAULT '',
    UNIQUE (name, url)
);
COMMENT ON TABLE photo_licenses IS 'Each licence photos are credited under, once (name and link as the provider gave them). Rows are only added.';
COMMENT ON COLUMN photo_licenses.id IS 'Licence number, as in photos.license_id.';
COMMENT ON COLUMN photo_licenses.name IS 'Licence name shown in the credit (empty when the provider gave none).';
COMMENT ON COLUMN photo_licenses.url IS 'Link to the licence text; empty when there is none.';
INSERT INTO photo_licenses (name, url)
SELECT DISTINCT license, coalesce(license_url, '') FROM photos
ON CONFLICT (name, url) DO NOTHING;
-- No foreign key: its check would be one more lookup per photo inserted, and nothing removes a
-- licence (readers LEFT JOIN, so a row removed by hand shows no licence rather than no photo).
ALTER TABLE photos ADD COLUMN IF NOT EXISTS license_id integer;
UPDATE photos ph SET license_id = l.id FROM photo_licenses l WHERE l.name = ph.license AND l.url = coalesce(ph.license_url, '');
-- The dropped columns and the UPDATE's old row versions go in the rewrite below.
ALTER TABLE photos DROP COLUMN license, DROP COLUMN license_url;
COMMENT ON COLUMN photos.license_id IS 'Licence it is credited under (photo_licenses); NULL: none given.';

ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_hash_check;
ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_thumb_256_check;
ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_thumb_512_check;
ALTER TABLE photos
    ALTER COLUMN hash TYPE bytea USING decode(hash, 'hex'),
    ALTER COLUMN thumb_256 TYPE bytea USING decode(thumb_256, 'hex'),
    ALTER COLUMN thumb_512 TYPE bytea USING decode(thumb_512, 'hex'),
    ALTER COLUMN remote_url DROP NOT NULL,
    -- Same type: the USING makes it part of the one rewrite, so ready rows lose the URL without
    -- an UPDATE leaving a dead copy of every row behind.
    ALTER COLUMN remote_url TYPE text USING CASE WHEN status = 'ready' THEN NULL ELSE remote_url END;
ALTER TABLE photos ADD CONSTRAINT photos_hash_check CHECK (octet_length(hash) = 32);
ALTER TABLE photos ADD CONSTRAINT photos_thumb_256_check CHECK (octet_length(thumb_256) = 32);
ALTER TABLE photos ADD CONSTRAINT photos_thumb_512_check CHECK (octet_length(thumb_512) = 32);
ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_pending_has_url;
ALTER TABLE photos ADD CONSTRAINT photos_pending_has_url CHECK (status <> 'pending' OR remote_url IS NOT NULL);

ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_pin_id_provider_remote_id_key;
CREATE UNIQUE INDEX IF NOT EXISTS photos_pin_remote_key ON photos (pin_id, hashtextextended(provider || ' ' || remote_id, 0));
DROP INDEX IF EXISTS photos_user_pin_position_idx;
CREATE INDEX IF NOT EXISTS photos_user_id_idx ON photos (user_id);

COMMENT ON COLUMN photos.hash IS 'SHA-256 of the image bytes (32 bytes; the photo store names the blob by its hex), NULL until downloaded.';
COMMENT ON COLUMN photos.thumb_256 IS 'SHA-256 of the 256 px wide JPEG copy in the photo store; NULL: none (the original serves that width).';
COMMENT ON COLUMN photos.thumb_512 IS 'SHA-256 of the 512 px wide JPEG copy in the photo store; NULL: none (the original serves that width).';
COMMENT ON COLUMN photos.remote_url IS 'Image URL to download from; NULL once the photo is ready (only the download reads it).';
