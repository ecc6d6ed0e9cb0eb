-- Provider outages are waited out (docs/providers.md, "Errors"): an album whose provider is down, or
-- asks us to wait, is queued again with backoff until the outage horizon (PROVIDER_OUTAGE_HOURS),
-- counted from the job's first failed call in a row. Before, it failed after five tries (about 40 s)
-- and the person had to press Retry on every album dropped during the outage.
ALTER TABLE album_jobs ADD COLUMN IF NOT EXISTS waiting_since timestamptz;
COMMENT ON COLUMN album_jobs.waiting_since IS 'When the provider calls of this job started failing or asking for waits (NULL once a call goes through); the job fails when this is older than the outage horizon.';
