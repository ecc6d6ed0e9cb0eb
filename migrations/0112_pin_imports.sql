-- Pin imports waiting for the person to confirm them (/import): the points read from an uploaded
-- GeoJSON, GPX or KML file, kept here between the preview and Confirm rather than in the page, so
-- the confirmed points are exactly the ones the server read and showed. One per person (a new
-- upload replaces the last); unconfirmed ones expire.
CREATE TABLE pin_imports (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    file_name   text NOT NULL CHECK (length(file_name) <= 200),
    format      text NOT NULL CHECK (format IN ('GeoJSON', 'GPX', 'KML')),
    contents    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

CREATE INDEX pin_imports_user ON pin_imports (user_id);

COMMENT ON TABLE pin_imports IS 'Imports of pins from a file, read and shown for confirmation; deleted when confirmed, cancelled, replaced or expired.';
COMMENT ON COLUMN pin_imports.id IS 'Surrogate key (in the preview''s address, always with the person''s id).';
COMMENT ON COLUMN pin_imports.user_id IS 'Who uploaded the file.';
COMMENT ON COLUMN pin_imports.file_name IS 'The uploaded file''s name, as the browser sent it (shown on the preview).';
COMMENT ON COLUMN pin_imports.format IS 'What the file was read as: GeoJSON, GPX or KML.';
COMMENT ON COLUMN pin_imports.contents IS 'The points read (name, lat, lon), the refused ones with their reasons, and notes.';
COMMENT ON COLUMN pin_imports.created_at IS 'When the file was uploaded.';
COMMENT ON COLUMN pin_imports.expires_at IS 'After this the preview is gone and the file must be uploaded again.';
