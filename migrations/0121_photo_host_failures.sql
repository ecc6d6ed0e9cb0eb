-- One image its host keeps failing (503 every time) while the host serves the rest of the album: the
-- album's runs that ended with it the only one still failing are counted, and at the third it fails alone instead
-- of holding the album for the host's outage horizon (AlbumDownload, "one bad image").
ALTER TABLE photos ADD COLUMN IF NOT EXISTS host_failures smallint NOT NULL DEFAULT 0 CHECK (host_failures >= 0);
COMMENT ON COLUMN photos.host_failures IS 'Downloads of this pending photo that ended with its host failing it, and no other photo (5xx, a timeout, a wait named); at 3, with other photos of the album delivered, it fails alone.';
