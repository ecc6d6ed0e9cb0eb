-- A share link shows the map's own photos (people's, not the provider's) only when its maker
-- ticked so: they are private to the map's members by default (docs/architecture.md, "Own
-- photos"). A visitor is served their display versions and thumbnails, never an original.
ALTER TABLE share_links ADD COLUMN own_photos boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN share_links.own_photos IS 'Also show the map''s own photos (display versions and thumbnails, which carry no location; never the originals); false: only the provider''s photos.';
