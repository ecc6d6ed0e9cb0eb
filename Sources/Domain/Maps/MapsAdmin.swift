import Foundation
import Postgres

/// What `virtual-tourist admin list` says of shared maps, from the admin_maps view (migration
/// 0120), as the recipes in docs/admin.md ("Shared maps") read it.
public struct MapsAdmin: Sendable {
    package let pool: PostgresPool

    public init(pool: PostgresPool) { self.pool = pool }

    public struct Map: Sendable, Equatable {
        public let id: Int64
        public let name: String
        public let pins: Int
        public let photos: Int
        /// Bytes of its albums' stored images (charged to its members, not to the map).
        public let photoBytes: Int64
        public let members: Int
        /// The owners' emails, comma-separated; nil when the map has none (the recipe to give it one
        /// is in docs/admin.md).
        public let owners: String?
        /// YYYY-MM-DD in UTC.
        public let created: String
    }

    /// Every shared map, oldest first.
    public func list() throws -> [Map] {
        try pool.query("""
            SELECT id, name, pins::int AS pins, photos::int AS photos, photo_bytes::bigint AS photo_bytes, members::int AS members, owners,
                   to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS created
            FROM admin_maps ORDER BY created_at, id
            """).map { row in
            Map(id: try row.decode("id"), name: try row.decode("name"), pins: try row.decode("pins"), photos: try row.decode("photos"),
                photoBytes: try row.decode("photo_bytes"), members: try row.decode("members"), owners: try row.decode("owners"), created: try row.decode("created"))
        }
    }
}
