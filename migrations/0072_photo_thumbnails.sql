-- Thumbnails made at download (PhotoStore/Thumbnailer), kept in the photo store beside the
-- original: the hashes of the 256 px and 512 px wide JPEGs. NULL: none (not a JPEG, or the
-- original is no wider), so /photos/ID?w= serves the original.
-- 0060 kept thumbnails' bytes in these columns; they now name blobs in the store instead (the
-- bytes-in-rows thumbnails are dropped: old photos serve their original until a New Collection).
ALTER TABLE photos DROP COLUMN IF EXISTS thumb_256;
ALTER TABLE photos DROP COLUMN IF EXISTS thumb_512;
ALTER TABLE photos ADD COLUMN IF NOT EXISTS thumb_256 text CHECK (thumb_256 ~ '^[0-9a-f]{64}$');
ALTER TABLE photos ADD COLUMN IF NOT EXISTS thumb_512 text CHECK (thumb_512 ~ '^[0-9a-f]{64}$');
COMMENT ON COLUMN photos.thumb_256 IS 'SHA-256 of the 256 px wide JPEG thumbnail in the photo store, if any.';
COMMENT ON COLUMN photos.thumb_512 IS 'SHA-256 of the 512 px wide JPEG thumbnail in the photo store, if any.';
