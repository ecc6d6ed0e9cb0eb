-- Backups script/backup completed (docs/admin.md, Backups): it adds a row at the end of each, and
-- /metrics shows the newest as vt_backup_last_success_timestamp_seconds, so a backup that stopped
-- running is seen (an alert on its age) even where the script's own failure went unnoticed.
CREATE TABLE IF NOT EXISTS backups (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    finished_at    timestamptz NOT NULL DEFAULT now(),
    name           text NOT NULL CHECK (name <> ''),
    seconds        integer NOT NULL CHECK (seconds >= 0),
    photos_named   integer NOT NULL CHECK (photos_named >= 0),
    photos_missing integer NOT NULL DEFAULT 0 CHECK (photos_missing >= 0),
    photos_copied  boolean NOT NULL
);
CREATE INDEX IF NOT EXISTS backups_finished_at ON backups (finished_at);
COMMENT ON TABLE backups IS 'One row per backup script/backup completed and kept (exit status 0 or 3), written by the script at its end; /metrics reports the newest (vt_backup_last_success_timestamp_seconds).';
COMMENT ON COLUMN backups.id IS 'Row number.';
COMMENT ON COLUMN backups.finished_at IS 'When the backup was complete (its folder named).';
COMMENT ON COLUMN backups.name IS 'The backup folder''s name, virtual-tourist-YYYYMMDDTHHMMSSZ.';
COMMENT ON COLUMN backups.seconds IS 'How long the backup took.';
COMMENT ON COLUMN backups.photos_named IS 'Distinct blobs (photos and thumbnails) the dump names.';
COMMENT ON COLUMN backups.photos_missing IS 'Blobs the dump names that the store no longer had (named in the backup''s manifest; exit status 3).';
COMMENT ON COLUMN backups.photos_copied IS 'False when the photos live in an object store (PHOTO_STORE=s3://…) and were left for the operator to copy.';
