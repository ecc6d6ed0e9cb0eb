import Foundation
import Postgres
import Domain
import Imaging

/// A photo a person brought in themselves, as its album shows it.
public struct OwnPhoto: Sendable, Equatable {
    public enum Placement: String, Sendable { case file, person, estimated }

    public let id: Int64
    public let pinID: Int64
    public let addedBy: Int64
    /// The display name of who added it ("" when they have none).
    public let addedByName: String
    public let fileName: String
    public let format: ImageFormat
    public let width: Int
    public let height: Int
    /// "YYYY-MM-DDTHH:MM:SS" on the camera's clock.
    public let takenLocal: String?
    public let takenOffset: Int?
    public let latitude: Double?
    public let longitude: Double?
    public let camera: String?
    public let placed: Placement
    public let createdAt: Date
    public let originalBytes: Int64
    /// The blobs: the original (with its metadata), the display version, the thumbnails.
    public let original: String
    public let display: String
    public let thumb256: String?
    public let thumb512: String?
}

/// Own photos in PostgreSQL and their bytes in the photo store (docs/architecture.md, "Own
/// photos"). Every statement filters by the pin's holder (`userID`: the person, or the shared
/// map), which the caller takes from the session's MapAccess.
public struct OwnPhotoStore: Sendable {
    public let pool: PostgresPool
    public let store: any PhotoStore
    public let quotas: Quotas
    public let limits: PhotoVersions.Limits
    public let processing: PhotoProcessing

    public init(pool: PostgresPool, store: any PhotoStore, quotas: Quotas, limits: PhotoVersions.Limits, processing: PhotoProcessing) {
        (self.pool, self.store, self.quotas, self.limits, self.processing) = (pool, store, quotas, limits, processing)
    }

    public enum Added: Sendable, Equatable {
        case added(Int64)
        /// The same file is already in this pin's album.
        case alreadyHere(Int64)
        case refused(ImageRefusal)
        case quotaReached(QuotaReached)
        /// The pin is not the holder's (or was deleted meanwhile).
        case noPin
        /// Who adds it is no longer an editor or owner of the shared map.
        case notAMember
    }

    /// A file read and its versions made, not yet stored: where it goes may depend on its tags.
    public struct Prepared: Sendable {
        /// The original where the upload left it (its spooled body): stored from there.
        public let file: BlobFile
        public var original: String { file.hash }
        public let versions: PhotoVersions
        /// The original and every version: what the quota counts.
        public let size: Int64
        /// The versions' blobs once in the photo store (`putBlobs`): display, 256, 512.
        public fileprivate(set) var blobs: (display: String, thumb256: String?, thumb512: String?)?
    }

    public enum Preparation: Sendable {
        case ready(Prepared)
        case refused(ImageRefusal)
        case quotaReached(QuotaReached)
    }

    /// Reads the file and makes its versions on the processing line. What refuses it cheaply does
    /// so first: a quota already past (the file alone counts), a photo store known to be down.
    /// The decoders read the file where the upload left it, mapped (no copy in the heap), in a
    /// turn; it is stored from there by `putBlobs`.
    public func prepare(_ file: BlobFile, by person: Int64) throws -> Preparation {
        if let reached = try quotaReached(person, adding: Int64(file.count)) { return .quotaReached(reached) }
        if let seconds = (store as? StoreBreaker)?.refusal() { throw PhotoStoreError.refused(retryAfter: seconds, reason: nil) }
        let made: Result<PhotoVersions, ImageRefusal> = try processing.run(for: person) {
            // The pixels (tens of MB) are freed by the time the turn ends: given back at once, or
            // each handler thread's arena would keep a photo's worth until the next timed trim.
            defer { MemoryTrim.now() }
            return try file.withMapped { bytes in
                do throws(ImageRefusal) { return .success(try PhotoVersions.make(from: bytes, limits: limits)) } catch { return .failure(error) }
            }
        }
        switch made {
        case .failure(let refusal): return .refused(refusal)
        case .success(let versions):
            let size = Int64(file.count + versions.display.count + versions.thumbnails.values.reduce(0) { $0 + $1.count })
            if let reached = try quotaReached(person, adding: size) { return .quotaReached(reached) }
            return .ready(Prepared(file: file, versions: versions, size: size, blobs: nil))
        }
    }

