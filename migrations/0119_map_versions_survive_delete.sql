-- DELETE on map_versions moves people on, as TRUNCATE does (docs/architecture.md, "The map page kept
-- per person").
--
-- A kept map page is keyed by its person's version, so a version must neither go missing under a
-- person with pins nor come back with a number it had. The app keeps no page for a person without a
-- row; this trigger puts back every row a DELETE removes (any rows, by any means) while its person
-- still exists, moved past the version it had, as migration 0098's TRUNCATE trigger moves everyone.
-- A deleted person's row (map_versions_users_deleted, TRUNCATE users) stays deleted: their users row
-- is gone by the time this trigger runs.
CREATE OR REPLACE FUNCTION map_versions_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO map_versions AS v (user_id, version)
    SELECT gone.user_id, map_versions_next(gone.version) FROM gone JOIN users u ON u.id = gone.user_id
    ON CONFLICT (user_id) DO UPDATE SET version = greatest(map_versions_next(v.version), EXCLUDED.version);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION map_versions_deleted() IS
    'Statement trigger: puts back the deleted map_versions rows of people who still exist, each past the version it had.';

DROP TRIGGER IF EXISTS map_versions_deleted ON map_versions;
CREATE TRIGGER map_versions_deleted AFTER DELETE ON map_versions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION map_versions_deleted();

COMMENT ON TABLE map_versions IS 'A version per person, moved on by triggers whenever their pins or pin photo counts change; pages the app keeps in memory are valid while it stands. Values come from the clock and never repeat; emptying the table (TRUNCATE or DELETE) moves everyone on, and a person with no row (no pin yet) gets no kept page.';
