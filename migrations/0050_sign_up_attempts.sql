-- Sign-ups per client address, so one address cannot create accounts without end (each costs a
-- password hash and a row). One row per address, counted in a single upsert.
CREATE TABLE sign_up_attempts (
    client_address text PRIMARY KEY,
    attempts       integer NOT NULL,
    window_start   timestamptz NOT NULL,
    attempted_at   timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE sign_up_attempts IS 'Sign-up attempts per client address in the current hour; past 10 the address waits for the next hour. Safe to empty.';
COMMENT ON COLUMN sign_up_attempts.client_address IS 'The address the attempts came from (the client behind a trusted proxy).';
COMMENT ON COLUMN sign_up_attempts.attempts IS 'Attempts since window_start.';
COMMENT ON COLUMN sign_up_attempts.window_start IS 'Start of the hour being counted.';
COMMENT ON COLUMN sign_up_attempts.attempted_at IS 'The latest attempt; rows a day old are deleted as new ones arrive.';

COMMENT ON TABLE sign_in_failures IS 'One row per failed sign-in (counted when attempted, removed on success). Past 5 in an hour for an email from one address, each attempt waits twice as long as the last (up to 15 minutes); past 50 from one address across emails, the same. Safe to empty: DELETE FROM sign_in_failures lifts every wait.';
