-- The album queue serves people in turn: the person whose job was claimed least recently goes
-- first, so one person's 500 queued pins never hold back another person's first album.
CREATE TABLE IF NOT EXISTS queue_turns (
    user_id   bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    served_at timestamptz NOT NULL
);
COMMENT ON TABLE queue_turns IS 'When each person''s album job was last claimed by a worker; the queue takes the person served least recently first. Safe to empty.';
COMMENT ON COLUMN queue_turns.user_id IS 'The person.';
COMMENT ON COLUMN queue_turns.served_at IS 'When a worker last claimed one of their jobs.';

-- A photo's status changes as it downloads (pending → ready/failed). With status in an index, not one
-- of those updates was HOT (0 of 600 measured): every one wrote index entries and left dead ones.
-- Without it, and with room left on each page, the row is updated in place.
DROP INDEX IF EXISTS photos_pin_generation_idx;
CREATE INDEX IF NOT EXISTS photos_pin_generation_idx ON photos (pin_id, generation);
ALTER TABLE photos SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE album_jobs SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE pins SET (fillfactor = 90);
