import Foundation
import Postgres

/// Imports waiting for confirmation (migrations/0112_pin_imports.sql), and the pins a confirmed
/// one becomes. Every statement filters by the person: another person's import is "not found".
package struct PinImportStore: Sendable {
    package let pool: PostgresPool
    package var quotas = Quotas()

    package init(pool: PostgresPool, quotas: Quotas = Quotas()) {
        self.pool = pool
        self.quotas = quotas
    }

    /// An import as the preview shows it.
    package struct Pending: Sendable {
        package let id: Int64
        package let fileName: String
        package let file: PinImport
        package let expiresAt: Date
    }

    /// How many pins the person has and may have.
    package struct PinRoom: Sendable {
        package let pins: Int
        package let limit: Int
        package var left: Int { max(0, limit - pins) }
    }

    /// The person's room (their max_pins counts what they dropped on any map).
    package func room(of userID: Int64) throws -> PinRoom {
        let row = try pool.query("""
            SELECT coalesce(u.max_pins, $2) AS pin_limit, (SELECT count(*) FROM pins WHERE \(PinStore.droppedBy("$1"))) AS pins
            FROM users u WHERE u.id = $1
            """, [userID, quotas.pins])[0]
        return PinRoom(pins: try row.decode("pins"), limit: try row.decode("pin_limit"))
    }

    /// Keeps a file's points for the preview, in place of the person's earlier unconfirmed import.
    /// `person`: who uploads (their earlier preview for this map goes; nobody else's does).
    package func save(_ file: PinImport, fileName: String, for userID: Int64, by person: Int64? = nil) throws -> Int64 {
        let person = person ?? userID
        let contents = String(decoding: try JSONEncoder().encode(file), as: UTF8.self)
        return try pool.transaction { db in
            try db.query("DELETE FROM pin_imports WHERE user_id = $1 AND coalesce(imported_by, user_id) = $2", [userID, person])
            // Everyone's expired previews go too: they can never be confirmed, and hold no pin.
            try db.query("DELETE FROM pin_imports WHERE expires_at < now()")
            return try db.query("""
                INSERT INTO pin_imports (user_id, file_name, format, contents, expires_at, imported_by)
                VALUES ($1, $2, $3, $4::jsonb, now() + make_interval(mins => $5::int), $6) RETURNING id
                """, [userID, fileName, file.format.rawValue, contents, PinImport.Limits.previewMinutes, person])[0].decode("id")
        }
    }

    package func pending(_ id: Int64, of userID: Int64, by person: Int64? = nil) throws -> Pending? {
        guard let row = try pool.query("""
            SELECT id, file_name, contents::text AS contents, expires_at FROM pin_imports
            WHERE id = $1 AND user_id = $2 AND expires_at > now() AND (imported_by IS NULL OR imported_by = $3)
            """, [id, userID, person ?? userID]).first else { return nil }
        let contents: String = try row.decode("contents")
        return Pending(id: try row.decode("id"), fileName: try row.decode("file_name"),
                       file: try JSONDecoder().decode(PinImport.self, from: Data(contents.utf8)),
                       expiresAt: try row.decode("expires_at"))
    }

    package func cancel(_ id: Int64, of userID: Int64, by person: Int64? = nil) throws -> Bool {
        try pool.query("""
            DELETE FROM pin_imports WHERE id = $1 AND user_id = $2 AND expires_at > now() AND (imported_by IS NULL OR imported_by = $3)
            """, [id, userID, person ?? userID]).affectedRows == 1
    }

    package enum Confirmed {
        case created(pinIDs: [Int64], fileName: String)
        case notFound
        case quotaReached(QuotaReached)
    }

    /// Makes the pins of a pending import in one transaction, under the same lock and limit as
    /// dropping one pin (PinStore.drop): all of them or, past the limit, none. `name` gives an
    /// unnamed point the name a dropped pin would get. Their albums start as a dropped pin's does
    /// (AlbumStart.collections), all in one statement rather than a transaction per pin, whose
    /// cost grows with the file (docs/performance.md, "Exports, zips and imports"); the workers'
    /// fair queue then takes them in turn with everyone else's, under the provider budget. Past the
    /// person's photo storage the pins stay new, as a dropped pin does.
    /// `person`: who imports (their max_pins counts the pins, on whichever map).
    package func confirm(_ id: Int64, of userID: Int64, by person: Int64? = nil, name: (PinImport.Point) -> String?) throws -> Confirmed {
        let person = person ?? userID
        return try pool.transaction { db in
            let limit: Int = try db.query("SELECT coalesce(max_pins, $2) AS n FROM users WHERE id = $1 FOR UPDATE",
                                          [person, quotas.pins])[0].decode("n")
            guard let row = try db.query("""
                SELECT file_name, contents::text AS contents FROM pin_imports
                WHERE id = $1 AND user_id = $2 AND expires_at > now() AND (imported_by IS NULL OR imported_by = $3) FOR UPDATE
                """, [id, userID, person]).first else { return .notFound }
            let contents: String = try row.decode("contents")
            let file = try JSONDecoder().decode(PinImport.self, from: Data(contents.utf8))
            let points = file.points.map { PinImport.Point(name: $0.name ?? name($0), lat: $0.lat, lon: $0.lon) }
            // The photo-storage check startCollection makes, once for all (none of these pins has photos).
            let collect = try AlbumStart.quotaReached(db, pinID: 0, userID: userID, person: person, quotas: quotas, newCollection: false) == nil
            let rows = try db.query("""
                INSERT INTO pins (user_id, lat, lon, place_name, status, dropped_by)
                SELECT $1, (p->>'lat')::float8, (p->>'lon')::float8, p->>'name', \(PinStatus.new.sql), $4
                FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS e(p, n)
                WHERE (SELECT count(*) FROM pins WHERE \(PinStore.droppedBy("$4"))) + jsonb_array_length($2::jsonb) <= $3
                ORDER BY n
                RETURNING id
                """, [userID, String(decoding: try JSONEncoder().encode(points), as: UTF8.self), limit, person])
            // The limit holds for all of them or none: the count is the one before the insert.
            guard !rows.isEmpty || points.isEmpty else { return .quotaReached(.pins(limit)) }
            let pinIDs: [Int64] = try rows.map { try $0.decode("id") }.sorted()
            if collect { try AlbumStart.collections(db, pinIDs: pinIDs, userID: userID, askedBy: person) }
            try db.query("DELETE FROM pin_imports WHERE id = $1 AND user_id = $2", [id, userID])
            if let first = pinIDs.first { try AlbumChange(userID: userID, pinID: first).announceToMap(db) }
            return .created(pinIDs: pinIDs, fileName: try row.decode("file_name"))
        }
    }
}
