-- A job whose worker dies while holding it is taken over when its lease lapses; one that takes its
-- worker down every time would be taken over forever. Each takeover is counted, and a job that
-- lapsed three times is parked: failed with Retry on the album, its reason in last_error.
ALTER TABLE album_jobs ADD COLUMN IF NOT EXISTS lapses integer NOT NULL DEFAULT 0 CHECK (lapses >= 0);
COMMENT ON COLUMN album_jobs.lapses IS 'Times the job was taken over after its lease lapsed (its worker died or hung holding it); at 3 it is parked (state failed, last_error says why).';
COMMENT ON COLUMN album_jobs.locked_until IS 'Lease end; the holder renews it every third of the lease while it works. After it another worker may take the job over.';
COMMENT ON COLUMN album_jobs.attempts IS 'Claims so far, less waits for an outage or a named wait and releases at shutdown; retried with backoff up to a maximum.';

CREATE OR REPLACE VIEW admin_jobs AS
SELECT j.id, u.email, j.pin_id, p.place_name, j.kind, j.state, j.attempts, j.run_after, j.locked_by,
       j.locked_until, j.last_error, j.created_at, j.finished_at,
       (j.state = 'running' AND j.locked_until < now()) AS lease_expired,
       j.lapses, (j.state = 'failed' AND j.last_error LIKE 'parked:%') AS parked
FROM album_jobs j JOIN users u ON u.id = j.user_id JOIN pins p ON p.id = j.pin_id AND p.user_id = j.user_id;
COMMENT ON COLUMN admin_jobs.lapses IS 'Times taken over after its worker went quiet; parked at 3.';
COMMENT ON COLUMN admin_jobs.parked IS 'Failed because its worker kept stopping while downloading it: look at the log around its claims; Retry on the album starts it again.';
