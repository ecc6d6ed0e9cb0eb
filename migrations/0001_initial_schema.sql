-- The data model of docs/architecture.md. Every row that belongs to a person carries user_id and is
-- deleted with that person (ON DELETE CASCADE), so "delete a user" is one DELETE. SQL is the admin
-- interface: every table and column says what it is (\d+ in psql shows it).

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text NOT NULL CHECK (length(email) BETWEEN 3 AND 320 AND position('@' IN email) > 1),
    display_name  text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 100),
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz
);
-- Case-insensitive uniqueness: Ann@x.org and ann@x.org are one account.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

COMMENT ON TABLE users IS 'People who can sign in. Delete a row to delete the person and everything they own.';
COMMENT ON COLUMN users.id IS 'Surrogate key; every table that holds a person''s data refers to it.';
COMMENT ON COLUMN users.email IS 'Sign-in name, unique regardless of letter case (index users_email_key on lower(email)).';
COMMENT ON COLUMN users.display_name IS 'Name shown in the page header.';
COMMENT ON COLUMN users.password_hash IS 'crypt(3) hash: yescrypt ($y$) from the app, or bcrypt ($2a$) set by an admin with pgcrypto crypt(''new password'', gen_salt(''bf'')).';
COMMENT ON COLUMN users.created_at IS 'When the account was made.';
COMMENT ON COLUMN users.disabled_at IS 'Set to now() to lock the person out (signed out on their next request); NULL when active.';

