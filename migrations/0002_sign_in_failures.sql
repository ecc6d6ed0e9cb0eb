-- Failed sign-ins, kept in the database so throttling holds across app instances and restarts.
-- Rows older than the throttling window are deleted by the app as it goes.
CREATE TABLE sign_in_failures (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email_key      text NOT NULL,
    client_address text NOT NULL,
    failed_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_failures_email_idx ON sign_in_failures (email_key, failed_at);
CREATE INDEX sign_in_failures_address_idx ON sign_in_failures (client_address, failed_at);

COMMENT ON TABLE sign_in_failures IS 'One row per failed sign-in; too many recent rows for an email or an address make sign-in wait. Safe to empty: DELETE FROM sign_in_failures lifts every lock-out.';
COMMENT ON COLUMN sign_in_failures.id IS 'Row number.';
COMMENT ON COLUMN sign_in_failures.email_key IS 'The email that was tried, lower-cased (whether or not such an account exists).';
COMMENT ON COLUMN sign_in_failures.client_address IS 'The address the attempt came from.';
COMMENT ON COLUMN sign_in_failures.failed_at IS 'When the attempt failed.';
