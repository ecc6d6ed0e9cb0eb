import Foundation
import Postgres

/// Shared maps in SQL (migration 0120): a map is a users row of kind 'map' that holds its pins as a
/// person holds theirs; map_members says who may open it and as what. Every statement that reads
/// or changes a map names the person asking and checks their role in the same statement, so a
/// route cannot act on a map its person is not a member of (docs/architecture.md, "Shared maps").
public struct SharedMaps: Sendable {
    package let pool: PostgresPool
    package let quotas: Quotas

    public init(pool: PostgresPool, quotas: Quotas) {
        self.pool = pool
        self.quotas = quotas
    }

    public static let maxNameLength = 100
    /// How long an invitation link opens the map.
    public static let invitationDays = 7

    /// A map as its members' list shows it.
    public struct Summary: Sendable, Equatable {
        public let id: Int64
        public let name: String
        public let role: MapRole
        public let members: Int
        public let pins: Int
    }

    public struct Member: Sendable, Equatable {
        public let id: Int64
        public let name: String
        /// Shown to the map's owners only (and to the member themselves): nil otherwise.
        public let email: String?
        public let role: MapRole
        public let addedAt: Date
    }

    /// An invitation not yet used nor expired, as its map's owners see it.
    public struct Invitation: Sendable, Equatable {
        public let id: Int64
        public let role: MapRole
        /// Its maker's name (an owner of the map: it dies when they are no longer one).
        public let madeBy: String
        public let expiresAt: Date
        /// For an invitation by email, the address it is for (nil: a link, for whoever opens it).
        public var inviteeEmail: String? = nil
    }

    /// An invitation by email, as the person it is for sees it.
    public struct Invited: Sendable, Equatable {
        public let id: Int64
        public let mapID: Int64
        public let mapName: String
        public let role: MapRole
        public let invitedBy: String
        public let expiresAt: Date
    }

    /// A map's own page: what it is, who is in it, and the viewer's role.
    public struct Detail: Sendable {
        public let summary: Summary
        public let members: [Member]
        /// The open invitations, for owners (empty for everyone else).
        public let invitations: [Invitation]
        public let editorsShare: Bool
        public var openInvitations: Int { invitations.count }
    }

    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// Not a member (or no such map): 404, whatever the map.
        case notFound
        /// A member whose role does not allow it: 403 with the sentence.
        case notAllowed(String)
        /// The request cannot be done as asked (a cap, the last owner, no such person): 422.
        case problem(String)