    /// A file's bytes held in memory (a test's, a tool's): spooled to the system's temporary
    /// directory first, as an upload's are.
    public func prepare(_ bytes: [UInt8], by person: Int64) throws -> Preparation {
        try prepare(try BlobFile.holding(bytes), by: person)
    }

    private struct NotAMember: Error {}

    /// The photo of this file already on the pin, if any.
    public func existing(original: String, pinID: Int64, holder: Int64) throws -> Int64? {
        try pool.query("""
            SELECT id FROM own_photos WHERE pin_id = $1 AND user_id = $2 AND original = decode($3, 'hex')
            """, [pinID, holder, original]).first.map { try $0.decode("id") }
    }

    /// Stores a prepared file's blobs, then its row on the pin, in that order: a crash before the
    /// row leaves only blobs no row names, which the collector removes; nothing half-made is ever
    /// shown. The same file already on the pin is found by the insert's conflict (its blobs are
    /// the same blobs: storing them again costs a write, never a second copy).
    public func store(_ prepared: Prepared, fileName: String, pinID: Int64, holder: Int64, by person: Int64,
                      placed: OwnPhoto.Placement) throws -> Added {
        var prepared = prepared
        if prepared.blobs == nil { try putBlobs(&prepared) }
        guard let (display, thumb256, thumb512) = prepared.blobs else { return .noPin }
        let versions = prepared.versions
        let tags = versions.tags
        let rows: PostgresResult
        do {
            rows = try pool.transaction { db in
                // The quota again, under the person's row lock (as a pin's insert takes it): two
                // uploads checked at once before either was stored cannot both pass it.
                if let reached = try Self.quotaReached(try db.query(Self.quotaSQL + " FOR UPDATE OF u", [person, quotas.photoBytes]),
                                                       adding: prepared.size) { throw reached }
                // Still an editor or owner of the shared map, the membership held until the row is in:
                // one removed while the file was being made adds nothing (their photos leave with
                // them, migration 0130, and this one would otherwise come after the trigger).
                if holder != person, try db.query("""
                    SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2 AND role IN ('owner', 'editor') FOR KEY SHARE
                    """, [holder, person]).isEmpty { throw NotAMember() }
                return try db.query("""
                    INSERT INTO own_photos (pin_id, user_id, added_by, file_name, format, original, original_bytes, display, thumb_256, thumb_512,
                                            byte_size, width, height, taken_local, taken_offset, lat, lon, camera, placed)
                    SELECT p.id, p.user_id, $3, $4, $5, decode($6, 'hex'), $7, decode($8, 'hex'), decode($9, 'hex'), decode($10, 'hex'),
                           $11, $12, $13, $14::timestamp, $15, $16, $17, $18, $19
                    FROM pins p WHERE p.id = $1 AND p.user_id = $2
                    ON CONFLICT (pin_id, original) DO NOTHING
                    RETURNING id
                    """, [pinID, holder, person, Self.cleanName(fileName), versions.format.rawValue, prepared.original, Int64(prepared.file.count), display,
                          thumb256, thumb512, prepared.size, versions.width, versions.height, tags.takenLocal, tags.offsetMinutes,
                          tags.latitude, tags.longitude, tags.camera.map { String(String.UnicodeScalarView($0.unicodeScalars.prefix(200))) }, placed.rawValue])
            }
        } catch let error as PostgresError where error.sqlState == .foreignKeyViolation {
            return .noPin  // the pin was deleted meanwhile; its blobs go with the collector
        } catch let reached as QuotaReached {
            return .quotaReached(reached)
        } catch is NotAMember {
            return .notAMember
        }
        if let row = rows.first { return .added(try row.decode("id")) }
        // Another request added the same file meanwhile, or the pin is gone.
        if let id = try existing(original: prepared.original, pinID: pinID, holder: holder) { return .alreadyHere(id) }
        return .noPin
    }

