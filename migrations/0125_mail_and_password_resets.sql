-- Mail through an SMTP server, and password resets by mail (issue 50; docs/architecture.md, "Mail").
--
-- mail_outbox is the queue: a request that sends mail only adds a row in its own transaction (so a
-- mail server that is down blocks no request and loses no mail); the app's mail sender takes due
-- rows with FOR UPDATE SKIP LOCKED (one instance per row), and pushes next_attempt_at forward
-- before it tries, so a sender killed mid-send tries again later rather than never. A sent mail's
-- body is emptied: a reset link is not kept once delivered.
CREATE TABLE mail_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('password_reset', 'map_invitation')),
    to_address      text NOT NULL CHECK (octet_length(to_address) <= 1000),
    subject         text NOT NULL,
    body            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    discard_after   timestamptz NOT NULL,
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      text,
    sent_at         timestamptz,
    failed_at       timestamptz
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;
COMMENT ON TABLE mail_outbox IS 'Mail waiting to be sent, and what became of it (kept 30 days). Delete a row to drop a mail.';
COMMENT ON COLUMN mail_outbox.id IS 'Surrogate key, also the order mail is sent in.';
COMMENT ON COLUMN mail_outbox.kind IS 'What it is: password_reset or map_invitation.';
COMMENT ON COLUMN mail_outbox.to_address IS 'The recipient.';
COMMENT ON COLUMN mail_outbox.subject IS 'Its subject.';
COMMENT ON COLUMN mail_outbox.body IS 'Its text; emptied once sent or given up (a reset link is not kept).';
COMMENT ON COLUMN mail_outbox.created_at IS 'When it was queued.';
COMMENT ON COLUMN mail_outbox.next_attempt_at IS 'Not tried before this (pushed forward before each try: the backoff).';
COMMENT ON COLUMN mail_outbox.discard_after IS 'Not sent after this (a reset link that has expired is not worth sending); then failed.';
COMMENT ON COLUMN mail_outbox.attempts IS 'Tries so far.';
COMMENT ON COLUMN mail_outbox.last_error IS 'What the mail server (or the connection) said at the last failed try.';
COMMENT ON COLUMN mail_outbox.sent_at IS 'When the mail server accepted it.';
COMMENT ON COLUMN mail_outbox.failed_at IS 'When it was given up: refused for good, past discard_after, or too many tries.';

CREATE TABLE password_resets (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX password_resets_user_id_idx ON password_resets (user_id, created_at);
COMMENT ON TABLE password_resets IS 'Password reset links sent by mail: single use, short-lived; a reset ends every session of the account.';
COMMENT ON COLUMN password_resets.id IS 'Surrogate key.';
COMMENT ON COLUMN password_resets.user_id IS 'The account whose password the link resets.';
COMMENT ON COLUMN password_resets.token_hash IS 'sha256 of the token in the link (/reset-password/TOKEN); the token itself is never stored.';
COMMENT ON COLUMN password_resets.created_at IS 'When it was asked for (at most 3 an hour per account count).';
COMMENT ON COLUMN password_resets.expires_at IS 'After this the link resets nothing.';
COMMENT ON COLUMN password_resets.used_at IS 'When it was used (set: it resets nothing more).';