        public var description: String {
            switch self {
            case .notFound: "No such map."
            case .notAllowed(let why), .problem(let why): why
            }
        }
    }

    /// The name of a map from a form: trimmed, 1 to 100 characters; the sentence says what is wrong.
    public static func name(_ text: String?) -> Result<String, Refusal> {
        let name = (text ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if name.isEmpty { return .failure(.problem("Give the map a name.")) }
        if name.count > maxNameLength { return .failure(.problem("A map's name is at most \(maxNameLength) characters.")) }
        return .success(name)
    }

    // MARK: Reading

    /// The shared maps a person belongs to, by name.
    public func maps(of person: Int64) throws -> [Summary] {
        try pool.query("""
            SELECT m.id, m.display_name AS name, mm.role,
                   (SELECT count(*) FROM map_members c WHERE c.map_id = m.id)::int AS members,
                   (SELECT count(*) FROM pins p WHERE p.user_id = m.id)::int AS pins
            FROM map_members mm JOIN users m ON m.id = mm.map_id
            WHERE mm.user_id = $1 ORDER BY lower(m.display_name), m.id
            """, [person]).map(Self.summary)
    }

    /// A map's page, for one of its members; nil for anyone else.
    public func detail(_ mapID: Int64, for person: Int64) throws -> Detail? {
        let results = try pool.withConnection { db in try db.pipeline([
            PostgresStatement("""
             SELECT m.id, m.display_name AS name, mm.role,
                    (SELECT count(*) FROM map_members c WHERE c.map_id = m.id)::int AS members,
                    (SELECT count(*) FROM pins p WHERE p.user_id = m.id)::int AS pins,
                    m.editors_share
             FROM map_members mm JOIN users m ON m.id = mm.map_id AND m.kind = 'map'
             WHERE mm.map_id = $1 AND mm.user_id = $2
             """, [mapID, person]),
            PostgresStatement("""
             -- Addresses for owners only (and each member's own): a viewer who came by a
             -- forwarded invitation link learns nobody's address.
             SELECT u.id, u.display_name AS name, c.role, c.added_at,
                    CASE WHEN u.id = $2 OR me.role = 'owner' THEN u.email END AS email
             FROM map_members c JOIN users u ON u.id = c.user_id
             JOIN map_members me ON me.map_id = $1 AND me.user_id = $2
             WHERE c.map_id = $1
             ORDER BY CASE c.role WHEN 'owner' THEN 0 WHEN 'editor' THEN 1 ELSE 2 END, lower(u.display_name), u.id
             """, [mapID, person]),
            // Only an owner's page lists them; only those their maker may still give (invite_right).
            PostgresStatement("""
             SELECT i.id, i.role, u.display_name AS made_by, i.expires_at, i.invitee_email
             FROM map_invitations i JOIN users u ON u.id = i.created_by
             WHERE i.map_id = $1 AND i.used_at IS NULL AND i.expires_at > now() AND invite_right(i.map_id, i.created_by)
               AND EXISTS (SELECT 1 FROM map_members me WHERE me.map_id = $1 AND me.user_id = $2 AND me.role = 'owner')
             ORDER BY i.expires_at, i.id
             """, [mapID, person]),
        ]) }
        guard let row = results[0].first else { return nil }
        let members = try results[1].map { row in
            Member(id: try row.decode("id"), name: try row.decode("name"), email: try row.decode("email"),
                   role: MapRole(parsing: try row.decode("role")) ?? .viewer, addedAt: try row.decode("added_at"))
        }
        let invitations = try results[2].map { row in
            Invitation(id: try row.decode("id"), role: MapRole(parsing: try row.decode("role")) ?? .viewer,
                       madeBy: try row.decode("made_by"), expiresAt: try row.decode("expires_at"), inviteeEmail: try row.decode("invitee_email"))
        }
        return Detail(summary: try Self.summary(row), members: members, invitations: invitations,
                      editorsShare: try row.decode("editors_share"))
    }

    private static func summary(_ row: PostgresRow) throws -> Summary {
        Summary(id: try row.decode("id"), name: try row.decode("name"), role: MapRole(parsing: try row.decode("role")) ?? .viewer,
                members: try row.decode("members"), pins: try row.decode("pins"))
    }

    // MARK: Making and ending

    /// A new map owned by `person`, shown to them at once. Past `quotas.sharedMaps` memberships: a problem.
    public func create(name: String, by person: Int64) throws -> Int64 {
        try pool.transaction { db in
            // The person's row locked for the count, so two presses cannot pass the cap together.
            let count: Int = try db.query("""
                SELECT (SELECT count(*) FROM map_members WHERE user_id = $1)::int AS n FROM users WHERE id = $1 FOR UPDATE
                """, [person])[0].decode("n")
            guard count < quotas.sharedMaps else {
                throw Refusal.problem("You belong to \(quotas.sharedMaps) shared maps, the limit. Leave or delete one to make another.")
            }
            let id: Int64 = try db.query("""
                INSERT INTO users (kind, display_name, password_hash) VALUES ('map', $1, '!') RETURNING id
                """, [name])[0].decode("id")
            try db.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, 'owner')", [id, person])
            try db.query("UPDATE users SET shown_map = $2 WHERE id = $1", [person, id])
            return id
        }
    }

    public func rename(_ mapID: Int64, to name: String, by person: Int64) throws {
        try requireRole(.owner, on: mapID, person: person, doing: "rename it")
        try pool.query("UPDATE users SET display_name = $2 WHERE id = $1 AND kind = 'map'", [mapID, name])
    }

    /// Lets the map's editors make share links, or not.
    public func setEditorsShare(_ allowed: Bool, on mapID: Int64, by person: Int64) throws {
        try requireRole(.owner, on: mapID, person: person, doing: "choose who makes share links")
        try pool.query("UPDATE users SET editors_share = $2 WHERE id = $1 AND kind = 'map'", [mapID, allowed])
    }

    /// Deletes the map and everything on it (pins, albums, share links; the photo store's blobs go
    /// with the collector's next round).
    public func delete(_ mapID: Int64, by person: Int64) throws {
        try requireRole(.owner, on: mapID, person: person, doing: "delete it")
        try pool.query("DELETE FROM users WHERE id = $1 AND kind = 'map'", [mapID])
    }

    /// Shows a map to the person from their next page on (nil: their own map). False when they
    /// are not a member of it.
    @discardableResult
    public func show(_ mapID: Int64?, to person: Int64) throws -> Bool {
        try pool.query("""
            UPDATE users SET shown_map = $2 WHERE id = $1
              AND ($2::bigint IS NULL OR EXISTS (SELECT 1 FROM map_members WHERE map_id = $2 AND user_id = $1))
            """, [person, mapID]).affectedRows == 1
    }

    // MARK: Members

    public enum Added: Equatable {
        case added(name: String)
        case alreadyMember(name: String)
    }

    /// Adds the person with this email (an account on this instance) as `role`, without asking
    /// them: the operator's act (tests, recipes). The web's "Add by email" never does this: it
    /// invites (`inviteByEmail`), and the person accepts.
    public func add(email: String, role: MapRole, to mapID: Int64, by owner: Int64) throws -> Added {
        try pool.transaction { db in
            try Self.requireRole(db, .owner, on: mapID, person: owner, doing: "add members", lock: true)
            guard let row = try db.query("""
                SELECT id, display_name FROM users WHERE lower(email) = lower($1) AND kind = 'person' AND disabled_at IS NULL
                """, [email]).first else {
                throw Refusal.problem("Nobody on this server has the email \(email). They need an account first; an invitation link lets them join once they have one.")
            }
            let id: Int64 = try row.decode("id"), name: String = try row.decode("display_name")
            if try !db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2", [mapID, id]).isEmpty {
                return .alreadyMember(name: name)
            }
            try Self.checkRoom(db, mapID: mapID, person: id, quotas: quotas)
            try db.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, $3)", [mapID, id, role.rawValue])
            return .added(name: name)
        }
    }

    /// What "Add by email" answers whatever happened: never whether the address has an account.
    public static let invitedByEmail = "If someone on this server has that address, they will see your invitation on their Maps page. It is open for \(invitationDays) days."

    /// An invitation for the account that has `email` now, giving `role`, which it accepts or
    /// declines on its Maps page; it replaces an open one for the same address. Recorded whether
    /// or not an account has the address (then nobody can accept it: addresses are not verified,
    /// so an account made later with it must not inherit it) and whether or not they blocked the
    /// map (then it is never shown to them), so neither this answer nor the owners' list tells who
    /// has an account here. The address is compared by SQL's lower(), as the accounts' unique
    /// index compares it. At most `quotas.invitationsPerHour` per owner per hour, withdrawn ones
    /// included. `mailTo`: the app's address (PUBLIC_URL) when mail is set up: the account the
    /// invitation is for (if any, and unless it blocked the map) is told by mail too, in the same
    /// transaction. Returns the invitation's code (for a mail).
    @discardableResult
    public func inviteByEmail(_ email: String, role: MapRole, to mapID: Int64, by owner: Int64, mailTo appURL: String? = nil) throws -> String {
        guard role != .owner else { throw Refusal.problem("An invitation makes an editor or a viewer; make an owner from the members list.") }
        let code = Tokens.make()
        try pool.transaction { db in
            // The same locks, in the same order, as `invite`.
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [mapID])
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [owner])
            try db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2 FOR SHARE", [mapID, owner])
            try Self.requireRole(db, .owner, on: mapID, person: owner, doing: "invite people", lock: false)
            // A member's address: the owner sees members' addresses anyway, so saying so tells nothing.
            if let member = try db.query("""
                SELECT u.display_name FROM map_members mm JOIN users u ON u.id = mm.user_id
                WHERE mm.map_id = $1 AND lower(u.email) = lower($2)
                """, [mapID, email]).first {
                throw Refusal.problem("\(try member.decode("display_name", as: String.self)) is already a member; change their role in the list.")
            }
            // The owner's row is locked above: two presses cannot pass the limit together.
            let sent: Int = try db.query("""
                WITH old AS (DELETE FROM invitations_sent WHERE user_id = $1 AND sent_at <= now() - interval '1 hour')
                SELECT count(*)::int AS n FROM invitations_sent WHERE user_id = $1 AND sent_at > now() - interval '1 hour'
                """, [owner])[0].decode("n")
            guard sent < quotas.invitationsPerHour else {
                throw Refusal.problem("You have sent \(quotas.invitationsPerHour) invitations in the past hour, the limit. Try again later.")
            }
            try db.query("DELETE FROM map_invitations WHERE map_id = $1 AND invitee_email = lower($2) AND used_at IS NULL", [mapID, email])
            let made = try db.query("""
                INSERT INTO map_invitations (map_id, code_hash, role, created_by, expires_at, invitee_email, invitee_id)
                SELECT $1, sha256(convert_to($2, 'UTF8')), $3, $4, now() + make_interval(days => $5::int), lower($6),
                       (SELECT id FROM users WHERE lower(email) = lower($6) AND kind = 'person')
                WHERE invite_right($1, $4)
                RETURNING invitee_id
                """, [mapID, code, role.rawValue, owner, Self.invitationDays, email])
            guard let invitation = made.first else { throw Refusal.notAllowed("Only the map's owners can invite people.") }
            try db.query("INSERT INTO invitations_sent (user_id) VALUES ($1)", [owner])
            // The mail goes to the account the invitation was bound to, none other.
            if let appURL, let invitee: Int64 = try invitation.decode("invitee_id"), let row = try db.query("""
                SELECT u.email, u.display_name AS invitee, o.display_name AS inviter, m.display_name AS map
                FROM users u, users o, users m
                WHERE u.id = $1 AND u.disabled_at IS NULL AND o.id = $2 AND m.id = $3
                  AND NOT EXISTS (SELECT 1 FROM map_invitation_blocks b WHERE b.person_id = u.id AND b.map_id = m.id)
                """, [invitee, owner, mapID]).first {
                let inviter: String = try row.decode("inviter"), map: String = try row.decode("map")
                try MailOutbox.enqueue(db, .mapInvitation, to: try row.decode("email"),
                                       subject: "\(inviter) invited you to a shared map on Virtual Tourist", body: """
                    Hello \(try row.decode("invitee", as: String.self)),

                    \(inviter) invited you to the shared map “\(map)” as \(role == .editor ? "an editor" : "a viewer").
                    To accept or decline, sign in and open your Maps page:

                    \(appURL)/maps

                    The invitation is open for \(Self.invitationDays) days. If you do not know \(inviter), decline it there;
                    you can also ask that this map's owners never invite you again.
                    """, discardAfter: Self.invitationDays * 24 * 3600)
            }
        }
        return code
    }

    /// The open invitations by email made for this person's account, newest first: not used, not
    /// expired, their maker still an owner, the map not blocked, the person not a member yet.
    public func invitations(for person: Int64) throws -> [Invited] {
        try pool.query("""
            SELECT i.id, i.map_id, m.display_name AS map_name, i.role, u.display_name AS invited_by, i.expires_at
            FROM users me
            JOIN map_invitations i ON i.invitee_id = me.id AND i.used_at IS NULL AND i.expires_at > now()
            JOIN users m ON m.id = i.map_id
            JOIN users u ON u.id = i.created_by
            WHERE me.id = $1 AND me.kind = 'person' AND invite_right(i.map_id, i.created_by)
              AND NOT EXISTS (SELECT 1 FROM map_invitation_blocks b WHERE b.person_id = me.id AND b.map_id = i.map_id)
              AND NOT EXISTS (SELECT 1 FROM map_members mm WHERE mm.map_id = i.map_id AND mm.user_id = me.id)
            ORDER BY i.created_at DESC, i.id DESC
            """, [person]).map { row in
            Invited(id: try row.decode("id"), mapID: try row.decode("map_id"), mapName: try row.decode("map_name"),
                    role: MapRole(parsing: try row.decode("role")) ?? .viewer, invitedBy: try row.decode("invited_by"),
                    expiresAt: try row.decode("expires_at"))
        }
    }

    /// Accepts an invitation by email addressed to this person: they become a member (room
    /// permitting) and the map is shown. The same checks as `join`, in the same lock order.
    public func accept(invitation id: Int64, person: Int64) throws -> Joined {
        try pool.transaction { db in
            guard let found = try db.query("""
                SELECT i.map_id, i.created_by FROM map_invitations i WHERE i.id = $1 AND i.invitee_id = $2
                """, [id, person]).first, let maker: Int64 = try found.decode("created_by") else { throw Refusal.problem(Self.deadInvitation) }
            let mapID: Int64 = try found.decode("map_id")
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [mapID])
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [maker])
            guard let row = try db.query("""
                SELECT i.role, m.display_name AS name FROM map_invitations i JOIN users m ON m.id = i.map_id
                WHERE i.id = $1 AND i.invitee_id = $2 AND i.created_by = $3 AND invite_right(i.map_id, i.created_by)
                  AND i.used_at IS NULL AND i.expires_at > now()
                  AND NOT EXISTS (SELECT 1 FROM map_invitation_blocks b WHERE b.person_id = $2 AND b.map_id = i.map_id)
                FOR UPDATE OF i
                """, [id, person, maker]).first else { throw Refusal.problem(Self.deadInvitation) }
            let name: String = try row.decode("name")
            if try !db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2", [mapID, person]).isEmpty {
                try db.query("UPDATE users SET shown_map = $2 WHERE id = $1", [person, mapID])
                return .alreadyMember(mapID: mapID, name: name)
            }
            try Self.checkRoom(db, mapID: mapID, person: person, quotas: quotas, joining: true)
            try db.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, $3)",
                         [mapID, person, try row.decode("role", as: String.self)])
            try db.query("UPDATE map_invitations SET used_at = now(), used_by = $2 WHERE id = $1", [id, person])
            try db.query("UPDATE users SET shown_map = $2 WHERE id = $1", [person, mapID])
            return .joined(mapID: mapID, name: name)
        }
    }

    /// Declines an invitation by email addressed to this person (`block`: and the map's owners
    /// may not invite them again). False when there is no such invitation for them.
    public func decline(invitation id: Int64, person: Int64, block: Bool) throws -> Bool {
        try pool.transaction { db in
            guard let row = try db.query("""
                DELETE FROM map_invitations i WHERE i.id = $1 AND i.invitee_id = $2 AND i.used_at IS NULL
                RETURNING i.map_id
                """, [id, person]).first else { return false }
            if block {
                try db.query("""
                    INSERT INTO map_invitation_blocks (person_id, map_id) VALUES ($1, $2) ON CONFLICT DO NOTHING
                    """, [person, try row.decode("map_id", as: Int64.self)])
            }
            return true
        }
    }

    /// A new invitation link's code (single use, `invitationDays`), giving `role`.
    public func invite(to mapID: Int64, role: MapRole, by owner: Int64) throws -> String {
        guard role != .owner else { throw Refusal.problem("An invitation makes an editor or a viewer; make an owner from the members list.") }
        let code = Tokens.make()
        try pool.transaction { db in
            // The maker's membership and account rows locked (as ShareLinks.create): a demotion,
            // removal or disablement commits first and nothing is made, or waits and its trigger
            // (migration 0123) deletes this invitation.
            // The map's row first, as member changes take it: the invitation's foreign key takes
            // it anyway, and taking it after the membership deadlocked with a removal.
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [mapID])
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [owner])
            try db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2 FOR SHARE", [mapID, owner])
            try Self.requireRole(db, .owner, on: mapID, person: owner, doing: "invite people", lock: false)
            let made = try db.query("""
                INSERT INTO map_invitations (map_id, code_hash, role, created_by, expires_at)
                SELECT $1, sha256(convert_to($2, 'UTF8')), $3, $4, now() + make_interval(days => $5::int)
                WHERE invite_right($1, $4)
                """, [mapID, code, role.rawValue, owner, Self.invitationDays]).affectedRows
            guard made == 1 else { throw Refusal.notAllowed("Only the map's owners can invite people.") }
        }
        return code
    }

    /// Withdraws one open invitation of the map; false when there is no such open invitation.
    public func withdrawInvitation(_ id: Int64, of mapID: Int64, by owner: Int64) throws -> Bool {
        try requireRole(.owner, on: mapID, person: owner, doing: "withdraw invitations")
        return try pool.query("DELETE FROM map_invitations WHERE id = $1 AND map_id = $2 AND used_at IS NULL", [id, mapID]).affectedRows == 1
    }

    /// Withdraws every open invitation of the map.
    public func withdrawInvitations(of mapID: Int64, by owner: Int64) throws -> Int {
        try requireRole(.owner, on: mapID, person: owner, doing: "withdraw invitations")
        return try pool.query("DELETE FROM map_invitations WHERE map_id = $1 AND used_at IS NULL", [mapID]).affectedRows
    }

    public enum Joined: Equatable {
        case joined(mapID: Int64, name: String)
        case alreadyMember(mapID: Int64, name: String)
    }

    /// Joins the map an invitation code names; the code is used up. The map is shown at once.
    public func join(code: String, person: Int64) throws -> Joined {
        guard Tokens.isWellFormed(code) else { throw Refusal.problem(Self.deadInvitation) }
        return try pool.transaction { db in
            // Which map and maker, unlocked; then, in the order every member change takes them, the
            // map's row, the maker's account, the invitation: a removal, demotion or disablement of
            // the maker either came first (its trigger deleted the invitation, or invite_right
            // below is false) or waits until this join is done. Locking the invitation first
            // would deadlock with a disablement, whose trigger deletes it.
            guard let found = try db.query("""
                SELECT map_id, created_by FROM map_invitations WHERE code_hash = sha256(convert_to($1, 'UTF8'))
                """, [code]).first, let maker: Int64 = try found.decode("created_by") else { throw Refusal.problem(Self.deadInvitation) }
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [try found.decode("map_id", as: Int64.self)])
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [maker])
            // The maker's right, checked as the invitation is used (invite_right, migration 0123):
            // a dead maker's invitation answers as one that does not exist.
            guard let row = try db.query("""
                SELECT i.id, i.map_id, i.role, m.display_name AS name, i.used_at IS NOT NULL AS used, i.expires_at <= now() AS expired
                FROM map_invitations i JOIN users m ON m.id = i.map_id
                WHERE i.code_hash = sha256(convert_to($1, 'UTF8')) AND i.created_by = $2 AND invite_right(i.map_id, i.created_by)
                  AND (i.invitee_email IS NULL OR (i.invitee_id = $3 AND NOT EXISTS (
                       SELECT 1 FROM map_invitation_blocks b WHERE b.person_id = $3 AND b.map_id = i.map_id)))
                FOR UPDATE OF i
                """, [code, maker, person]).first else { throw Refusal.problem(Self.deadInvitation) }
            let mapID: Int64 = try row.decode("map_id"), name: String = try row.decode("name")
            if try !db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2", [mapID, person]).isEmpty {
                try db.query("UPDATE users SET shown_map = $2 WHERE id = $1", [person, mapID])
                return .alreadyMember(mapID: mapID, name: name)
            }
            if try row.decode("used", as: Bool.self) || row.decode("expired", as: Bool.self) {
                throw Refusal.problem(Self.deadInvitation)
            }
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [mapID])
            try Self.checkRoom(db, mapID: mapID, person: person, quotas: quotas, joining: true)
            try db.query("INSERT INTO map_members (map_id, user_id, role) VALUES ($1, $2, $3)",
                         [mapID, person, try row.decode("role", as: String.self)])
            try db.query("UPDATE map_invitations SET used_at = now(), used_by = $2 WHERE id = $1", [try row.decode("id", as: Int64.self), person])
            try db.query("UPDATE users SET shown_map = $2 WHERE id = $1", [person, mapID])
            return .joined(mapID: mapID, name: name)
        }
    }

    /// What an open invitation joins (map name and role); nil when it is used, expired or unknown.
    /// (One by email is open only to the account it was made for, unless it blocked the map.)
    public func invitation(code: String, person: Int64) throws -> (mapID: Int64, name: String, role: MapRole)? {
        guard Tokens.isWellFormed(code) else { return nil }
        guard let row = try pool.query("""
            SELECT i.map_id, m.display_name AS name, i.role FROM map_invitations i JOIN users m ON m.id = i.map_id
            WHERE i.code_hash = sha256(convert_to($1, 'UTF8')) AND i.used_at IS NULL AND i.expires_at > now()
              AND invite_right(i.map_id, i.created_by)
              AND (i.invitee_email IS NULL OR (i.invitee_id = $2 AND NOT EXISTS (
                   SELECT 1 FROM map_invitation_blocks b WHERE b.person_id = $2 AND b.map_id = i.map_id)))
            """, [code, person]).first, let role = MapRole(parsing: try row.decode("role")) else { return nil }
        return (try row.decode("map_id"), try row.decode("name"), role)
    }

    package static let deadInvitation = "This invitation has been used, has expired or was withdrawn. Ask one of the map's owners for a new one."

    /// Gives a member another role. An owner may change anyone's, their own included, as long as
    /// the map keeps an owner.
    public func setRole(_ role: MapRole, of member: Int64, on mapID: Int64, by owner: Int64) throws {
        try pool.transaction { db in
            try Self.requireRole(db, .owner, on: mapID, person: owner, doing: "change roles", lock: true)
            let changed = try db.query("UPDATE map_members SET role = $3 WHERE map_id = $1 AND user_id = $2 RETURNING 1",
                                       [mapID, member, role.rawValue])
            guard !changed.isEmpty else { throw Refusal.problem("That person is not a member of this map.") }
            try Self.keepAnOwner(db, mapID: mapID)
        }
    }

    /// Removes a member (an owner removing anyone), or the person themselves (leaving). The last
    /// owner cannot go while the map has other members: they hand it over first, or delete it.
    public func remove(_ member: Int64, from mapID: Int64, by person: Int64) throws {
        try pool.transaction { db in
            if member != person {
                try Self.requireRole(db, .owner, on: mapID, person: person, doing: "remove members", lock: true)
            } else {
                try Self.requireRole(db, .viewer, on: mapID, person: person, doing: "leave it", lock: true)
            }
            let gone = try db.query("DELETE FROM map_members WHERE map_id = $1 AND user_id = $2 RETURNING 1", [mapID, member])
            guard !gone.isEmpty else { throw Refusal.problem("That person is not a member of this map.") }
            let left: Int = try db.query("SELECT count(*)::int AS n FROM map_members WHERE map_id = $1", [mapID])[0].decode("n")
            if left == 0 {
                throw Refusal.problem("You are this map's only member: delete the map instead (its page has the button).")
            }
            try Self.keepAnOwner(db, mapID: mapID)
        }
    }

    // MARK: Checks

    private func requireRole(_ role: MapRole, on mapID: Int64, person: Int64, doing what: String) throws {
        try pool.transaction { db in try Self.requireRole(db, role, on: mapID, person: person, doing: what, lock: false) }
    }

    /// The person's role on the map, at least `role`: else 404 for a non-member, 403 for a member.
    /// `lock`: the map's row, so member changes on one map happen one at a time (the caps and the
    /// last owner hold).
    package static func requireRole(_ db: PostgresConnection, _ role: MapRole, on mapID: Int64, person: Int64, doing what: String,
                            lock: Bool) throws {
        if lock { try db.query("SELECT 1 FROM users WHERE id = $1 AND kind = 'map' FOR UPDATE", [mapID]) }
        guard let row = try db.query("""
            SELECT mm.role FROM map_members mm JOIN users m ON m.id = mm.map_id AND m.kind = 'map'
            WHERE mm.map_id = $1 AND mm.user_id = $2
            """, [mapID, person]).first else { throw Refusal.notFound }
        let has = MapRole(parsing: try row.decode("role")) ?? .viewer
        guard has >= role else { throw Refusal.notAllowed("Only the map's owners can \(what).") }
    }

    private static func keepAnOwner(_ db: PostgresConnection, mapID: Int64) throws {
        let owners: Int = try db.query("SELECT count(*)::int AS n FROM map_members WHERE map_id = $1 AND role = 'owner'", [mapID])[0].decode("n")
        guard owners > 0 else {
            throw Refusal.problem("A map needs an owner: make another member an owner first, then change your own role or leave.")
        }
    }

    /// Room on the map (members) and for the person (maps), both under their row locks. `joining`:
    /// the person themselves asks (an invitation accepted or opened), so the sentence is theirs.
    private static func checkRoom(_ db: PostgresConnection, mapID: Int64, person: Int64, quotas: Quotas, joining: Bool = false) throws {
        let row = try db.query("""
            SELECT (SELECT count(*) FROM map_members WHERE map_id = $1)::int AS members,
                   (SELECT count(*) FROM map_members WHERE user_id = $2)::int AS maps
            FROM users WHERE id = $2 FOR UPDATE
            """, [mapID, person])[0]
        guard try row.decode("members", as: Int.self) < quotas.membersPerMap else {
            throw Refusal.problem("This map has \(quotas.membersPerMap) members, the limit.")
        }
        guard try row.decode("maps", as: Int.self) < quotas.sharedMaps else {
            throw Refusal.problem(joining ? "You belong to \(quotas.sharedMaps) shared maps, the limit. Leave one to join another."
                                          : "That person belongs to \(quotas.sharedMaps) shared maps, the limit.")
        }
    }
}