    /// Puts the original and its versions in the photo store (before anything names them): a
    /// store that is down refuses the photo before a pin is made for it.
    public func putBlobs(_ prepared: inout Prepared) throws {
        let versions = prepared.versions
        _ = try store.put(prepared.file)
        let display = try store.put(versions.display)
        let thumb256 = try versions.thumbnails[256].map { try store.put($0) }
        let thumb512 = try versions.thumbnails[512].map { try store.put($0) }
        prepared.blobs = (display, thumb256, thumb512)
    }

    /// The holder's pin nearest to a point within `meters`, if any (an equirectangular distance:
    /// exact enough within a few kilometres, and it uses the pins' own coordinates only). The
    /// longitudes' difference is taken the short way round, so a pin at 179.999° E is near a
    /// photo taken at 179.999° W (Fiji, Kamchatka, the Aleutians).
    public func nearestPin(holder: Int64, lat: Double, lon: Double, within meters: Double) throws -> Int64? {
        let degrees = meters / 111_320
        let lonDegrees = degrees / max(0.01, cos(lat * .pi / 180))
        return try pool.query("""
            SELECT id FROM (
                SELECT id, lat, lon - $3 - 360 * round((lon - $3) / 360) AS east FROM pins
                WHERE user_id = $1 AND lat BETWEEN $2 - $4 AND $2 + $4) p
            WHERE abs(east) <= $5 AND (lat - $2) ^ 2 + (east * cos(radians($2))) ^ 2 <= $4 ^ 2
            ORDER BY (lat - $2) ^ 2 + (east * cos(radians($2))) ^ 2, id LIMIT 1
            """, [holder, lat, lon, degrees, lonDegrees]).first.map { try $0.decode("id") }
    }

    /// The pin of the person's photo with a position (its own GPS) taken nearest in time to
    /// `takenLocal`, within `minutes`: where a photo of the same walk without a position most
    /// likely was. Clocks compare in UTC where the files give offsets; a side without one is taken
    /// to be on the other's (one camera, one trip).
    public func pinBeside(holder: Int64, person: Int64, takenLocal: String, offset: Int?, within minutes: Int) throws -> Int64? {
        try pool.query("""
            SELECT pin_id FROM (
                SELECT pin_id, id, abs(extract(epoch FROM (taken_local - make_interval(mins => coalesce(taken_offset, $4::int, 0)::int))
                                       - ($3::timestamp - make_interval(mins => coalesce($4::int, taken_offset, 0)::int)))) AS apart
                FROM own_photos
                WHERE user_id = $1 AND added_by = $2 AND placed = 'file' AND lat IS NOT NULL
                  AND taken_local BETWEEN $3::timestamp - interval '15 hours' AND $3::timestamp + interval '15 hours') o
            WHERE apart <= $5 * 60 ORDER BY apart, id LIMIT 1
            """, [holder, person, takenLocal, offset, minutes]).first.map { try $0.decode("pin_id") }
    }

    /// Whether adding `bytes` would take the person past their photo quota.
    func quotaReached(_ person: Int64, adding bytes: Int64) throws -> QuotaReached? {
        try Self.quotaReached(try pool.query(Self.quotaSQL, [person, quotas.photoBytes]), adding: bytes)
    }

    /// A person's photo quota and what is charged to them ($1: the person, $2: the default limit).
    static let quotaSQL = """
        SELECT coalesce(u.max_photo_bytes, $2) AS byte_limit, \(AlbumStart.chargedBytes(person: "$1")) AS bytes
        FROM users u WHERE u.id = $1
        """

