-- An album's era (issue "a place through time"): the years its photos were taken in, both ends
-- included, kept per pin so New Collection keeps it. NULL in both: any time, as before.
-- Years from 1850 (photography's first decades in the archives) to 2100 (a bound, not a date).
ALTER TABLE pins
    ADD COLUMN era_from smallint,
    ADD COLUMN era_to smallint,
    ADD CONSTRAINT pins_era_check CHECK ((era_from IS NULL) = (era_to IS NULL)
                                         AND era_from BETWEEN 1850 AND 2100 AND era_to BETWEEN era_from AND 2100);

COMMENT ON COLUMN pins.era_from IS 'First year the album''s photos were taken in (NULL: any time); the provider is asked for this era.';
COMMENT ON COLUMN pins.era_to IS 'Last year the album''s photos were taken in, included (NULL with era_from).';

-- The album page's strip of decades: how many photos the provider holds around a pin, decade by
-- decade, counted when the strip is first shown and again after 30 days (each count costs provider
-- calls: docs/providers.md). Deleted with the pin.
CREATE TABLE pin_decades (
    pin_id     bigint NOT NULL,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    decade     smallint NOT NULL CHECK (decade BETWEEN 1850 AND 2100 AND decade % 10 = 0),
    photos     integer NOT NULL CHECK (photos >= 0),
    counted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pin_id, decade),
    FOREIGN KEY (pin_id, user_id) REFERENCES pins (id, user_id) ON DELETE CASCADE
);
CREATE INDEX pin_decades_user_id ON pin_decades (user_id);

COMMENT ON TABLE pin_decades IS 'Photos the provider holds around each pin, per decade (the album page''s strip); recounted after 30 days.';
COMMENT ON COLUMN pin_decades.pin_id IS 'The pin counted around.';
COMMENT ON COLUMN pin_decades.user_id IS 'Holder of the pin (a person, or a shared map).';
COMMENT ON COLUMN pin_decades.decade IS 'First year of the decade (1950: 1950-1959).';
COMMENT ON COLUMN pin_decades.photos IS 'Photos the provider said it holds taken in that decade (Flickr''s total; Commons: among the 500 nearest files).';
COMMENT ON COLUMN pin_decades.counted_at IS 'When the provider was asked.';
