-- Album rows hold metadata only (script/bench albums: database bytes per album). Two things cost
-- space and bought nothing:
-- * photos_pin_id_idx duplicates the leading column of photos_pin_generation_idx (pin_id,
--   generation) and of the (pin_id, provider, remote_id) key; either serves a lookup by pin, and
--   every placeholder and every non-HOT update wrote an entry into all three.
-- * thumbnail_url, the provider's small square, is read by the picker from the search answer,
--   never from a stored photo; placeholders no longer fill it (the column stays for old rows).
DROP INDEX IF EXISTS photos_pin_id_idx;
COMMENT ON COLUMN photos.thumbnail_url IS 'Unused since 0081 (the picker reads the provider''s answer); NULL in new rows.';
