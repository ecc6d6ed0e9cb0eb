-- A person's own photos leave a shared map with them: when they leave it or are removed from it
-- (their map_members row goes), the photos they added to it go too. They could neither see nor
-- remove them any more, the map's owners could still download the originals with their location,
-- and their quota would go on counting them. Pins and the provider's photos stay, as before.
CREATE FUNCTION own_photos_leave_with_member() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM own_photos WHERE user_id = OLD.map_id AND added_by = OLD.user_id;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION own_photos_leave_with_member() IS 'Deletes the own photos a person added to a shared map when their membership of it ends (their blobs go with the collector).';
CREATE TRIGGER own_photos_leave_with_member AFTER DELETE ON map_members
    FOR EACH ROW EXECUTE FUNCTION own_photos_leave_with_member();
