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
