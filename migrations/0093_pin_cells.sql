-- Pin counts per grid cell, kept up to date by triggers, so a crowded view of the map reads a few
-- hundred cells instead of grouping thousands of pins on every request (docs/architecture.md, "The
-- map"). Before: /pins.json for a city box holding 9,000 of a person's 10,000 pins grouped all of
-- them in every answer (40 ms of PostgreSQL time under load).
--
-- A cell of level L is 360 / 2^L degrees on a side, numbered from (-180, -90):
--   x = floor((lon + 180) / size), y = floor((lat + 90) / size).
-- Every second level from 0 to 16 is kept (cells of 360° down to 0.0055°, about 600 m): a view asks
-- for cells between one and four times the size it wants, so at most 17 × 17 come back. Level 0 holds
-- every pin of a person in one or two rows, which is the map page's count of pins.
CREATE TABLE IF NOT EXISTS pin_cells (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    level   smallint NOT NULL CHECK (level BETWEEN 0 AND 16 AND level % 2 = 0),
    x       integer NOT NULL,
    y       integer NOT NULL,
    pins    integer NOT NULL CHECK (pins >= 0),
    sum_lat double precision NOT NULL,
    sum_lon double precision NOT NULL,
    PRIMARY KEY (user_id, level, x, y)
);
COMMENT ON TABLE pin_cells IS 'How many pins each person has in each grid cell (levels 0, 2 … 16), with the sums of their coordinates for the cluster''s centre. Written only by the triggers on pins; rebuild with SELECT pin_cells_rebuild().';
COMMENT ON COLUMN pin_cells.user_id IS 'Whose pins.';
COMMENT ON COLUMN pin_cells.level IS 'Cell size 360 / 2^level degrees.';
COMMENT ON COLUMN pin_cells.x IS 'floor((lon + 180) / size).';
COMMENT ON COLUMN pin_cells.y IS 'floor((lat + 90) / size).';
COMMENT ON COLUMN pin_cells.pins IS 'Pins of this person in the cell.';
COMMENT ON COLUMN pin_cells.sum_lat IS 'Sum of their latitudes (the cluster is drawn at sum / pins).';
COMMENT ON COLUMN pin_cells.sum_lon IS 'Sum of their longitudes.';

-- The cells a set of pins falls in, grouped: the one place the cell formula is written in SQL (the
-- app computes the same numbers in PinStore.ViewGrid, and asks for pins with this very expression).
CREATE OR REPLACE FUNCTION pin_cells_of(users bigint[], lats double precision[], lons double precision[])
RETURNS TABLE (user_id bigint, level smallint, x integer, y integer, pins bigint, sum_lat double precision, sum_lon double precision)
LANGUAGE sql IMMUTABLE AS $$
    SELECT p.user_id, l.level::smallint,
           floor((p.lon + 180) / (360.0::double precision / (1 << l.level)))::integer,
           floor((p.lat + 90) / (360.0::double precision / (1 << l.level)))::integer,
           count(*), sum(p.lat), sum(p.lon)
    FROM unnest(users, lats, lons) AS p (user_id, lat, lon) CROSS JOIN generate_series(0, 16, 2) AS l (level)
    GROUP BY 1, 2, 3, 4
$$;

-- Adds (sign 1) or removes (sign -1) pins from their cells. Removing only ever updates existing
-- rows: when a person is deleted their cells may already be gone by the cascade.
CREATE OR REPLACE FUNCTION pin_cells_apply(sign integer, users bigint[], lats double precision[], lons double precision[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF sign > 0 THEN
        INSERT INTO pin_cells AS c (user_id, level, x, y, pins, sum_lat, sum_lon)
        SELECT * FROM pin_cells_of(users, lats, lons)
        ON CONFLICT (user_id, level, x, y) DO UPDATE
        SET pins = c.pins + EXCLUDED.pins, sum_lat = c.sum_lat + EXCLUDED.sum_lat, sum_lon = c.sum_lon + EXCLUDED.sum_lon;
    ELSE
        UPDATE pin_cells c SET pins = c.pins - g.pins, sum_lat = c.sum_lat - g.sum_lat, sum_lon = c.sum_lon - g.sum_lon
        FROM pin_cells_of(users, lats, lons) g
        WHERE c.user_id = g.user_id AND c.level = g.level AND c.x = g.x AND c.y = g.y;
        DELETE FROM pin_cells c USING pin_cells_of(users, lats, lons) g
        WHERE c.user_id = g.user_id AND c.level = g.level AND c.x = g.x AND c.y = g.y AND c.pins <= 0;
    END IF;
END
$$;

-- Statement-level for inserts and deletes, so a bulk insert by an administrator (or a cascade from
-- a deleted person) is one grouped upsert, not one per pin.
CREATE OR REPLACE FUNCTION pin_cells_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_cells_apply(1, array_agg(user_id), array_agg(lat), array_agg(lon)) FROM new_pins HAVING count(*) > 0;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION pin_cells_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_cells_apply(-1, array_agg(user_id), array_agg(lat), array_agg(lon)) FROM old_pins HAVING count(*) > 0;
    RETURN NULL;
END
$$;
-- Row-level for moves (only an administrator's SQL moves a pin): transition tables cannot be
-- combined with a column list, and the album's status updates must not fire anything.
CREATE OR REPLACE FUNCTION pin_cells_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pin_cells_apply(-1, ARRAY[OLD.user_id], ARRAY[OLD.lat], ARRAY[OLD.lon]);
    PERFORM pin_cells_apply(1, ARRAY[NEW.user_id], ARRAY[NEW.lat], ARRAY[NEW.lon]);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS pin_cells_inserted ON pins;
DROP TRIGGER IF EXISTS pin_cells_deleted ON pins;
DROP TRIGGER IF EXISTS pin_cells_moved ON pins;
CREATE TRIGGER pin_cells_inserted AFTER INSERT ON pins REFERENCING NEW TABLE AS new_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_cells_inserted();
CREATE TRIGGER pin_cells_deleted AFTER DELETE ON pins REFERENCING OLD TABLE AS old_pins
    FOR EACH STATEMENT EXECUTE FUNCTION pin_cells_deleted();
CREATE TRIGGER pin_cells_moved AFTER UPDATE OF lat, lon, user_id ON pins
    FOR EACH ROW WHEN (OLD.lat IS DISTINCT FROM NEW.lat OR OLD.lon IS DISTINCT FROM NEW.lon OR OLD.user_id IS DISTINCT FROM NEW.user_id)
    EXECUTE FUNCTION pin_cells_moved();

-- Recounts every cell from the pins (after a restore of pins alone, or to check the triggers).
CREATE OR REPLACE FUNCTION pin_cells_rebuild() RETURNS void LANGUAGE sql AS $$
    DELETE FROM pin_cells;
    INSERT INTO pin_cells (user_id, level, x, y, pins, sum_lat, sum_lon)
    SELECT g.* FROM (SELECT array_agg(user_id) AS u, array_agg(lat) AS la, array_agg(lon) AS lo FROM pins) a,
         LATERAL pin_cells_of(a.u, a.la, a.lo) g
    WHERE a.u IS NOT NULL;
$$;
SELECT pin_cells_rebuild();
