import Foundation
import Postgres
import Domain

/// A share link as its owner and the share routes see it (never its token: only the hash is kept).
public struct ShareLink: Sendable, Equatable {
    public let id: Int64
    public let userID: Int64
    /// The shared album's pin; nil for a link to the owner's whole map.
    public let pinID: Int64?
    public let label: String
    package let passwordHash: String?
    public let hideLocation: Bool
    public let createdAt: Date
    public let expiresAt: Date?
    public let revokedAt: Date?
    /// Who made it (migration 0123): it closes when they lose the right to share the map.
    public let madeBy: Int64
    /// When its maker lost that right; set: it answers as a link that does not exist.
    public let closedAt: Date?
    /// When a visitor last opened one of its pages (to 10 minutes); nil: never.
    public let lastUsedAt: Date?
    /// The pin's place name or coordinates, for the owner's list (nil for map links).
    /// Whether it shows the map's own photos too (migration 0129; its maker ticks so).
    public var ownPhotos = false
    /// The pin's place name or coordinates, for the owner's list (nil for map links).
    public var pinTitle: String? = nil
    /// The maker's name, for the owner's list.
    public var makerName: String? = nil

    public var hasPassword: Bool { passwordHash != nil }
    public var isMap: Bool { pinID == nil }
}

/// What a token opens.
public enum ShareLookup: Sendable, Equatable {
    case notFound
    case revoked
    case expired
    case open(ShareLink)
}

/// Share links in SQL (migration 0111). Tokens are 256 random bits (Tokens.make) and are stored
/// only as their SHA-256, computed by PostgreSQL as for sessions; a lookup is an exact match on
/// that hash, so nothing about one token (a prefix, say) helps find another. Every statement an
/// owner's request runs names the owner.
public struct ShareLinks: Sendable {
    package let pool: PostgresPool

    /// Expiry choices of the form, in days (0: never). 30 is the default: long enough for the
    /// people a trip's album is sent to to look at it, short enough that a link forwarded or
    /// pasted somewhere public stops working on its own once it is forgotten.
    public static let expiryChoices = [1, 7, 30, 90, 365, 0]
    public static let defaultExpiryDays = 30
    public static let maxLabelLength = 100

    public init(pool: PostgresPool) { self.pool = pool }

    public struct NewLink: Sendable {
        public var pinID: Int64?
        public var label = ""
        public var password: String?
        public var hideLocation = false
        /// Show the map's own photos too (off unless ticked: they are the members' own).
        public var ownPhotos = false
        public var expiresInDays: Int? = ShareLinks.defaultExpiryDays

        public init(pinID: Int64?) { self.pinID = pinID }
    }

