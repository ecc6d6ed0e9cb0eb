import Foundation
import Postgres

/// Pins and map regions in SQL. Every statement filters by user_id: a pin id alone never reaches
/// a row, so another person's pin is simply "not found".
public struct PinStore: Sendable {
    package let pool: PostgresPool


    public var quotas = Quotas()

    public init(pool: PostgresPool, quotas: Quotas = Quotas()) {
        self.pool = pool
        self.quotas = quotas
    }

    private static let columns = """
        p.id, p.lat, p.lon, p.place_name, p.status, p.created_at, p.era_from, p.era_to,
        \(photoCount) AS photo_count
        """

    /// Ready photos of the pin's current album: one row by primary key, kept by the triggers on photos
    /// (migrations/0094_pin_photo_counts.sql). Counting them here visited each of the pin's ~30
    /// photo rows, since a photo's status is in no index (so its pending → ready update stays HOT).
    package static let photoCount = """
        coalesce((SELECT c.ready FROM pin_photo_counts c WHERE c.pin_id = p.id AND c.generation = p.generation), 0)
        """

    /// Everything the map page shows, in one round trip after the session's (which brought the saved
    /// region): the number of pins, one page of the plain list, and what the first frame draws, the
    /// same answer /pins.json gives for that view (a 2560 × 1600 screen at the saved zoom, Web
    /// Mercator). Simple statements in one pipeline, with generic plans: the single statement they
    /// replace, with CTEs for the box and the union, was planned on every call, and the planning
    /// took longer than the run (docs/architecture.md, "Pages").
    public struct MapPageData: Sendable {
        public var total: Int
        public var listed: [Pin]
        public var view: Viewport
        /// The person's map version, read in the same snapshot as the rest, so it names exactly the
        /// state shown (MapPageCache keeps the page under it); nil when they have no version row.
        public var version: Int64?
    }

