-- pin_photo_counts_recount runs in every photo statement's trigger (0094). As a LANGUAGE sql
-- function its INSERT … ON CONFLICT was planned again on every call; in PL/pgSQL the plan is kept
-- for the connection's life. Measured on one batch of four photo updates: the trigger took
-- 0.4–0.5 ms before and 0.2 ms after (script/bench albums writes about eight batches an album).
CREATE OR REPLACE FUNCTION pin_photo_counts_recount(pin_ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pin_photo_counts AS c (pin_id, generation, ready)
    SELECT p.id, p.generation,
           (SELECT count(*) FROM photos ph WHERE ph.pin_id = p.id AND ph.generation = p.generation AND ph.status = 'ready')
    FROM pins p WHERE p.id = ANY (pin_ids)
    ON CONFLICT (pin_id) DO UPDATE SET generation = EXCLUDED.generation, ready = EXCLUDED.ready
    WHERE c.generation IS DISTINCT FROM EXCLUDED.generation OR c.ready IS DISTINCT FROM EXCLUDED.ready;
END
$$;