    /// Makes a link of the map held by `userID`, made by `madeBy` (the person asking: the holder
    /// on their own map), and returns its token, the one time it exists outside the visitor's
    /// address bar; nil when the pin is not the map's or the maker may not share it (share_right,
    /// migration 0123: checked here again, not only by the session's statement).
    public func create(_ new: NewLink, userID: Int64, madeBy: Int64) throws -> (token: String, link: ShareLink)? {
        let token = Tokens.make()
        let hash = try new.password.map { try Password.hash($0) }
        // Cut in code points, as the column's CHECK (length) counts them.
        var label = String.UnicodeScalarView()
        label.append(contentsOf: new.label.trimmingCharacters(in: .whitespacesAndNewlines).unicodeScalars.prefix(Self.maxLabelLength))
        return try pool.transaction { db in
            // The rows the right stands on, locked: a removal, a demotion, editors_share turned off
            // or the maker disabled either commits first (then share_right below sees it and
            // nothing is made) or waits for this link, and its trigger then closes it. Without the
            // locks a link made as the maker is removed would outlive the removal's trigger and
            // open again if they were let back in.
            // In the order member changes take them (the map's row, then the person's), or a
            // removal and this would deadlock (found by LinkMakerTests' race).
            try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [userID])
            if madeBy != userID { try db.query("SELECT 1 FROM users WHERE id = $1 FOR SHARE", [madeBy]) }
            try db.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2 FOR SHARE", [userID, madeBy])
            let rows = try db.query("""
                INSERT INTO share_links (user_id, pin_id, token_hash, label, password_hash, hide_location, expires_at, made_by, own_photos)
                SELECT $1, $2, sha256(convert_to($3, 'UTF8')), $4, $5, $6,
                       CASE WHEN $7::int IS NULL THEN NULL ELSE now() + make_interval(days => $7::int) END, $8, $9
                WHERE ($2::bigint IS NULL OR EXISTS (SELECT 1 FROM pins WHERE id = $2 AND user_id = $1)) AND share_right($1, $8)
                RETURNING \(Self.columns)
                """, [userID, new.pinID, token, String(label), hash, new.hideLocation, new.expiresInDays, madeBy, new.ownPhotos])
            guard let row = rows.first else { return nil }
            return (token, try Self.link(row))
        }
    }

    /// The owner's links, newest first: those of one album, or (pinID nil) all of them.
    public func list(userID: Int64, pinID: Int64? = nil) throws -> [ShareLink] {
        try pool.query("""
            SELECT \(Self.columns("s.")), coalesce(p.place_name, round(p.lat::numeric, 4) || ', ' || round(p.lon::numeric, 4)) AS pin_title,
                   m.display_name AS maker_name
            FROM share_links s LEFT JOIN pins p ON p.id = s.pin_id AND p.user_id = s.user_id
            LEFT JOIN users m ON m.id = s.made_by
            WHERE s.user_id = $1 AND ($2::bigint IS NULL OR s.pin_id = $2)
            ORDER BY s.id DESC
            """, [userID, pinID]).map { row in
            var link = try Self.link(row)
            link.pinTitle = try row.decode("pin_title")
            link.makerName = try row.decode("maker_name")
            return link
        }
    }

    /// Withdraws a link at once (every request checks it). The pin it was for, or 0 for a map
    /// link; nil when it is not the owner's.
    public func revoke(_ id: Int64, userID: Int64) throws -> Int64? {
        let rows = try pool.query("""
            UPDATE share_links SET revoked_at = coalesce(revoked_at, now())
            WHERE id = $1 AND user_id = $2 RETURNING coalesce(pin_id, 0) AS pin_id
            """, [id, userID])
        return try rows.first?.decode("pin_id")
    }

    /// What a token opens, checked on every request (revocation and expiry take effect at once).
    /// `visit`: a page a person opened, remembered as the link's last use (at most one write per
    /// link every 10 minutes, after the answer's statement; a failure to write it is ignored).
    public func lookup(token: String, visit: Bool = false) throws -> ShareLookup {
        guard Tokens.isWellFormed(token) else { return .notFound }
        // The maker's right in the same statement (share_right, migration 0123): a link whose maker
        // left, was removed, demoted or disabled answers as one that does not exist, whatever
        // path resolved it; closed_at keeps it so once the right is back. A deleted maker's links
        // are deleted with them.
        let rows = try pool.query("""
            SELECT \(Self.columns), expires_at IS NOT NULL AND expires_at <= now() AS expired,
                   closed_at IS NULL AND share_right(user_id, made_by) AS usable,
                   (last_used_at IS NULL OR last_used_at < now() - interval '10 minutes') AS stale
            FROM share_links WHERE token_hash = sha256(convert_to($1, 'UTF8'))
            """, [token])
        guard let row = rows.first, try row.decode("usable", as: Bool.self) else { return .notFound }
        let link = try Self.link(row)
        if link.revokedAt != nil { return .revoked }
        if try row.decode("expired", as: Bool.self) { return .expired }
        if visit, try row.decode("stale", as: Bool.self) {
            _ = try? pool.query("""
                UPDATE share_links SET last_used_at = date_trunc('minute', now()) WHERE id = $1
                  AND (last_used_at IS NULL OR last_used_at < now() - interval '10 minutes')
                """, [link.id])
        }
        return .open(link)
    }

    /// A ready photo of the link's owner that the link shows (the album's current collection, or
    /// any album of the owner's for a map link), with the pin it belongs to.
    package func photo(_ photoID: Int64, of link: ShareLink) throws -> Int64? {
        try pool.query("""
            SELECT ph.pin_id FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.user_id = ph.user_id AND p.generation = ph.generation
            WHERE ph.id = $1 AND ph.user_id = $2 AND ($3::bigint IS NULL OR ph.pin_id = $3) AND ph.status = \(PhotoStatus.ready.sql)
            """, [photoID, link.userID, link.pinID]).first?.decode("pin_id")
    }

    /// The first ready photo of the shared album (the preview image).
    package func firstPhoto(of link: ShareLink) throws -> Int64? {
        guard let pinID = link.pinID else { return nil }
        return try pool.query("""
            SELECT ph.id FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.user_id = ph.user_id AND p.generation = ph.generation
            WHERE ph.pin_id = $1 AND ph.user_id = $2 AND ph.status = \(PhotoStatus.ready.sql)
            ORDER BY ph.position, ph.id LIMIT 1
            """, [pinID, link.userID]).first?.decode("id")
    }

    /// The value of the cookie that says "this browser gave this link's password": a hash of the
    /// token and the password's stored hash. Only the server knows the stored hash, so the
    /// cookie cannot be made without the password; a new password or another link's cookie does
    /// not match.
    package static func unlockValue(token: String, link: ShareLink) -> String? {
        guard let stored = link.passwordHash else { return nil }
        return SHA256.hex(Array("virtual-tourist share unlock\n\(token)\n\(stored)".utf8))
    }


    private static func columns(_ prefix: String) -> String {
        ["id", "user_id", "pin_id", "label", "password_hash", "hide_location", "created_at", "expires_at", "revoked_at",
         "made_by", "closed_at", "last_used_at", "own_photos"]
            .map { prefix + $0 }.joined(separator: ", ")
    }
    private static let columns = columns("")

    private static func link(_ row: PostgresRow) throws -> ShareLink {
        ShareLink(id: try row.decode("id"), userID: try row.decode("user_id"), pinID: try row.decode("pin_id"),
                  label: try row.decode("label"), passwordHash: try row.decode("password_hash"),
                  hideLocation: try row.decode("hide_location"), createdAt: try row.decode("created_at"),
                  expiresAt: try row.decode("expires_at"), revokedAt: try row.decode("revoked_at"),
                  madeBy: try row.decode("made_by"), closedAt: try row.decode("closed_at"), lastUsedAt: try row.decode("last_used_at"),
                  ownPhotos: try row.decode("own_photos"))
    }
}
