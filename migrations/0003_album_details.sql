-- What the album flow needs beyond the first schema: which result pages a pin has shown (so New
-- Collection picks one not yet seen), and the attribution and picker details of each photo.
ALTER TABLE pins ADD COLUMN shown_pages integer[] NOT NULL DEFAULT '{}';
ALTER TABLE photos ADD COLUMN thumbnail_url text;
ALTER TABLE photos ADD COLUMN date_taken text;
ALTER TABLE photos ADD COLUMN error text;
ALTER TABLE album_jobs ADD COLUMN finished_at timestamptz;

-- At most one live job per pin: a new collection cancels the old job in the same transaction.
CREATE UNIQUE INDEX album_jobs_one_live_per_pin ON album_jobs (pin_id) WHERE state IN ('queued', 'running');
CREATE INDEX photos_pin_generation_idx ON photos (pin_id, generation, status);

COMMENT ON COLUMN pins.shown_pages IS 'Result pages of the provider this pin''s albums have shown, so New Collection picks a page not yet seen.';
COMMENT ON COLUMN photos.thumbnail_url IS 'A small square version at the provider (for the picker).';
COMMENT ON COLUMN photos.date_taken IS 'When the photo was taken, as the provider says it.';
COMMENT ON COLUMN photos.error IS 'Why the download failed, when status = failed.';
COMMENT ON COLUMN album_jobs.finished_at IS 'When the job reached done, failed or cancelled.';