    /// The statements run in one REPEATABLE READ transaction opened and committed inside the
    /// pipeline (still one round trip): every one sees the same snapshot, the version included.
    public func mapPage(of userID: Int64, region: MapRegion, listOffset: Int, listLimit: Int,
                        maxMarkers: Int = 300) throws -> MapPageData {
        let box = Self.firstFrame(of: region)
        let view = Self.viewStatements(userID: userID, box: box, zoom: region.zoom, maxMarkers: maxMarkers)
        let results = try pool.pipeline([
            PostgresStatement("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
            PostgresStatement.genericPlans,
            PostgresStatement("SELECT version FROM map_versions WHERE user_id = $1", [userID]),
            PostgresStatement("SELECT coalesce(sum(pins), 0)::bigint AS n FROM pin_cells WHERE user_id = $1 AND level = 0", [userID]),
            PostgresStatement("SELECT \(Self.columns) FROM pins p WHERE p.user_id = $1 ORDER BY p.id DESC LIMIT $2 OFFSET $3",
                              [userID, listLimit, listOffset]),
        ] + view.statements + [PostgresStatement("COMMIT")])
        return MapPageData(total: try results[3][0].decode("n"), listed: try results[4].map(Self.pin),
                           view: try view.read(Array(results[5..<(5 + view.statements.count)]), maxMarkers),
                           version: try results[2].first?.decode("version"))
    }

    /// The box the first frame of a 2560 × 1600 screen shows around the region's centre.
    package static func firstFrame(of region: MapRegion) -> Box {
        let zoom = min(max(region.zoom, 0), 22)
        let dx = 1280 * 360 / (256 * pow(2, zoom))
        let dy = 800 * 2 * Double.pi / (256 * pow(2, zoom))
        let yc = log(tan(Double.pi / 4 + min(max(region.lat, -85), 85) * Double.pi / 360))
        func latitude(_ y: Double) -> Double { (2 * atan(exp(y)) - Double.pi / 2) * 180 / Double.pi }
        return Box(west: region.lon - dx, south: latitude(yc - dy), east: region.lon + dx, north: latitude(yc + dy))
    }

    /// A person's pins, newest first; within a box when one is given (west may exceed east across
    /// the antimeridian).
    public func pins(of userID: Int64, in box: Box? = nil,
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

    /// One page of a person's pins in id order, after the pin `after` (0: from the first): an
    /// export reads them page by page along the primary key, so no statement holds them all.
    public func pins(of userID: Int64, after: Int64, limit: Int) throws -> [Pin] {
        try pool.query("SELECT \(Self.columns) FROM pins p WHERE p.user_id = $1 AND p.id > $2 ORDER BY p.id LIMIT $3",
                       [userID, after, limit]).map(Self.pin)
    }

    /// A group of pins the map draws as one marker with a count.
    public struct Cluster: Sendable, Equatable {
        public let lat: Double
        public let lon: Double
        public let count: Int
    }

    /// What the map shows in a view: the pins themselves when at most `maxMarkers` fall inside,
    /// otherwise clusters with counts. `total` is every pin inside `box`, the box the answer counted
    /// (the asked box grown to the edges of the grid's cells): nothing is cut without saying so.
    public struct Viewport: Sendable {
        public var pins: [Pin]
        public var clusters: [Cluster]
        public var total: Int
        public var box: Box
    }

    /// A box in degrees; west > east when it crosses the antimeridian.
    public struct Box: Sendable, Equatable {
        public var west, south, east, north: Double
        public init(west: Double, south: Double, east: Double, north: Double) {
            (self.west, self.south, self.east, self.north) = (west, south, east, north)
        }
    }

    public func viewport(of userID: Int64, box: Box, zoom: Double, maxMarkers: Int = 300) throws -> Viewport {
        let view = Self.viewStatements(userID: userID, box: box, zoom: zoom, maxMarkers: maxMarkers)
        return try view.read(Array(try pool.pipeline([PostgresStatement.genericPlans] + view.statements).dropFirst()), maxMarkers)
    }

    /// The grid of pin_cells a view reads (migrations/0093_pin_cells.sql): cells of 360 / 2^level
    /// degrees, the level even and at most 16, chosen so a cell is between one and four times what
    /// the view wants (a quarter of a 256 px tile at this zoom, and never so small that more than
    /// 16 fit across the box): at most 17 × 17 cells come back. Nil when the view wants cells
    /// finer than level 16 keeps (zoomed in past street level): then the pins inside are grouped
    /// directly, which is cheap because the box is small.
    package struct ViewGrid {
        package let level: Int
        package let size: Double
        /// Columns; the second range is empty (1...0 as bounds) unless the view crosses the antimeridian.
        package let columns: (ClosedRange<Int>, (lower: Int, upper: Int))
        package let rows: ClosedRange<Int>
        package let box: Box

        package init?(_ asked: Box, zoom: Double) {
            let view = Normalized(asked)
            let finest = Int(floor(log2(360 / view.wantedCell(zoom: zoom))))
            let level = max(0, finest - finest % 2)
            guard level <= 16 else { return nil }
            let size = 360 / Double(1 << level)
            let last = 1 << level  // the column of lon = 180 exactly
            self.level = level
            self.size = size
            let x0 = Int(floor((view.west + 180) / size))
            let y0 = Int(floor((view.south + 90) / size)), y1 = Int(floor((view.north + 90) / size))
            rows = y0...y1
            let south = max(-90, Double(y0) * size - 90), north = min(90, Double(y1 + 1) * size - 90)
            if view.width >= 360 {
                columns = (0...last, (1, 0))
                box = Box(west: -180, south: south, east: 180, north: north)
            } else if view.east <= 180 {
                let x1 = Int(floor((view.east + 180) / size))
                columns = (x0...x1, (1, 0))
                box = Box(west: Double(x0) * size - 180, south: south, east: min(180, Double(x1 + 1) * size - 180), north: north)
            } else {
                let x1 = Int(floor((view.east - 360 + 180) / size))
                columns = (x0...last, (0, x1))
                box = Box(west: Double(x0) * size - 180, south: south, east: min(180, Double(x1 + 1) * size - 180), north: north)
            }
        }
    }

    /// A box with latitudes clamped and west in -180..<180; east = west + width (so past 180 when
    /// it crosses the antimeridian).
    package struct Normalized {
        package let west, south, east, north, width: Double
        package init(_ box: Box) {
            var width = box.east >= box.west ? box.east - box.west : box.east + 360 - box.west
            if !width.isFinite || width >= 360 { width = 360 }
            var west = box.west.truncatingRemainder(dividingBy: 360)
            if west < -180 { west += 360 } else if west >= 180 { west -= 360 }
            if width >= 360 { west = -180 }
            let a = min(max(box.south, -90), 90), b = min(max(box.north, -90), 90)
            (self.west, self.east, self.width, self.south, self.north) = (west, west + width, width, min(a, b), max(a, b))
        }

        /// The cell a view of this box wants, in degrees: a quarter of a 256 px tile at the zoom,
        /// and never so small that more than 16 fit across the box.
        package func wantedCell(zoom: Double) -> Double {
            max(360 / pow(2, min(max(zoom, 0), 22)) / 4, max(width, north - south) / 16, 1e-9)
        }
    }

    /// The two statements that answer a view, sent in one pipeline: the clusters (which also give
    /// the total), and the pins themselves, which PostgreSQL fetches only when the total is small —
    /// the count is an uncorrelated subquery, run once and checked before the scan. Every one is an
    /// index range on the person's own rows (pin_cells' key, pins' (user_id, lat, lon)), so they run
    /// with generic plans (`PostgresStatement.genericPlans`).
    package struct ViewStatements {
        package let statements: [PostgresStatement]
        package let box: Box

        package func read(_ results: [PostgresResult], _ maxMarkers: Int) throws -> Viewport {
            let clusters = try results[0].map { Cluster(lat: try $0.decode("lat"), lon: try $0.decode("lon"), count: try $0.decode("n")) }
            let total = clusters.reduce(0) { $0 + $1.count }
            if total <= maxMarkers {
                return Viewport(pins: try results[1].map(PinStore.pin), clusters: [], total: total, box: box)
            }
            return Viewport(pins: [], clusters: clusters, total: total, box: box)
        }
    }

    package static func viewStatements(userID: Int64, box: Box, zoom: Double, maxMarkers: Int) -> ViewStatements {
        if let grid = ViewGrid(box, zoom: zoom) {
            // Cells by their primary key (user_id, level, x, y): one index range per column range.
            let cells = """
                SELECT pins::bigint AS n, sum_lat / pins AS lat, sum_lon / pins AS lon FROM pin_cells
                WHERE user_id = $1 AND level = $2 AND x BETWEEN $3 AND $4 AND y BETWEEN $5 AND $6
                UNION ALL
                SELECT pins::bigint, sum_lat / pins, sum_lon / pins FROM pin_cells
                WHERE user_id = $1 AND level = $2 AND x BETWEEN $7 AND $8 AND y BETWEEN $5 AND $6
                """
            // The pins in exactly those cells: the cell of a pin is computed with the migration's
            // expression, so the pins listed are the pins counted, edges included.
            let pins = """
                SELECT \(columns) FROM pins p
                WHERE (SELECT coalesce(sum(pins), 0) FROM pin_cells
                       WHERE user_id = $1 AND level = $2 AND x BETWEEN $3 AND $4 AND y BETWEEN $5 AND $6)
                    + (SELECT coalesce(sum(pins), 0) FROM pin_cells
                       WHERE user_id = $1 AND level = $2 AND x BETWEEN $7 AND $8 AND y BETWEEN $5 AND $6) <= $9
                  AND p.user_id = $1 AND p.lat BETWEEN $10 AND $11
                  AND floor((p.lat + 90) / $12) BETWEEN $5 AND $6
                  AND (floor((p.lon + 180) / $12) BETWEEN $3 AND $4 OR floor((p.lon + 180) / $12) BETWEEN $7 AND $8)
                ORDER BY p.id DESC LIMIT $9
                """
            let common: [any PostgresEncodable] = [userID, grid.level, grid.columns.0.lowerBound, grid.columns.0.upperBound,
                                                   grid.rows.lowerBound, grid.rows.upperBound, grid.columns.1.lower, grid.columns.1.upper]
            return ViewStatements(statements: [
                PostgresStatement(cells, common),
                PostgresStatement(pins, common + [maxMarkers, grid.box.south, grid.box.north, grid.size]),
            ], box: grid.box)
        }
        // Zoomed in past the finest cells: group the pins inside directly, on a grid of a quarter
        // tile (a small box, so few pins).
        let view = Normalized(box)
        let size = view.wantedCell(zoom: zoom)
        let (w2, e2) = view.east > 180 ? (-180.0, view.east - 360) : (1.0, 0.0)
        let inside = """
            p.user_id = $1 AND p.lat BETWEEN $2 AND $3
            AND (p.lon BETWEEN $4 AND $5 OR p.lon BETWEEN $6 AND $7)
            """
        let parameters: [any PostgresEncodable] = [userID, view.south, view.north, view.west, min(view.east, 180), w2, e2]
        let answered = Box(west: view.west, south: view.south, east: view.east > 180 ? view.east - 360 : view.east, north: view.north)
        return ViewStatements(statements: [
            PostgresStatement("""
                SELECT count(*) AS n, avg(p.lat) AS lat, avg(p.lon) AS lon FROM pins p
                WHERE \(inside)
                GROUP BY floor(p.lat / $8), floor(p.lon / $8)
                """, parameters + [size]),
            PostgresStatement("""
                SELECT \(columns) FROM pins p
                WHERE (SELECT count(*) FROM pins p WHERE \(inside)) <= $8 AND \(inside)
                ORDER BY p.id DESC LIMIT $8
                """, parameters + [maxMarkers]),
        ], box: answered)
    }

    public func count(of userID: Int64) throws -> Int {
        try pool.query("SELECT count(*) AS n FROM pins WHERE user_id = $1", [userID])[0].decode("n")
    }

    public func pin(_ id: Int64, of userID: Int64) throws -> Pin? {
        try pool.query("SELECT \(Self.columns) FROM pins p WHERE p.id = $1 AND p.user_id = $2", [id, userID]).first.map(Self.pin)
    }

    /// A new pin with no album yet. Throws `QuotaReached` when the person has their limit of pins.
    public func create(for userID: Int64, lat: Double, lon: Double, placeName: String?) throws -> Pin {
        try pool.transaction { db in try Self.insert(db, userID: userID, by: userID, lat: lat, lon: lon, placeName: placeName, quotas: quotas) }
    }

    /// A pin dropped on the map: the pin and the start of its album in one transaction, as an
    /// import makes its pins (PinImportStore.confirm), so the workers never see the pin without its
    /// job and its row is not locked a second time. Throws `QuotaReached` when the person has their
    /// limit of pins; past their photo storage the pin stays new (its album starts when there is
    /// room and it is opened). The pin is returned as inserted.
    public func drop(for userID: Int64, by person: Int64? = nil, lat: Double, lon: Double, placeName: String?) throws -> Pin {
        try pool.transaction { db in
            // The map's pages are told by the INSERT, the album's by the start: no NOTIFY of its own.
            let pin = try Self.insert(db, userID: userID, by: person ?? userID, lat: lat, lon: lon, placeName: placeName, quotas: quotas,
                                      announceToMap: true)
            guard try AlbumStart.quotaReached(db, pinID: pin.id, userID: userID, person: person, quotas: quotas, newCollection: false) == nil else {
                return pin
            }
            try AlbumStart.collections(db, pinIDs: [pin.id], userID: userID, askedBy: person, announce: true)
            return pin
        }
    }

    /// The dropper's row is locked for the count (users.max_pins, else the default), so
    /// simultaneous drops cannot overshoot. Pins count against the person who drops them, on
    /// whichever map (pins.dropped_by).
    private static func insert(_ db: PostgresConnection, userID: Int64, by person: Int64, lat: Double, lon: Double, placeName: String?,
                               quotas: Quotas, announceToMap: Bool = false) throws -> Pin {
        let limit: Int = try db.query("SELECT coalesce(max_pins, $2) AS n FROM users WHERE id = $1 FOR UPDATE",
                                      [person, quotas.pins])[0].decode("n")
        let rows = try db.query("""
            INSERT INTO pins (user_id, lat, lon, place_name, dropped_by)
            SELECT $1, $2, $3, $4, $6 WHERE (SELECT count(*) FROM pins WHERE \(Self.droppedBy("$6"))) < $5
            RETURNING id, lat, lon, place_name, status, created_at, 0::bigint AS photo_count,
                      CASE WHEN $7 THEN pg_notify($8, \(AlbumChange.sqlPayload(user: "$1", pin: "id"))) END
            """, [userID, lat, lon, placeName, limit, person, announceToMap, AlbumChange.mapChannel])
        guard let row = rows.first else { throw QuotaReached.pins(limit) }
        return try pin(row)
    }

    /// The pins that count against a person's max_pins: those they dropped anywhere, and those on
    /// their own map with no dropper recorded (rows an administrator inserted).
    package static func droppedBy(_ person: String) -> String {
        "(dropped_by = \(person) OR (user_id = \(person) AND dropped_by IS NULL))"
    }

    public static let maxNameLength = 100

    /// Names a pin (its place_name); false when there is no such pin of this holder's. Announced
    /// to the map's open pages, as a drop is.
    public func rename(_ id: Int64, of userID: Int64, to name: String) throws -> Bool {
        try pool.retryingConflicts {
            try pool.query("""
                WITH named AS (UPDATE pins SET place_name = $3, updated_at = now() WHERE id = $1 AND user_id = $2 RETURNING id)
                SELECT pg_notify($4, \(AlbumChange.sqlPayload(user: "$2", pin: "id"))) FROM named
                """, [id, userID, name, AlbumChange.mapChannel]).count == 1
        }
    }

    /// True when a pin was deleted; false when there is no such pin of this holder's. The deletion
    /// is announced (AlbumChange), so the map's other open pages drop the pin. A pin
    /// deleted while its album downloads can meet the worker's batch write in a deadlock (the
    /// DELETE holds the pin and wants its photos, the batch the other way round); PostgreSQL then
    /// aborts one of them, and the DELETE, a whole statement, simply runs again.
    /// `unlessItHasOwnPhotos`: only while no one's own photo is on it (a pin made for a photo that
    /// was then not stored, which another photo may have joined meanwhile).
    public func delete(_ id: Int64, of userID: Int64, unlessItHasOwnPhotos: Bool = false) throws -> Bool {
        try pool.retryingConflicts {
            try pool.query("""
                WITH gone AS (DELETE FROM pins WHERE id = $1 AND user_id = $2
                              AND NOT ($4 AND EXISTS (SELECT 1 FROM own_photos o WHERE o.pin_id = $1)) RETURNING id)
                SELECT pg_notify($3, \(AlbumChange.sqlPayload(user: "$2", pin: "id"))) FROM gone
                """, [id, userID, AlbumChange.mapChannel, unlessItHasOwnPhotos]).count == 1
        }
    }

    // MARK: Region

    public func region(of userID: Int64) throws -> MapRegion? {
        try pool.query("SELECT center_lat, center_lon, zoom FROM map_regions WHERE user_id = $1", [userID]).first.map {
            MapRegion(lat: try $0.decode("center_lat"), lon: try $0.decode("center_lon"), zoom: try $0.decode("zoom"))
        }
    }

    /// Where the person left a map: their own (`sharedMap` nil) in map_regions, a shared one in
    /// their map_members row (nothing is saved once they are no longer a member).
    public func saveRegion(_ region: MapRegion, of userID: Int64, sharedMap: Int64? = nil) throws {
        if let sharedMap {
            try pool.query("""
                UPDATE map_members SET center_lat = $3, center_lon = $4, zoom = $5
                WHERE map_id = $1 AND user_id = $2 AND (center_lat, center_lon, zoom) IS DISTINCT FROM ($3, $4, $5)
                """, [sharedMap, userID, region.lat, region.lon, region.zoom])
            return
        }
        try pool.query("""
            INSERT INTO map_regions (user_id, center_lat, center_lon, zoom) VALUES ($1, $2, $3, $4)
            ON CONFLICT (user_id) DO UPDATE
            SET center_lat = EXCLUDED.center_lat, center_lon = EXCLUDED.center_lon, zoom = EXCLUDED.zoom, updated_at = now()
            -- The same view again writes nothing (no new row version, no WAL).
            WHERE (map_regions.center_lat, map_regions.center_lon, map_regions.zoom)
                  IS DISTINCT FROM (EXCLUDED.center_lat, EXCLUDED.center_lon, EXCLUDED.zoom)
            """, [userID, region.lat, region.lon, region.zoom])
    }

    /// A pin from a row of `pins` columns and its `photo_count`.
    fileprivate static func pin(_ row: PostgresRow) throws -> Pin {
        try pin(row, photoCount: row.decode("photo_count"))
    }

    /// A pin from a row of `pins` columns, with a photo count the caller has (the album reads count
    /// the photos they hold).
    package static func pin(_ row: PostgresRow, photoCount: Int) throws -> Pin {
        // The era where the row has it (a new pin's RETURNING has none: it has no era yet).
        let from = try? row.decode("era_from", as: Int?.self), to = try? row.decode("era_to", as: Int?.self)
        return Pin(id: try row.decode("id"), lat: try row.decode("lat"), lon: try row.decode("lon"),
                   placeName: try row.decode("place_name"), status: try row.decode("status"),
                   photoCount: photoCount, createdAt: try row.decode("created_at"),
                   era: Era.stored(from: from, to: to))
    }
}