    static func quotaReached(_ rows: PostgresResult, adding bytes: Int64) throws -> QuotaReached? {
        let row = rows[0]
        let limit: Int64 = try row.decode("byte_limit")
        return try row.decode("bytes", as: Int64.self) + bytes > limit ? .photoBytes(limit) : nil
    }

    static let columns = """
        o.id, o.pin_id, o.added_by, coalesce(u.display_name, '') AS added_by_name, o.file_name, o.format, o.width, o.height,
        to_char(o.taken_local, 'YYYY-MM-DD"T"HH24:MI:SS') AS taken_local, o.taken_offset, o.lat, o.lon, o.camera, o.placed,
        o.created_at, o.original_bytes, encode(o.original, 'hex') AS original, encode(o.display, 'hex') AS display,
        encode(o.thumb_256, 'hex') AS thumb_256, encode(o.thumb_512, 'hex') AS thumb_512
        """

    static func photo(_ row: PostgresRow) throws -> OwnPhoto {
        OwnPhoto(id: try row.decode("id"), pinID: try row.decode("pin_id"), addedBy: try row.decode("added_by"),
                 addedByName: try row.decode("added_by_name"), fileName: try row.decode("file_name"),
                 format: ImageFormat(rawValue: try row.decode("format")) ?? .jpeg, width: try row.decode("width"), height: try row.decode("height"),
                 takenLocal: try row.decode("taken_local"), takenOffset: try row.decode("taken_offset"),
                 latitude: try row.decode("lat"), longitude: try row.decode("lon"), camera: try row.decode("camera"),
                 placed: OwnPhoto.Placement(rawValue: try row.decode("placed")) ?? .person, createdAt: try row.decode("created_at"),
                 originalBytes: try row.decode("original_bytes"), original: try row.decode("original"), display: try row.decode("display"),
                 thumb256: try row.decode("thumb_256"), thumb512: try row.decode("thumb_512"))
    }

    /// A pin's own photos, by the time they were taken (those without a time last, then as added).
    public func photos(pinID: Int64, holder: Int64) throws -> [OwnPhoto] {
        let statement = Self.photosStatement(pinID: pinID, holder: holder)
        return try Self.photos(from: try pool.query(statement.sql, statement.parameters))
    }

    /// The statement behind `photos`, for a caller that runs it beside its own (the album page:
    /// AlbumStore.album(pinID:userID:with:), one round trip for both).
    public static func photosStatement(pinID: Int64, holder: Int64) -> PostgresStatement {
        PostgresStatement("""
            SELECT \(Self.columns) FROM own_photos o JOIN users u ON u.id = o.added_by
            WHERE o.pin_id = $1 AND o.user_id = $2 ORDER BY o.taken_local NULLS LAST, o.id
            """, [pinID, holder])
    }

    public static func photos(from rows: PostgresResult) throws -> [OwnPhoto] { try rows.map(Self.photo) }

    /// The own photos of these pins of the holder's, by pin (the pin exports list them): one statement.
    public static func byPin(_ pinIDs: [Int64], holder: Int64, pool: PostgresPool) throws -> [Int64: [OwnPhoto]] {
        guard !pinIDs.isEmpty else { return [:] }
        let rows = try pool.query("""
            SELECT \(Self.columns) FROM own_photos o JOIN users u ON u.id = o.added_by
            WHERE o.pin_id = ANY($1::bigint[]) AND o.user_id = $2 ORDER BY o.pin_id, o.taken_local NULLS LAST, o.id
            """, ["{" + pinIDs.map(String.init).joined(separator: ",") + "}", holder])
        return Dictionary(grouping: try photos(from: rows), by: \.pinID)
    }

