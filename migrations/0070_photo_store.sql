-- Photo bytes move out of the database into the photo store (docs/architecture.md, PhotoStore):
-- a row keeps the SHA-256 of its bytes (the blob's name) and their size. `bytes` stays until every
-- row is moved (AlbumStore.moveBytesToStore, run at start-up in batches), then 0071 drops it.
ALTER TABLE photos ADD COLUMN IF NOT EXISTS hash text CHECK (hash ~ '^[0-9a-f]{64}$');
ALTER TABLE photos ADD COLUMN IF NOT EXISTS byte_size integer;
-- A ready photo has its bytes somewhere: in the store (hash) or, until moved, in the row.
ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_check;
ALTER TABLE photos DROP CONSTRAINT IF EXISTS photos_ready_has_image;
ALTER TABLE photos ADD CONSTRAINT photos_ready_has_image
    CHECK (status <> 'ready' OR ((bytes IS NOT NULL OR hash IS NOT NULL) AND content_type IS NOT NULL));
-- No index on hash: the collector's mark reads every row's hash once an hour anyway, and an index
-- on a column the download sets would make that update non-HOT again (see 0080).
COMMENT ON COLUMN photos.hash IS 'SHA-256 (hex) of the image: its name in the photo store (PHOTO_STORE).';
COMMENT ON COLUMN photos.byte_size IS 'Size of the image in bytes.';
