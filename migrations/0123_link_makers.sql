-- Who made each share link and invitation, and links and invitations that die with their maker's
-- right (docs/architecture.md, "Share links", "Shared maps"; issue 50).
--
-- The rule, in one place (share_right, invite_right): a share link of a person's own map is
-- usable while that person is not disabled; a link of a shared map while its maker is a member
-- who is not disabled and is an owner, or an editor of a map whose owners let editors share
-- (users.editors_share). An invitation: while its maker is an owner of the map and not disabled.
--
-- Checked twice, so no path can forget it: in the statement that resolves a link or an
-- invitation (ShareLinks.lookup, SharedMaps.join), and when a right is lost. Losing it is final:
-- the triggers below close the maker's links (closed_at, which nothing clears) and delete their
-- open invitations in the transaction that changes the role, removes the member, turns
-- editors_share off or disables the account. Made again, and only then, a link opens again.
ALTER TABLE share_links ADD COLUMN made_by bigint REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE share_links ADD COLUMN closed_at timestamptz;
ALTER TABLE share_links ADD COLUMN last_used_at timestamptz;
COMMENT ON COLUMN share_links.made_by IS 'The person who made it; the link closes when they lose the right to share the map (migration 0123), and goes when their account is deleted.';
COMMENT ON COLUMN share_links.closed_at IS 'When its maker lost the right to share (left, removed, demoted, editors no longer share, disabled); set: the link answers as one that does not exist. Never cleared.';
COMMENT ON COLUMN share_links.last_used_at IS 'When a visitor last opened it (kept to the minute at most every 10 minutes); NULL: never.';

-- Links made before makers were recorded: a person's own map's links are that person's. A shared
-- map's are given to its longest-standing owner (the data names no one better: only owners could
-- make links unless editors_share was on); a map that has no owner (no app path leaves one so)
-- gives them to the map's own row, which is no member, so they close.
UPDATE share_links s SET made_by = coalesce(
    (SELECT mm.user_id FROM map_members mm WHERE mm.map_id = s.user_id AND mm.role = 'owner'
     ORDER BY mm.added_at, mm.user_id LIMIT 1),
    s.user_id);
ALTER TABLE share_links ALTER COLUMN made_by SET NOT NULL;
CREATE INDEX share_links_made_by_idx ON share_links (made_by);

-- Invitations already record their maker (created_by, migration 0120). One whose maker's account
-- is gone (created_by NULL) opens nothing from now on.
CREATE INDEX map_invitations_created_by_idx ON map_invitations (created_by);
COMMENT ON COLUMN map_invitations.created_by IS 'The owner who made it; it dies when they are no longer an owner of the map or are disabled (migration 0123). NULL: their account was deleted, it opens nothing.';

CREATE FUNCTION share_right(holder bigint, maker bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM users p JOIN users h ON h.id = holder
        WHERE p.id = maker AND p.kind = 'person' AND p.disabled_at IS NULL
          AND (h.id = p.id
               OR EXISTS (SELECT 1 FROM map_members mm
                          WHERE mm.map_id = h.id AND mm.user_id = p.id AND h.kind = 'map'
                            AND (mm.role = 'owner' OR (mm.role = 'editor' AND h.editors_share)))))
$$;
COMMENT ON FUNCTION share_right(bigint, bigint) IS 'Whether `maker` may make (and keep open) share links of the map held by `holder`: its own person, or a shared map''s owner or (editors_share) editor, not disabled.';

CREATE FUNCTION invite_right(map bigint, maker bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM map_members mm JOIN users p ON p.id = mm.user_id
        WHERE mm.map_id = map AND mm.user_id = maker AND mm.role = 'owner' AND p.disabled_at IS NULL)
$$;
COMMENT ON FUNCTION invite_right(bigint, bigint) IS 'Whether `maker` may invite people to the shared map `map` (and their invitations stay open): an owner, not disabled.';

-- Closes what the people and maps touched by a change may no longer keep open.
CREATE FUNCTION maker_rights_lost(people bigint[], maps bigint[]) RETURNS void LANGUAGE sql AS $$
    UPDATE share_links s SET closed_at = now()
    WHERE s.closed_at IS NULL AND (s.made_by = ANY(people) OR s.user_id = ANY(maps))
      AND NOT share_right(s.user_id, s.made_by);
    DELETE FROM map_invitations i
    WHERE i.used_at IS NULL AND (i.created_by = ANY(people) OR i.map_id = ANY(maps))
      AND (i.created_by IS NULL OR NOT invite_right(i.map_id, i.created_by));
$$;
COMMENT ON FUNCTION maker_rights_lost(bigint[], bigint[]) IS 'Closes the share links and deletes the open invitations whose makers (among `people`, or on `maps`) no longer have the right.';

CREATE FUNCTION maker_rights_members_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM maker_rights_lost(ARRAY(SELECT user_id FROM gone), ARRAY(SELECT map_id FROM gone));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION maker_rights_members_changed() IS 'Statement trigger: members removed or given another role lose the links and invitations their new role does not allow.';
CREATE TRIGGER maker_rights_members_gone AFTER DELETE ON map_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION maker_rights_members_changed();
CREATE TRIGGER maker_rights_members_changed AFTER UPDATE ON map_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION maker_rights_members_changed();

CREATE FUNCTION maker_rights_user_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM maker_rights_lost(CASE WHEN NEW.disabled_at IS NOT NULL THEN ARRAY[NEW.id] ELSE '{}' END,
                              CASE WHEN NOT NEW.editors_share THEN ARRAY[NEW.id] ELSE '{}' END);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION maker_rights_user_changed() IS 'Row trigger: a person disabled loses every link and invitation they made; a map whose editors may no longer share loses its editors'' links.';
-- A row trigger with WHEN: the users updates of every request (sessions, switcher lists) pay nothing.
CREATE TRIGGER maker_rights_user_changed AFTER UPDATE OF disabled_at, editors_share ON users
    FOR EACH ROW WHEN ((NEW.disabled_at IS NOT NULL AND OLD.disabled_at IS NULL) OR (OLD.editors_share AND NOT NEW.editors_share))
    EXECUTE FUNCTION maker_rights_user_changed();
