-- The number of ready photos in each pin's current album, kept by a trigger on photos, so the map
-- page and the pin list read one row per pin instead of visiting each of its photos. A photo's
-- status is in no index (0080, so its pending → ready update stays HOT), so counting a pin's ready
-- photos read all ~30 of its rows: with 1,000 pins of 30 photos, PostgreSQL's time per map page went
-- from 0.36 ms to 1.25 ms, for the 50 pins of the list page alone.
--
-- A table of its own rather than a column of pins: the album worker's writes would otherwise lock
-- the pin's row after the photos' rows, the opposite order to New Collection (pin first, then its
-- photos), which can deadlock. Here each statement on photos locks only this row, after its own.
CREATE TABLE IF NOT EXISTS pin_photo_counts (
    pin_id     bigint PRIMARY KEY REFERENCES pins (id) ON DELETE CASCADE,
    generation integer NOT NULL,
    ready      integer NOT NULL CHECK (ready >= 0)
);
COMMENT ON TABLE pin_photo_counts IS 'Ready photos of each pin''s album, recounted by the triggers on photos after every statement that touches the pin''s photos; read only where generation matches the pin''s. Rebuild with SELECT pin_photo_counts_recount(array_agg(id)) FROM pins.';
COMMENT ON COLUMN pin_photo_counts.pin_id IS 'The pin.';
COMMENT ON COLUMN pin_photo_counts.generation IS 'The album (pins.generation) the count is of.';
COMMENT ON COLUMN pin_photo_counts.ready IS 'Its photos with status ready.';

-- Recounts the given pins' current albums: about 30 rows a pin, once per statement, instead of on
-- every page that shows the pin.
CREATE OR REPLACE FUNCTION pin_photo_counts_recount(pin_ids bigint[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO pin_photo_counts AS c (pin_id, generation, ready)
    SELECT p.id, p.generation,
           (SELECT count(*) FROM photos ph WHERE ph.pin_id = p.id AND ph.generation = p.generation AND ph.status = 'ready')
    FROM pins p WHERE p.id = ANY (pin_ids)
    ON CONFLICT (pin_id) DO UPDATE SET generation = EXCLUDED.generation, ready = EXCLUDED.ready
    WHERE c.generation IS DISTINCT FROM EXCLUDED.generation OR c.ready IS DISTINCT FROM EXCLUDED.ready;
$$;

CREATE OR REPLACE FUNCTION pin_photo_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_photo_counts_recount(array_agg(DISTINCT pin_id)) FROM new_photos HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION pin_photo_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_photo_counts_recount(array_agg(DISTINCT pin_id))
    FROM (SELECT pin_id FROM new_photos UNION SELECT pin_id FROM old_photos) changed HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION pin_photo_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_photo_counts_recount(array_agg(DISTINCT pin_id)) FROM old_photos HAVING count(*) > 0;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS pin_photo_counts_inserted ON photos;
DROP TRIGGER IF EXISTS pin_photo_counts_updated ON photos;
DROP TRIGGER IF EXISTS pin_photo_counts_deleted ON photos;
CREATE TRIGGER pin_photo_counts_inserted AFTER INSERT ON photos REFERENCING NEW TABLE AS new_photos
    FOR EACH STATEMENT EXECUTE FUNCTION pin_photo_counts_inserted();
CREATE TRIGGER pin_photo_counts_updated AFTER UPDATE ON photos REFERENCING OLD TABLE AS old_photos NEW TABLE AS new_photos
    FOR EACH STATEMENT EXECUTE FUNCTION pin_photo_counts_updated();
CREATE TRIGGER pin_photo_counts_deleted AFTER DELETE ON photos REFERENCING OLD TABLE AS old_photos
    FOR EACH STATEMENT EXECUTE FUNCTION pin_photo_counts_deleted();

SELECT pin_photo_counts_recount(array_agg(id)) FROM pins;
