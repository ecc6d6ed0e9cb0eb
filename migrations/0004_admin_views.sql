-- Views for administrators in psql: one line per person, one line per album job.
CREATE VIEW admin_users AS
SELECT u.id, u.email, u.display_name, u.created_at, u.disabled_at,
       (SELECT count(*) FROM pins p WHERE p.user_id = u.id) AS pins,
       (SELECT count(*) FROM photos ph WHERE ph.user_id = u.id) AS photos,
       (SELECT coalesce(sum(octet_length(ph.bytes)), 0) FROM photos ph WHERE ph.user_id = u.id) AS photo_bytes,
       (SELECT max(s.last_seen_at) FROM sessions s WHERE s.user_id = u.id) AS last_seen_at
FROM users u;

CREATE VIEW admin_jobs AS
SELECT j.id, u.email, j.pin_id, p.place_name, j.kind, j.state, j.attempts, j.run_after, j.locked_by,
       j.locked_until, j.last_error, j.created_at, j.finished_at,
       (j.state = 'running' AND j.locked_until < now()) AS lease_expired
FROM album_jobs j JOIN users u ON u.id = j.user_id JOIN pins p ON p.id = j.pin_id AND p.user_id = j.user_id;

COMMENT ON VIEW admin_users IS 'One row per person: their pins, photos and storage, and when they were last seen.';
COMMENT ON COLUMN admin_users.id IS 'users.id';
COMMENT ON COLUMN admin_users.email IS 'Sign-in email.';
COMMENT ON COLUMN admin_users.display_name IS 'Name shown in the app.';
COMMENT ON COLUMN admin_users.created_at IS 'When the account was made.';
COMMENT ON COLUMN admin_users.disabled_at IS 'Set: the account cannot sign in.';
COMMENT ON COLUMN admin_users.pins IS 'Pins on their map.';
COMMENT ON COLUMN admin_users.photos IS 'Photo rows (all states).';
COMMENT ON COLUMN admin_users.photo_bytes IS 'Bytes of stored images.';
COMMENT ON COLUMN admin_users.last_seen_at IS 'Latest activity of any of their sessions (renewed hourly).';
COMMENT ON VIEW admin_jobs IS 'Album jobs with their owner and place: what is queued, running, stuck (lease_expired) or failed and why.';
COMMENT ON COLUMN admin_jobs.id IS 'album_jobs.id';
COMMENT ON COLUMN admin_jobs.email IS 'Owner of the pin.';
COMMENT ON COLUMN admin_jobs.pin_id IS 'The pin whose album this fills.';
COMMENT ON COLUMN admin_jobs.place_name IS 'Where the pin is.';
COMMENT ON COLUMN admin_jobs.kind IS 'collection or photos.';
COMMENT ON COLUMN admin_jobs.state IS 'queued, running, done, failed or cancelled.';
COMMENT ON COLUMN admin_jobs.attempts IS 'Claims so far.';
COMMENT ON COLUMN admin_jobs.run_after IS 'Not before this time (retry backoff).';
COMMENT ON COLUMN admin_jobs.locked_by IS 'Worker holding it (host-pid-id/n).';
COMMENT ON COLUMN admin_jobs.locked_until IS 'Lease end; after it another worker may take the job.';
COMMENT ON COLUMN admin_jobs.last_error IS 'Why the last attempt failed.';
COMMENT ON COLUMN admin_jobs.created_at IS 'When it was queued.';
COMMENT ON COLUMN admin_jobs.finished_at IS 'When it ended.';
COMMENT ON COLUMN admin_jobs.lease_expired IS 'Running but its worker has gone quiet: it will be taken over.';
