import Foundation
import Postgres

/// What `virtual-tourist admin` does to accounts, in SQL. Each statement does what the recipe of the
/// same name in docs/admin.md does, so an administrator may use either. People are named by email,
/// case-insensitively, as everywhere else.
public struct PeopleAdmin: Sendable {
    package let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    /// One line of `admin list`.
    public struct Person: Sendable, Equatable {
        public let id: Int64
        public let email: String
        public let displayName: String
        /// YYYY-MM-DD in UTC.
        public let created: String
        public let disabled: Bool
        public let pins: Int
        public let photos: Int
        public let photoBytes: Int64
        /// What their photo quota counts: every map's photos charged to them (migration 0124).
        public let chargedBytes: Int64
        /// Bytes of the photos they brought in themselves (migration 0128), in chargedBytes too.
        public let ownPhotoBytes: Int64
        /// YYYY-MM-DD in UTC, or nil when no session was ever used.
        public let lastSeen: String?
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case noSuchPerson(String)

        public var description: String {
            switch self {
            case .noSuchPerson(let email): "nobody has the email \(email)"
            }
        }
    }

    /// Everyone, oldest account first, from the admin_users view.
    public func list() throws -> [Person] {
        try pool.query("""
            SELECT id, email, display_name, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS created,
                   disabled_at IS NOT NULL AS disabled, pins::int AS pins, photos::int AS photos, photo_bytes::bigint AS photo_bytes,
                   charged_bytes::bigint AS charged_bytes, own_photo_bytes, to_char(last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS last_seen
            FROM admin_users ORDER BY created_at, id
            """).map { row in
            Person(id: try row.decode("id"), email: try row.decode("email"), displayName: try row.decode("display_name"),
                   created: try row.decode("created"), disabled: try row.decode("disabled"), pins: try row.decode("pins"),
                   photos: try row.decode("photos"), photoBytes: try row.decode("photo_bytes"), chargedBytes: try row.decode("charged_bytes"),
                   ownPhotoBytes: try row.decode("own_photo_bytes"), lastSeen: try row.decode("last_seen"))
        }
    }

    /// Sets a new password and signs the person out everywhere (whoever knew the old one is out).
    public func setPassword(email: String, password: String) throws {
        let hash = try Password.hash(password)
        try changing(email, """
            WITH person AS (UPDATE users SET password_hash = $2 WHERE lower(email) = lower($1) RETURNING id),
                 signed_out AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM person))
            SELECT id FROM person
            """, [email, hash])
    }

    /// The person cannot sign in, and every session of theirs ends now; their pins and photos stay.
    public func disable(email: String) throws {
        try changing(email, """
            WITH person AS (UPDATE users SET disabled_at = coalesce(disabled_at, now()) WHERE lower(email) = lower($1) RETURNING id),
                 signed_out AS (DELETE FROM sessions WHERE user_id IN (SELECT id FROM person))
            SELECT id FROM person
            """, [email])
    }

    public func enable(email: String) throws {
        try changing(email, "UPDATE users SET disabled_at = NULL WHERE lower(email) = lower($1) RETURNING id", [email])
    }

    /// The person and everything of theirs (ON DELETE CASCADE); their images leave the photo store
    /// with the collector's next sweep.
    public func delete(email: String) throws {
        try changing(email, "DELETE FROM users WHERE lower(email) = lower($1) RETURNING id", [email])
    }

    private func changing(_ email: String, _ sql: String, _ parameters: [any PostgresEncodable]) throws {
        guard try !pool.query(sql, parameters).isEmpty else { throw Failure.noSuchPerson(email) }
    }

    /// A password for an account the administrator makes or resets: 120 random bits in 20
    /// characters a person can type.
    public static func temporaryPassword() -> String { String(Tokens.make().prefix(20)) }
}