    /// The photo's pin's own photos in the album's order, and the pin's name as its page shows it
    /// (place or coordinates), for the photo's page: one statement. Nil when the photo is not the
    /// holder's.
    public func siblings(of id: Int64, holder: Int64) throws -> (photos: [OwnPhoto], pinTitle: String)? {
        let rows = try pool.query("""
            SELECT \(Self.columns), p.place_name AS pin_place, p.lat AS pin_lat, p.lon AS pin_lon
            FROM own_photos o JOIN users u ON u.id = o.added_by JOIN pins p ON p.id = o.pin_id AND p.user_id = o.user_id
            WHERE o.pin_id = (SELECT pin_id FROM own_photos WHERE id = $1 AND user_id = $2) AND o.user_id = $2
            ORDER BY o.taken_local NULLS LAST, o.id
            """, [id, holder])
        guard let first = rows.first else { return nil }
        let place: String? = try first.decode("pin_place")
        let lat: Double = try first.decode("pin_lat"), lon: Double = try first.decode("pin_lon")
        let title = place ?? Pin.fourDecimals(lat) + ", " + Pin.fourDecimals(lon)
        return (try Self.photos(from: rows), title)
    }

    public func photo(_ id: Int64, holder: Int64) throws -> OwnPhoto? {
        try pool.query("""
            SELECT \(Self.columns) FROM own_photos o JOIN users u ON u.id = o.added_by WHERE o.id = $1 AND o.user_id = $2
            """, [id, holder]).first.map(Self.photo)
    }

    /// Removes a photo when `person` added it, or `mayRemoveAny` (an owner of the map): the pin's
    /// id, or nil when there is no such photo they may remove. Its blobs go with the collector.
    public func remove(_ id: Int64, holder: Int64, by person: Int64, mayRemoveAny: Bool) throws -> Int64? {
        try pool.query("""
            DELETE FROM own_photos WHERE id = $1 AND user_id = $2 AND (added_by = $3 OR $4) RETURNING pin_id
            """, [id, holder, person, mayRemoveAny]).first.map { try $0.decode("pin_id") }
    }

    /// The name as shown: the last path component, in NFC (macOS writes names decomposed),
    /// control and format characters out, at most 200 code points (what the table counts).
    public static func cleanName(_ name: String) -> String {
        let last = name.precomposedStringWithCanonicalMapping.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        let kept = last.unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) && $0.value != 0x7F && $0.properties.generalCategory != .format }
        let clean = String(String.UnicodeScalarView(kept)).trimmingCharacters(in: .whitespaces)
        return clean.isEmpty ? "photo" : String(String.UnicodeScalarView(clean.unicodeScalars.prefix(200)))
    }
}

extension OwnPhoto {
    /// Who added it as pages and credits name them ("a member" when they gave no name).
    public var addedByShown: String { addedByName.isEmpty ? "a member" : addedByName }

    /// The photo as the album's zip lists it: the original for who may download it, else the
    /// display version (no metadata); credited to who added it, named by its file's stem.
    public func archived(original: Bool) -> ArchivedPhoto {
        let stem = fileName.split(separator: ".", omittingEmptySubsequences: false).dropLast().joined(separator: ".")
        var photo = ArchivedPhoto(id: id, hash: original ? self.original : display, contentType: original ? format.contentType : "image/jpeg",
                                  title: stem.isEmpty ? fileName : stem, ownerName: addedByShown,
                                  license: "own photo", licenseURL: nil, pageURL: nil)
        photo.dateTaken = takenLocal.map { $0.replacingOccurrences(of: "T", with: " ") }
        return photo
    }

    /// The blobs a request is served from, as the photo route's responder takes them: the display
    /// version and its thumbnails, or (`original`) the file as it came and nothing smaller.
    package func served(original: Bool, holder: Int64) -> PhotoAccess.Photo {
        PhotoAccess.Photo(userID: holder, pinID: pinID, contentType: original ? format.contentType : "image/jpeg",
                          original: original ? self.original : display,
                          thumb256: original ? nil : thumb256, thumb512: original ? nil : thumb512)
    }
}
