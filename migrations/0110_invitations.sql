-- Invitations for SIGN_UP=invite (the default): single-use, expiring codes an administrator makes
-- with `virtual-tourist admin invite` or the SQL in docs/admin.md. Only the code's SHA-256 is
-- stored, like session tokens, so a leaked table lets nobody in.
CREATE TABLE invitations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code_hash   bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
    note        text CHECK (length(note) <= 200),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    used_by     bigint REFERENCES users (id) ON DELETE SET NULL,
    CHECK (used_by IS NULL OR used_at IS NOT NULL)
);

COMMENT ON TABLE invitations IS 'Sign-up invitations (SIGN_UP=invite): each lets one person create an account before it expires. Delete a row to withdraw it.';
COMMENT ON COLUMN invitations.id IS 'Surrogate key.';
COMMENT ON COLUMN invitations.code_hash IS 'sha256 of the code in the link (/sign-up?invite=CODE); the code itself is never stored.';
COMMENT ON COLUMN invitations.note IS 'Who it was meant for, for the administrator (optional).';
COMMENT ON COLUMN invitations.created_at IS 'When it was made.';
COMMENT ON COLUMN invitations.expires_at IS 'After this it signs nobody up.';
COMMENT ON COLUMN invitations.used_at IS 'When an account was made with it (set: it cannot be used again).';
COMMENT ON COLUMN invitations.used_by IS 'The account made with it (NULL once that account is deleted).';
