import Foundation
import Postgres

/// Pins and map regions in SQL. Every statement filters by user_id: a pin id alone never reaches
/// a row, so another person's pin is simply "not found".
public struct PinStore: Sendable {
    let pool: PostgresPool

    /// More pins than this and the map page asks for the pins in view only.
    public static let embedLimit = 1000

    public init(pool: PostgresPool) { self.pool = pool }

    private static let columns = """
        p.id, p.lat, p.lon, p.place_name, p.status, p.created_at,
        (SELECT count(*) FROM photos ph WHERE ph.pin_id = p.id AND ph.user_id = p.user_id AND ph.status = \(PhotoStatus.ready.sql)) AS photo_count
        """

    /// A person's pins, newest first; within a box when one is given (west may exceed east across
    /// the antimeridian).
    public func pins(of userID: Int64, in box: (west: Double, south: Double, east: Double, north: Double)? = nil,
                     limit: Int = 5000) throws -> [Pin] {
        let rows: PostgresResult
        if let box {
            rows = try pool.query("""
                SELECT \(Self.columns) FROM pins p
                WHERE p.user_id = $1 AND p.lat BETWEEN $2 AND $3
                  AND (CASE WHEN $4 <= $5 THEN p.lon BETWEEN $4 AND $5 ELSE p.lon >= $4 OR p.lon <= $5 END)
                ORDER BY p.id DESC LIMIT $6
                """, [userID, box.south, box.north, box.west, box.east, limit])
        } else {
            rows = try pool.query("SELECT \(Self.columns) FROM pins p WHERE p.user_id = $1 ORDER BY p.id DESC LIMIT $2",
                                  [userID, limit])
        }
        return try rows.map(Self.pin)
    }

    public func count(of userID: Int64) throws -> Int {
        try pool.query("SELECT count(*) AS n FROM pins WHERE user_id = $1", [userID])[0].decode("n")
    }

    public func pin(_ id: Int64, of userID: Int64) throws -> Pin? {
        try pool.query("SELECT \(Self.columns) FROM pins p WHERE p.id = $1 AND p.user_id = $2", [id, userID]).first.map(Self.pin)
    }

    public func create(for userID: Int64, lat: Double, lon: Double, placeName: String?) throws -> Pin {
        let row = try pool.query("""
            INSERT INTO pins (user_id, lat, lon, place_name) VALUES ($1, $2, $3, $4)
            RETURNING id, lat, lon, place_name, status, created_at, 0::bigint AS photo_count
            """, [userID, lat, lon, placeName])[0]
        return try Self.pin(row)
    }

    /// True when a pin was deleted; false when there is no such pin of this person's.
    public func delete(_ id: Int64, of userID: Int64) throws -> Bool {
        try pool.query("DELETE FROM pins WHERE id = $1 AND user_id = $2", [id, userID]).affectedRows == 1
    }

    // MARK: Region

    public func region(of userID: Int64) throws -> MapRegion? {
        try pool.query("SELECT center_lat, center_lon, zoom FROM map_regions WHERE user_id = $1", [userID]).first.map {
            MapRegion(lat: try $0.decode("center_lat"), lon: try $0.decode("center_lon"), zoom: try $0.decode("zoom"))
        }
    }

    public func saveRegion(_ region: MapRegion, of userID: Int64) throws {
        try pool.query("""
            INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES ($1, $2, $3, $4)
            ON CONFLICT (user_id) DO UPDATE
            SET center_lat = EXCLUDED.center_lat, center_lon = EXCLUDED.center_lon, zoom = EXCLUDED.zoom, updated_at = now()
            """, [userID, region.lat, region.lon, region.zoom])
    }

    private static func pin(_ row: PostgresRow) throws -> Pin {
        Pin(id: try row.decode("id"), lat: try row.decode("lat"), lon: try row.decode("lon"),
            placeName: try row.decode("place_name"), status: try row.decode("status"),
            photoCount: try row.decode("photo_count"), createdAt: try row.decode("created_at"))
    }
}
