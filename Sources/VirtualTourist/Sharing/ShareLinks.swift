import Foundation
import Postgres

/// A share link as its owner and the share routes see it (never its token: only the hash is kept).
public struct ShareLink: Sendable, Equatable {
    public let id: Int64
    public let userID: Int64
    /// The shared album's pin; nil for a link to the owner's whole map.
    public let pinID: Int64?
    public let label: String
    let passwordHash: String?
    public let hideLocation: Bool
    public let createdAt: Date
    public let expiresAt: Date?
    public let revokedAt: Date?
    /// The pin's place name or coordinates, for the owner's list (nil for map links).
    public var pinTitle: String? = nil

    public var hasPassword: Bool { passwordHash != nil }
    public var isMap: Bool { pinID == nil }
}

/// What a token opens.
public enum ShareLookup: Sendable, Equatable {
    case notFound
    case revoked
    case expired
    /// The owner's account is disabled: closed until it is enabled again.
    case suspended
    case open(ShareLink)
}

/// Share links in SQL (migration 0111). Tokens are 256 random bits (Tokens.make) and are stored
/// only as their SHA-256, computed by PostgreSQL as for sessions; a lookup is an exact match on
/// that hash, so nothing about one token (a prefix, say) helps find another. Every statement an
/// owner's request runs names the owner.
public struct ShareLinks: Sendable {
    let pool: PostgresPool

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
        public var expiresInDays: Int? = ShareLinks.defaultExpiryDays

        public init(pinID: Int64?) { self.pinID = pinID }
    }

    /// Makes a link and returns its token, the one time it exists outside the visitor's address
    /// bar; nil when the pin is not the owner's.
    public func create(_ new: NewLink, userID: Int64) throws -> (token: String, link: ShareLink)? {
        let token = Tokens.make()
        let hash = try new.password.map { try Password.hash($0) }
        // Cut in code points, as the column's CHECK (length) counts them.
        var label = String.UnicodeScalarView()
        label.append(contentsOf: new.label.trimmingCharacters(in: .whitespacesAndNewlines).unicodeScalars.prefix(Self.maxLabelLength))
        let rows = try pool.query("""
            INSERT INTO share_links (user_id, pin_id, token_hash, label, password_hash, hide_location, expires_at)
            SELECT $1, $2, sha256(convert_to($3, 'UTF8')), $4, $5, $6,
                   CASE WHEN $7::int IS NULL THEN NULL ELSE now() + make_interval(days => $7::int) END
            WHERE $2::bigint IS NULL OR EXISTS (SELECT 1 FROM pins WHERE id = $2 AND user_id = $1)
            RETURNING \(Self.columns)
            """, [userID, new.pinID, token, String(label), hash, new.hideLocation, new.expiresInDays])
        guard let row = rows.first else { return nil }
        return (token, try Self.link(row))
    }

    /// The owner's links, newest first: those of one album, or (pinID nil) all of them.
    public func list(userID: Int64, pinID: Int64? = nil) throws -> [ShareLink] {
        try pool.query("""
            SELECT \(Self.columns("s.")), coalesce(p.place_name, round(p.lat::numeric, 4) || ', ' || round(p.lon::numeric, 4)) AS pin_title
            FROM share_links s LEFT JOIN pins p ON p.id = s.pin_id AND p.user_id = s.user_id
            WHERE s.user_id = $1 AND ($2::bigint IS NULL OR s.pin_id = $2)
            ORDER BY s.id DESC
            """, [userID, pinID]).map { row in
            var link = try Self.link(row)
            link.pinTitle = try row.decode("pin_title")
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
    public func lookup(token: String) throws -> ShareLookup {
        guard Tokens.isWellFormed(token) else { return .notFound }
        // The owner's row in the same statement: a disabled person's links close at once (and
        // open again on enable); a deleted person's links are deleted with them.
        let rows = try pool.query("""
            SELECT \(Self.columns("s.")), s.expires_at IS NOT NULL AND s.expires_at <= now() AS expired,
                   u.disabled_at IS NOT NULL AS suspended
            FROM share_links s JOIN users u ON u.id = s.user_id
            WHERE s.token_hash = sha256(convert_to($1, 'UTF8'))
            """, [token])
        guard let row = rows.first else { return .notFound }
        let link = try Self.link(row)
        if link.revokedAt != nil { return .revoked }
        if try row.decode("expired", as: Bool.self) { return .expired }
        if try row.decode("suspended", as: Bool.self) { return .suspended }
        return .open(link)
    }

    /// A ready photo of the link's owner that the link shows (the album's current collection, or
    /// any album of the owner's for a map link), with the pin it belongs to.
    func photo(_ photoID: Int64, of link: ShareLink) throws -> Int64? {
        try pool.query("""
            SELECT ph.pin_id FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.user_id = ph.user_id AND p.generation = ph.generation
            WHERE ph.id = $1 AND ph.user_id = $2 AND ($3::bigint IS NULL OR ph.pin_id = $3) AND ph.status = \(PhotoStatus.ready.sql)
            """, [photoID, link.userID, link.pinID]).first?.decode("pin_id")
    }

    /// The first ready photo of the shared album (the preview image).
    func firstPhoto(of link: ShareLink) throws -> Int64? {
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
    static func unlockValue(token: String, link: ShareLink) -> String? {
        guard let stored = link.passwordHash else { return nil }
        return SHA256.hex(Array("virtual-tourist share unlock\n\(token)\n\(stored)".utf8))
    }

    /// A request path as the access log writes it: a share link's token cut to its first four
    /// characters, enough to tell links apart in a log and far too few to open one.
    public static func loggedPath(_ path: String) -> String {
        guard path.hasPrefix("/s/") else { return path }
        let rest = path.dropFirst(3)
        let token = rest.prefix { $0 != "/" && $0 != "?" }
        return "/s/" + token.prefix(4) + (token.count > 4 ? "…" : "") + rest.dropFirst(token.count)
    }

    private static func columns(_ prefix: String) -> String {
        ["id", "user_id", "pin_id", "label", "password_hash", "hide_location", "created_at", "expires_at", "revoked_at"]
            .map { prefix + $0 }.joined(separator: ", ")
    }
    private static let columns = columns("")

    private static func link(_ row: PostgresRow) throws -> ShareLink {
        ShareLink(id: try row.decode("id"), userID: try row.decode("user_id"), pinID: try row.decode("pin_id"),
                  label: try row.decode("label"), passwordHash: try row.decode("password_hash"),
                  hideLocation: try row.decode("hide_location"), createdAt: try row.decode("created_at"),
                  expiresAt: try row.decode("expires_at"), revokedAt: try row.decode("revoked_at"))
    }
}
