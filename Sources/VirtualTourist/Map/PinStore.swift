import Foundation
import Postgres

/// Pins and map regions in SQL. Every statement filters by user_id: a pin id alone never reaches
/// a row, so another person's pin is simply "not found".
public struct PinStore: Sendable {
    let pool: PostgresPool


    public var quotas = Quotas()

    public init(pool: PostgresPool, quotas: Quotas = Quotas()) {
        self.pool = pool
        self.quotas = quotas
    }

    private static let columns = """
        p.id, p.lat, p.lon, p.place_name, p.status, p.created_at,
        \(photoCount) AS photo_count
        """

    /// Ready photos of the pin's current album: an index-only scan of photos_pin_generation_idx
    /// (pin_id, generation, status), about 30 entries per pin, never a pass over the person's photos.
    static let photoCount = """
        (SELECT count(*) FROM photos ph WHERE ph.pin_id = p.id AND ph.generation = p.generation AND ph.status = \(PhotoStatus.ready.sql))
        """

    /// Everything the map page shows, in one statement (one round trip after the session's): the
    /// saved region, the number of pins, one page of the plain list, and the pins inside the view
    /// the first frame draws (a 2560 × 1600 screen at the saved zoom, Web Mercator), newest first.
    public struct MapPageData: Sendable {
        public var region: MapRegion?
        public var total: Int
        public var listed: [Pin]
        public var inView: [Pin]
    }

    public func mapPage(of userID: Int64, listOffset: Int, listLimit: Int, viewLimit: Int,
                        defaultRegion: MapRegion) throws -> MapPageData {
        let rows = try pool.query("""
            WITH region AS (
                SELECT r.user_id IS NOT NULL AS saved, coalesce(r.center_lat, $5) AS lat,
                       coalesce(r.center_lon, $6) AS lon, coalesce(r.zoom, $7) AS zoom
                FROM (SELECT 1) one LEFT JOIN map_regions r ON r.user_id = $1),
            box AS (
                SELECT lon, 1280 * 360 / (256 * power(2, zoom)) AS dx,
                       degrees(2 * atan(exp(yc - dy)) - pi() / 2) AS south, degrees(2 * atan(exp(yc + dy)) - pi() / 2) AS north
                FROM (SELECT lon, zoom, ln(tan(pi() / 4 + radians(lat) / 2)) AS yc,
                             800 * 2 * pi() / (256 * power(2, zoom)) AS dy FROM region) v),
            listed AS (SELECT id FROM pins WHERE user_id = $1 ORDER BY id DESC LIMIT $3 OFFSET $2),
            shown AS (
                SELECT p.id FROM pins p, box
                WHERE p.user_id = $1 AND p.lat BETWEEN box.south AND box.north
                  AND (box.dx >= 180 OR abs(p.lon - box.lon - 360 * round((p.lon - box.lon) / 360)) <= box.dx)
                ORDER BY p.id DESC LIMIT $4),
            chosen AS (
                SELECT id, bool_or(in_list) AS in_list, bool_or(in_view) AS in_view
                FROM (SELECT id, true AS in_list, false AS in_view FROM listed
                      UNION ALL SELECT id, false, true FROM shown) both_parts
                GROUP BY id)
            SELECT region.saved, region.lat AS region_lat, region.lon AS region_lon, region.zoom AS region_zoom,
                   (SELECT count(*) FROM pins WHERE user_id = $1) AS total, x.*
            FROM region LEFT JOIN (
                SELECT c.in_list, c.in_view, \(Self.columns)
                FROM chosen c JOIN pins p ON p.id = c.id AND p.user_id = $1) x ON true
            ORDER BY x.id DESC
            """, [userID, listOffset, listLimit, viewLimit, defaultRegion.lat, defaultRegion.lon, defaultRegion.zoom])
        guard let first = rows.first else { throw PostgresError.connection("the map page query returned no row") }
        var data = MapPageData(region: nil, total: try first.decode("total"), listed: [], inView: [])
        if try first.decode("saved", as: Bool.self) {
            data.region = MapRegion(lat: try first.decode("region_lat"), lon: try first.decode("region_lon"),
                                    zoom: try first.decode("region_zoom"))
        }
        for row in rows where !row.isNull("id") {
            let pin = try Self.pin(row)
            if try row.decode("in_list", as: Bool.self) { data.listed.append(pin) }
            if try row.decode("in_view", as: Bool.self) { data.inView.append(pin) }
        }
        return data
    }

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