CREATE TABLE sessions (
    token_hash   bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

COMMENT ON TABLE sessions IS 'Signed-in browsers. Delete a person''s rows to sign them out everywhere.';
COMMENT ON COLUMN sessions.token_hash IS 'SHA-256 of the session cookie; the cookie itself is never stored.';
COMMENT ON COLUMN sessions.user_id IS 'Who is signed in.';
COMMENT ON COLUMN sessions.csrf_token IS 'Token every state-changing request of this session must carry.';
COMMENT ON COLUMN sessions.created_at IS 'When the person signed in.';
COMMENT ON COLUMN sessions.last_seen_at IS 'Last request, updated at most once a minute.';
COMMENT ON COLUMN sessions.expires_at IS 'Sliding expiry: pushed forward as the session is used.';

CREATE TABLE map_regions (
    user_id    bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    center_lat double precision NOT NULL CHECK (center_lat BETWEEN -90 AND 90),
    center_lon double precision NOT NULL CHECK (center_lon BETWEEN -180 AND 180),
    zoom       double precision NOT NULL CHECK (zoom BETWEEN 0 AND 22),
    updated_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE map_regions IS 'Where each person''s map was left, restored on their next visit.';
COMMENT ON COLUMN map_regions.user_id IS 'Whose map.';
COMMENT ON COLUMN map_regions.center_lat IS 'Latitude of the map centre, degrees.';
COMMENT ON COLUMN map_regions.center_lon IS 'Longitude of the map centre, degrees (-180..180).';
COMMENT ON COLUMN map_regions.zoom IS 'Web Mercator zoom level (0 = whole world in one 256 px tile).';
COMMENT ON COLUMN map_regions.updated_at IS 'Last save.';

CREATE TABLE pins (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    lat          double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
    lon          double precision NOT NULL CHECK (lon BETWEEN -180 AND 180),
    place_name   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    status       text NOT NULL DEFAULT 'new'
                 CHECK (status IN ('new', 'downloading', 'ready', 'empty', 'failed')),
    generation   integer NOT NULL DEFAULT 0 CHECK (generation >= 0),
    provider     text,
    page         integer CHECK (page >= 1),
    total_pages  integer CHECK (total_pages >= 0),
    total_photos integer CHECK (total_photos >= 0),
    error        text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- Lets photos and jobs reference (pin, owner) together, so a row can never point at another
    -- person's pin.
    UNIQUE (id, user_id)
);
CREATE INDEX pins_user_id_idx ON pins (user_id, id);
CREATE INDEX pins_user_lat_lon_idx ON pins (user_id, lat, lon);

COMMENT ON TABLE pins IS 'Dropped pins, each with one photo album. The album state lives on the pin.';
COMMENT ON COLUMN pins.id IS 'Pin number, as in /pins/ID.';
COMMENT ON COLUMN pins.user_id IS 'Owner.';
COMMENT ON COLUMN pins.lat IS 'Latitude, degrees.';
COMMENT ON COLUMN pins.lon IS 'Longitude, degrees.';
COMMENT ON COLUMN pins.place_name IS 'Nearest named place when the pin was dropped ("Kyoto, JP"); NULL in the open sea.';
COMMENT ON COLUMN pins.created_at IS 'When the pin was dropped.';
COMMENT ON COLUMN pins.status IS 'Album state: new (never opened), downloading, ready, empty (no photos found), failed (see error).';
COMMENT ON COLUMN pins.generation IS 'Bumped by every New Collection; photos and jobs of an older generation are stale and discarded.';
COMMENT ON COLUMN pins.provider IS 'Photo provider of the current collection (flickr, commons, fixture).';
COMMENT ON COLUMN pins.page IS 'Provider result page shown in the current collection.';
COMMENT ON COLUMN pins.total_pages IS 'Result pages the provider reported for this spot.';
COMMENT ON COLUMN pins.total_photos IS 'Results the provider reported for this spot.';
COMMENT ON COLUMN pins.error IS 'Why the last collection failed, shown to the person with a Retry button.';
COMMENT ON COLUMN pins.updated_at IS 'Last change of the album state.';

CREATE TABLE photos (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pin_id       bigint NOT NULL,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    generation   integer NOT NULL,
    position     integer NOT NULL CHECK (position >= 0),
    provider     text NOT NULL,
    remote_id    text NOT NULL,
    title        text NOT NULL DEFAULT '',
    owner_name   text NOT NULL DEFAULT '',
    license      text NOT NULL DEFAULT '',
    page_url     text,
    remote_url   text NOT NULL,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ready', 'failed')),
    content_type text CHECK (content_type IN ('image/jpeg', 'image/png', 'image/gif', 'image/webp')),
    bytes        bytea,
    width        integer CHECK (width > 0),
    height       integer CHECK (height > 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (pin_id, user_id) REFERENCES pins (id, user_id) ON DELETE CASCADE,
    UNIQUE (pin_id, provider, remote_id),
    CHECK (status <> 'ready' OR (bytes IS NOT NULL AND content_type IS NOT NULL))
);
CREATE INDEX photos_user_pin_position_idx ON photos (user_id, pin_id, position);
CREATE INDEX photos_pin_id_idx ON photos (pin_id);

COMMENT ON TABLE photos IS 'Photos of each pin''s album, image bytes included. A pending row is a placeholder waiting for its download.';
COMMENT ON COLUMN photos.id IS 'Photo number, as in /pins/PIN/photos/ID.';
COMMENT ON COLUMN photos.pin_id IS 'The album (pin) it belongs to.';
COMMENT ON COLUMN photos.user_id IS 'Owner; always the pin''s owner (enforced by the (pin_id, user_id) foreign key).';
COMMENT ON COLUMN photos.generation IS 'The pin generation it was fetched for; rows of older generations are stale.';
COMMENT ON COLUMN photos.position IS 'Order in the album grid, from 0.';
COMMENT ON COLUMN photos.provider IS 'Where it came from (flickr, commons, fixture).';
COMMENT ON COLUMN photos.remote_id IS 'The provider''s id of the photo; unique per pin and provider.';
COMMENT ON COLUMN photos.title IS 'Title given by the photographer.';
COMMENT ON COLUMN photos.owner_name IS 'Photographer, for attribution.';
COMMENT ON COLUMN photos.license IS 'Licence name, for attribution.';
COMMENT ON COLUMN photos.page_url IS 'The photo''s page at the provider, linked for attribution.';
COMMENT ON COLUMN photos.remote_url IS 'Image URL it was (or will be) downloaded from.';
COMMENT ON COLUMN photos.status IS 'pending (placeholder), ready (bytes stored) or failed (download gave up).';
COMMENT ON COLUMN photos.content_type IS 'Sniffed from the bytes, never taken from the provider''s header.';
COMMENT ON COLUMN photos.bytes IS 'The image itself. octet_length(bytes) is its size.';
COMMENT ON COLUMN photos.width IS 'Pixels, read from the image header.';
COMMENT ON COLUMN photos.height IS 'Pixels, read from the image header.';
COMMENT ON COLUMN photos.created_at IS 'When the row was made (for retention purges).';

CREATE TABLE album_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pin_id       bigint NOT NULL,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    generation   integer NOT NULL,
    kind         text NOT NULL DEFAULT 'collection' CHECK (kind IN ('collection', 'photos')),
    state        text NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    run_after    timestamptz NOT NULL DEFAULT now(),
    locked_by    text,
    locked_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (pin_id, user_id) REFERENCES pins (id, user_id) ON DELETE CASCADE
);
-- Workers claim with: state queued and due, or running with an expired lease (a dead worker).
CREATE INDEX album_jobs_claimable_idx ON album_jobs (run_after) WHERE state IN ('queued', 'running');
CREATE INDEX album_jobs_pin_id_idx ON album_jobs (pin_id);
CREATE INDEX album_jobs_user_id_idx ON album_jobs (user_id);

COMMENT ON TABLE album_jobs IS 'Work queue of album downloads. Workers claim rows with FOR UPDATE SKIP LOCKED and are woken by NOTIFY album_jobs.';
COMMENT ON COLUMN album_jobs.id IS 'Job number.';
COMMENT ON COLUMN album_jobs.pin_id IS 'The album to fill.';
COMMENT ON COLUMN album_jobs.user_id IS 'Owner of the pin.';
COMMENT ON COLUMN album_jobs.generation IS 'Pin generation the job works for; a newer New Collection makes it stale.';
COMMENT ON COLUMN album_jobs.kind IS 'collection (search and download a page) or photos (download chosen photos).';
COMMENT ON COLUMN album_jobs.state IS 'queued, running (see locked_by/locked_until), done, failed (gave up, see last_error) or cancelled.';
COMMENT ON COLUMN album_jobs.attempts IS 'Tries so far; retried with exponential backoff up to a maximum.';
COMMENT ON COLUMN album_jobs.run_after IS 'Not claimed before this time (backoff). Set to now() to retry at once.';
COMMENT ON COLUMN album_jobs.locked_by IS 'Worker holding the job (host:pid/worker).';
COMMENT ON COLUMN album_jobs.locked_until IS 'Lease end; after it another worker may take the job over.';
COMMENT ON COLUMN album_jobs.last_error IS 'Error of the last failed attempt.';
COMMENT ON COLUMN album_jobs.created_at IS 'When the job was queued.';
