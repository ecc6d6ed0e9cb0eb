-- Small copies of each JPEG for album tiles (Thumbnails.swift), made once at download: a tile
-- shows at about 170 CSS px, and loading the full photo for it cost an album page four times the
-- bytes. Like the photo itself they are compressed already: stored out of line, uncompressed.
ALTER TABLE photos ADD COLUMN IF NOT EXISTS thumb_256 bytea;
ALTER TABLE photos ADD COLUMN IF NOT EXISTS thumb_512 bytea;
ALTER TABLE photos ALTER COLUMN thumb_256 SET STORAGE EXTERNAL;
ALTER TABLE photos ALTER COLUMN thumb_512 SET STORAGE EXTERNAL;
COMMENT ON COLUMN photos.thumb_256 IS 'A JPEG at least 256 px wide (less than twice that) for album tiles; NULL when the photo is not a JPEG or is small already (the photo itself serves).';
COMMENT ON COLUMN photos.thumb_512 IS 'The same at least 512 px wide, for tiles on high-density screens.';
