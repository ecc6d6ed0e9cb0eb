-- What the providers allow and what an album waits for (docs/providers.md): one token bucket per
-- provider key shared by every instance, and the fixed phrases an album shows while it waits or
-- after it failed.
CREATE TABLE provider_budgets (
    key               text PRIMARY KEY,
    capacity          double precision NOT NULL CHECK (capacity >= 1),
    refill_per_second double precision NOT NULL CHECK (refill_per_second > 0),
    tokens            double precision NOT NULL,
    refilled_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_until      timestamptz,
    pause_reason      text,
    last_problem      text,
    last_problem_at   timestamptz
);

COMMENT ON TABLE provider_budgets IS 'Call budget per photo provider key (token bucket), drawn from atomically by every instance before each API call. Delete a row to start its bucket full.';
COMMENT ON COLUMN provider_budgets.key IS 'flickr:<first 12 hex digits of SHA-256 of the API key> (the key itself is never stored), or commons.';
COMMENT ON COLUMN provider_budgets.capacity IS 'Most calls that may be made at once after a quiet spell (PROVIDER_CALL_BURST).';
COMMENT ON COLUMN provider_budgets.refill_per_second IS 'Calls earned per second (PROVIDER_CALLS_PER_HOUR / 3600).';
COMMENT ON COLUMN provider_budgets.tokens IS 'Calls left at refilled_at; each call takes one.';
COMMENT ON COLUMN provider_budgets.refilled_at IS 'When tokens was last brought up to date (database clock, shared by all instances).';
COMMENT ON COLUMN provider_budgets.paused_until IS 'No calls before this time: the provider named a wait (HTTP 429 Retry-After, ratelimited, maxlag).';
COMMENT ON COLUMN provider_budgets.pause_reason IS 'Why calls are paused: rate_limited or lagged.';
COMMENT ON COLUMN provider_budgets.last_problem IS 'The provider''s own words for the last failed call (for /readyz and the operator; never shown to people).';
COMMENT ON COLUMN provider_budgets.last_problem_at IS 'When last_problem happened.';

ALTER TABLE pins ADD COLUMN waiting text;
ALTER TABLE pins ADD COLUMN retryable boolean NOT NULL DEFAULT true;
COMMENT ON COLUMN pins.waiting IS 'While downloading: the fixed phrase saying what the album waits for and when it resumes; NULL when not waiting.';
COMMENT ON COLUMN pins.retryable IS 'False when a failure cannot be fixed by trying again (an invalid API key): the album page offers no Retry button.';
