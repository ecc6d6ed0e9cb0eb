-- Column comments that described an earlier shape of the code. Comments only: nothing else changes.
COMMENT ON COLUMN sessions.last_seen_at IS 'Last request, written at most once an hour (each write also pushes expires_at forward).';
COMMENT ON COLUMN photos.id IS 'Photo number, as in /photos/ID and /photos/ID/view.';
COMMENT ON COLUMN album_jobs.locked_by IS 'Worker holding the job (host-pid-instance/worker), as in admin_jobs.locked_by.';
COMMENT ON COLUMN pins.provider IS 'Not written by the app: each photo records where it came from in photos.provider.';