    /// A group of pins the map draws as one marker with a count.
    public struct Cluster: Sendable, Equatable {
        public let lat: Double
        public let lon: Double
        public let count: Int
    }

    /// What the map shows in a box: the pins themselves when at most `maxMarkers` fall inside,
    /// otherwise clusters from a grid computed in SQL (one grouped statement, whatever the number
    /// of pins). `total` is always every pin inside: nothing is cut without saying so.
    public func viewport(of userID: Int64, box: (west: Double, south: Double, east: Double, north: Double),
                         zoom: Double, maxMarkers: Int = 300) throws -> (pins: [Pin], clusters: [Cluster], total: Int) {
        let inside = """
            p.user_id = $1 AND p.lat BETWEEN $2 AND $3
            AND (CASE WHEN $4 <= $5 THEN p.lon BETWEEN $4 AND $5 ELSE p.lon >= $4 OR p.lon <= $5 END)
            """
        // One pass over the box: the grid's groups, whose counts also give the total. Only when
        // few pins are inside is a second statement needed, for the pins themselves.
        // A cell a quarter of a 256 px tile at this zoom, and never so small that the box holds
        // more than 16 × 16 of them: at most 17 × 17 = 289 clusters.
        let width = box.east >= box.west ? box.east - box.west : box.east + 360 - box.west
        let span = max(width, box.north - box.south)
        let cell = max(360 / pow(2, min(max(zoom, 0), 22)) / 4, span / 16, 1e-6)
        let rows = try pool.query("""
            SELECT count(*) AS n, avg(p.lat) AS lat, avg(p.lon) AS lon FROM pins p
            WHERE \(inside)
            GROUP BY floor(p.lat / $6), floor(p.lon / $6)
            """, [userID, box.south, box.north, box.west, box.east, cell])
        let clusters = try rows.map { Cluster(lat: try $0.decode("lat"), lon: try $0.decode("lon"), count: try $0.decode("n")) }
        let total = clusters.reduce(0) { $0 + $1.count }
        if total <= maxMarkers {
            return (try pins(of: userID, in: box, limit: maxMarkers), [], total)
        }
        return ([], clusters, total)
    }

    public func count(of userID: Int64) throws -> Int {
        try pool.query("SELECT count(*) AS n FROM pins WHERE user_id = $1", [userID])[0].decode("n")
    }

    public func pin(_ id: Int64, of userID: Int64) throws -> Pin? {
        try pool.query("SELECT \(Self.columns) FROM pins p WHERE p.id = $1 AND p.user_id = $2", [id, userID]).first.map(Self.pin)
    }

    /// Throws `QuotaReached` when the person has their limit of pins (users.max_pins, else the
    /// default). The person's row is locked for the count, so simultaneous drops cannot overshoot.
    public func create(for userID: Int64, lat: Double, lon: Double, placeName: String?) throws -> Pin {
        try pool.transaction { db in
            let limit: Int = try db.query("SELECT coalesce(max_pins, $2) AS n FROM users WHERE id = $1 FOR UPDATE",
                                          [userID, quotas.pins])[0].decode("n")
            let rows = try db.query("""
                INSERT INTO pins (user_id, lat, lon, place_name)
                SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM pins WHERE user_id = $1) < $5
                RETURNING id, lat, lon, place_name, status, created_at, 0::bigint AS photo_count
                """, [userID, lat, lon, placeName, limit])
            guard let row = rows.first else { throw QuotaReached.pins(limit) }
            return try Self.pin(row)
        }
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
