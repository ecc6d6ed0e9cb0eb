import Foundation
import Postgres
import Domain

/// A photo in an album, without its bytes.
public struct AlbumPhoto: Sendable, Codable, Equatable {
    public let id: Int64
    public let position: Int
    public let status: PhotoStatus
    public let title: String
    public let ownerName: String
    public let license: String
    /// The licence deed, when the provider's licence list names one.
    public var licenseURL: String? = nil
    public let pageURL: String?
    public let dateTaken: String?
    public let width: Int?
    public let height: Int?
    public let generation: Int
    public let remoteID: String
}

public struct Album: Sendable {
    public let pin: Pin
    public let generation: Int
    public let error: String?
    public let page: Int?
    public let totalPages: Int?
    public internal(set) var photos: [AlbumPhoto]
    /// While downloading: what the album waits for and when it resumes (a fixed phrase).
    public var waiting: String? = nil
    /// False when Retry cannot help (an invalid API key).
    public var retryable = true
    /// Who dropped the pin and who last took a New Collection (a shared map shows them); nil
    /// once their account is gone.
    public var droppedBy: String? = nil
    public var collectedBy: String? = nil
    /// The years its photos were taken in (nil: any time), kept on the pin.
    public var era: Era? = nil

    /// The album as a share link that hides the location shows it: no photo titles (a title often
    /// names the place), no links to the photos' pages and no provider ids (the provider's page
    /// shows the geotag). The credits keep author and licence, as the licences require.
    public func locationHidden() -> Album {
        var album = self
        album.photos = photos.map { photo in
            AlbumPhoto(id: photo.id, position: photo.position, status: photo.status, title: "", ownerName: photo.ownerName,
                       license: photo.license, licenseURL: photo.licenseURL, pageURL: nil, dateTaken: photo.dateTaken,
                       width: photo.width, height: photo.height, generation: photo.generation, remoteID: "")
        }
        return album
    }

    public var isComplete: Bool { pin.status != .downloading }
    public var readyCount: Int { photos.filter { $0.status == .ready }.count }
}

/// The album side people see, in SQL (docs/architecture.md, Albums): album pages' reads, photos and
/// their bytes, and starting work (collections, picked photos), which queues jobs for
/// AlbumJobQueue. Every statement names the owner (user_id) and, where results land, the
/// generation: a newer collection always wins over a late result.
public struct AlbumStore: Sendable {
    package let pool: PostgresPool
    /// Where the images live; rows keep their hash.
    public let photos: any PhotoStore

    public var quotas = Quotas()
    /// Told the owner and blobs of every ready photo an album read loads, so the thumbnails the
    /// page then asks for need no round trip (PhotoStore/PhotoAccess).
    package var access: PhotoAccess?

    public init(pool: PostgresPool, quotas: Quotas = Quotas(), photos: any PhotoStore = FileStore(root: ".data/photos")) {
        self.pool = pool
        self.quotas = quotas
        self.photos = photos
    }


    // MARK: Reading

    /// The album of a pin: the pin and its current photos in one statement (one round trip).
    public func album(pinID: Int64, userID: Int64) throws -> Album? {
        try album(pinSQL: "$1", id: pinID, userID: userID)
    }

    /// The album and another statement's rows in one round trip (the album page and its own
    /// photos: OwnPhotoStore.photosStatement).
    public func album(pinID: Int64, userID: Int64, with other: PostgresStatement) throws -> (album: Album?, other: PostgresResult) {
        var otherRows: PostgresResult?
        let album = try album(pinSQL: "$1", id: pinID, userID: userID, with: other) { otherRows = $0 }
        return (album, otherRows!)
    }

    /// The album a photo belongs to (the photo page), also in one statement.
    public func album(containingPhoto photoID: Int64, userID: Int64) throws -> Album? {
        try album(pinSQL: "(SELECT pin_id FROM photos WHERE id = $1 AND user_id = $2)", id: photoID, userID: userID)
    }

    /// A photo's licence (kept once in photo_licenses, migration 0095) under the names the
    /// readers decode; `l` is photo_licenses LEFT JOINed on ph.license_id.
    package static let licenseColumns = "coalesce(l.name, '') AS license, nullif(l.url, '') AS license_url"

    private func album(pinSQL: String, id: Int64, userID: Int64, with other: PostgresStatement? = nil,
                       otherRows: (PostgresResult) -> Void = { _ in }) throws -> Album? {
        let mark = access?.mark()
        let statement = PostgresStatement("""
            SELECT p.id, p.lat, p.lon, p.place_name, p.status, p.created_at, p.generation, p.error, p.page, p.total_pages, p.waiting, p.retryable,
                   p.era_from, p.era_to, ph.id AS photo_id, ph.position, ph.status AS photo_status, ph.title, ph.owner_name,
                   \(Self.licenseColumns), ph.page_url, ph.date_taken, ph.width, ph.height, ph.remote_id,
                   \(Self.accessColumns), dropper.display_name AS dropped_by, collector.display_name AS collected_by
            FROM pins p
            LEFT JOIN users dropper ON dropper.id = p.dropped_by
            LEFT JOIN users collector ON collector.id = p.collected_by
            LEFT JOIN photos ph ON ph.pin_id = p.id AND ph.user_id = p.user_id AND ph.generation = p.generation
            LEFT JOIN photo_licenses l ON l.id = ph.license_id
            WHERE p.id = \(pinSQL) AND p.user_id = $2
            ORDER BY ph.position, ph.id
            """, [id, userID])
        let rows: PostgresResult
        if let other {
            let results = try pool.pipeline([statement, other])
            rows = results[0]
            otherRows(results[1])
        } else {
            rows = try pool.query(statement.sql, statement.parameters)
        }
        guard let first = rows.first else { return nil }
        let generation: Int = try first.decode("generation")
        var photos: [AlbumPhoto] = []
        photos.reserveCapacity(rows.count)
        for row in rows where !row.isNull("photo_id") {
            photos.append(AlbumPhoto(
                id: try row.decode("photo_id"), position: try row.decode("position"), status: try row.decode("photo_status"),
                title: try row.decode("title"), ownerName: try row.decode("owner_name"), license: try row.decode("license"),
                licenseURL: try row.decode("license_url"),
                pageURL: try row.decode("page_url"), dateTaken: try row.decode("date_taken"),
                width: try row.decode("width"), height: try row.decode("height"),
                generation: generation, remoteID: try row.decode("remote_id")))
        }
        let pin = try PinStore.pin(first, photoCount: photos.reduce(0) { $0 + ($1.status == .ready ? 1 : 0) })
        if let access, let mark {
            var ready: [(id: Int64, photo: PhotoAccess.Photo)] = []
            for row in rows where !row.isNull("photo_id") {
                if let photo = try Self.accessPhoto(row, userID: userID, pinID: pin.id) { ready.append((try row.decode("photo_id"), photo)) }
            }
            access.remember(photos: ready, since: mark)
        }
        return Album(pin: pin, generation: generation, error: try first.decode("error"), page: try first.decode("page"),
                     totalPages: try first.decode("total_pages"), photos: photos, waiting: try first.decode("waiting"),
                     retryable: try first.decode("retryable"), droppedBy: try first.decode("dropped_by"),
                     collectedBy: try first.decode("collected_by"), era: try Self.era(first))
    }

    /// A pin and its ready photos for the zip download, in the album's order; nil when the pin is
    /// not the person's. Names and credits only: the bytes are read one photo at a time
    /// (`originalBytes`).
    public func archive(pinID: Int64, userID: Int64) throws -> (pin: Pin, era: Era?, photos: [ArchivedPhoto])? {
        let rows = try pool.query("""
            SELECT p.id, p.lat, p.lon, p.place_name, p.status, p.created_at, p.era_from, p.era_to,
                   ph.id AS photo_id, encode(ph.hash, 'hex') AS hash, ph.content_type, ph.title, ph.owner_name,
                   \(Self.licenseColumns), ph.page_url, ph.date_taken
            FROM pins p
            LEFT JOIN photos ph ON ph.pin_id = p.id AND ph.user_id = p.user_id AND ph.generation = p.generation
                                AND ph.status = \(PhotoStatus.ready.sql)
            LEFT JOIN photo_licenses l ON l.id = ph.license_id
            WHERE p.id = $1 AND p.user_id = $2
            ORDER BY ph.position, ph.id
            """, [pinID, userID])
        guard let first = rows.first else { return nil }
        var photos: [ArchivedPhoto] = []
        photos.reserveCapacity(rows.count)
        for row in rows where !row.isNull("photo_id") {
            photos.append(ArchivedPhoto(
                id: try row.decode("photo_id"), hash: try row.decode("hash"), contentType: try row.decode("content_type"),
                title: try row.decode("title"), ownerName: try row.decode("owner_name"), license: try row.decode("license"),
                licenseURL: try row.decode("license_url"), pageURL: try row.decode("page_url"), dateTaken: try row.decode("date_taken")))
        }
        let pin = try PinStore.pin(first, photoCount: photos.count)
        return (pin, try Self.era(first), photos)
    }

    /// One archived photo's original bytes: from the store, or from the row while they are still
    /// there (read then, so an album of old rows is not read whole). Nil: removed since.
    public func originalBytes(_ photo: ArchivedPhoto, userID: Int64) throws -> [UInt8]? {
        if let hash = photo.hash {
            guard let bytes = try photos.get(hash) else {
                throw PhotoStoreError(description: "photo \(photo.id): blob \(hash) is missing from the store")
            }
            return bytes
        }
        return try image(photo.id, userID: userID)?.bytes
    }

    public func photo(_ id: Int64, userID: Int64) throws -> (photo: AlbumPhoto, pinID: Int64)? {
        let rows = try pool.query("""
            SELECT ph.id, ph.position, ph.status, ph.title, ph.owner_name, \(Self.licenseColumns), ph.page_url, ph.date_taken,
                   ph.width, ph.height, ph.generation, ph.remote_id, ph.pin_id
            FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.user_id = ph.user_id AND p.generation = ph.generation
            LEFT JOIN photo_licenses l ON l.id = ph.license_id
            WHERE ph.id = $1 AND ph.user_id = $2
            """, [id, userID])
        guard let row = rows.first else { return nil }
        return (try Self.photo(row), try row.decode("pin_id"))
    }

    /// What PhotoAccess keeps of a photo, in the names `accessPhoto` decodes (`ph` is photos).
    package static let accessColumns = """
        ph.status = 'ready' AS access_ready, ph.content_type AS access_type, encode(ph.hash, 'hex') AS access_hash,
        encode(ph.thumb_256, 'hex') AS access_256, encode(ph.thumb_512, 'hex') AS access_512
        """

    /// A ready photo whose bytes are in the store; nil for any other (those take the slow path).
    package static func accessPhoto(_ row: PostgresRow, userID: Int64, pinID: Int64) throws -> PhotoAccess.Photo? {
        guard try row.decode("access_ready", as: Bool?.self) == true, let original: String = try row.decode("access_hash"),
              let type: String = try row.decode("access_type") else { return nil }
        return PhotoAccess.Photo(userID: userID, pinID: pinID, contentType: type, original: original,
                                 thumb256: try row.decode("access_256"), thumb512: try row.decode("access_512"))
    }

    /// A ready photo of the person's, as PhotoAccess keeps it, in one statement by primary key; nil
    /// when there is no such photo. A photo whose bytes are still in its row comes with them instead.
    package enum AccessPhoto {
        case stored(PhotoAccess.Photo)
        case inRow(bytes: [UInt8], contentType: String, pinID: Int64)
    }

    package func accessPhoto(_ id: Int64, userID: Int64) throws -> AccessPhoto? {
        guard let row = try pool.query("""
            SELECT ph.pin_id, \(Self.accessColumns), CASE WHEN ph.hash IS NULL THEN ph.bytes END AS row_bytes
            FROM photos ph WHERE ph.id = $1 AND ph.user_id = $2 AND ph.status = 'ready'
            """, [id, userID]).first else { return nil }
        if let photo = try Self.accessPhoto(row, userID: userID, pinID: try row.decode("pin_id")) { return .stored(photo) }
        let bytes: Data = try row.decode("row_bytes")
        return .inRow(bytes: Array(bytes), contentType: try row.decode("access_type"), pinID: try row.decode("pin_id"))
    }

    /// The hash of a ready photo of the person's (its strong ETag; a 304 needs no bytes). found is
    /// false when there is no such photo; hash is nil for one whose bytes are still in the row.
    public func imageHash(_ id: Int64, userID: Int64, width: Int? = nil) throws -> (hash: String?, found: Bool) {
        guard let row = try pool.query("""
            SELECT encode(\(Self.blobColumn(width)), 'hex') AS hash FROM photos WHERE id = $1 AND user_id = $2 AND status = 'ready'
            """, [id, userID]).first else {
            return (nil, false)
        }
        return (try row.decode("hash"), true)
    }

    /// The blob to serve for a requested width: its thumbnail when there is one, else the original.
    /// `width` is one of Thumbnailer.widths (the route maps any other onto them), never free text.
    /// The columns hold the SHA-256's 32 bytes (migration 0095); readers take encode(…, 'hex').
    package static func blobColumn(_ width: Int?) -> String {
        switch width {
        case 256: "coalesce(thumb_256, hash)"
        case 512: "coalesce(thumb_512, hash)"
        default: "hash"
        }
    }

    /// The bytes of a ready photo, with what the browser needs to cache it: from the store, or
    /// from the row while the photo is not yet moved there.
    public func image(_ id: Int64, userID: Int64, width: Int? = nil) throws -> (bytes: [UInt8], contentType: String, hash: String)? {
        // A thumbnail is always a JPEG; the original has its own type.
        let rows = try pool.query("""
            SELECT encode(\(Self.blobColumn(width)), 'hex') AS hash, CASE WHEN hash IS NULL THEN bytes END AS bytes,
                   CASE WHEN \(Self.blobColumn(width)) IS DISTINCT FROM hash THEN 'image/jpeg' ELSE content_type END AS content_type
            FROM photos WHERE id = $1 AND user_id = $2 AND status = \(PhotoStatus.ready.sql)
            """, [id, userID])
        guard let row = rows.first else { return nil }
        let contentType: String = try row.decode("content_type")
        if let hash: String = try row.decode("hash") {
            guard let bytes = try photos.get(hash) else {
                throw PhotoStoreError(description: "photo \(id): blob \(hash) is missing from the store")
            }
            return (bytes, contentType, hash)
        }
        let data: Data = try row.decode("bytes")
        let bytes = Array(data)
        return (bytes, contentType, SHA256.hex(bytes))
    }

    public func deletePhoto(_ id: Int64, userID: Int64) throws -> Int64? {
        let rows = try pool.query("DELETE FROM photos WHERE id = $1 AND user_id = $2 RETURNING pin_id", [id, userID])
        guard let row = rows.first else { return nil }
        let pinID: Int64 = try row.decode("pin_id")
        try notifyEvent(userID: userID, pinID: pinID)
        return pinID
    }

    // MARK: Starting work

    /// What a collection does with the pin's era.
    public enum EraChange: Sendable, Equatable {
        case keep
        /// nil: any time.
        case change(to: Era?)
    }

    /// The era on a row with `era_from` and `era_to` (nil: any time, or years the row should not
    /// hold, which the table's check refuses anyway).
    package static func era(_ row: PostgresRow) throws -> Era? {
        Era.stored(from: try row.decode("era_from", as: Int?.self), to: try row.decode("era_to", as: Int?.self))
    }

    public enum Start: Equatable {
        case started
        /// A collection is already downloading (New Collection is disabled meanwhile).
        case busy
        /// Nothing to do (the pin already has its album).
        case unchanged
        case notFound
        /// The person's New Collections this hour or stored bytes are at their limit.
        case quotaReached(QuotaReached)
    }

    /// Starts a new collection for a pin: bumps the generation, drops the old photos, cancels the
    /// old job and queues a new one, in one transaction. `onlyIfNew` is the automatic first
    /// album; otherwise it is New Collection or Retry. Concurrent calls serialize on the pin's row
    /// lock, so two New Collection presses make exactly one collection.
    /// `person`: who asked (the fair queue takes turns by them; the album shows them).
    /// `era`: `.keep` (New Collection, Retry, the first album) or the album's new era, kept on
    /// the pin; a new era forgets the pages shown, which belonged to the old question.
    public func startCollection(pinID: Int64, userID: Int64, by person: Int64? = nil, onlyIfNew: Bool = false,
                                era: EraChange = .keep) throws -> Start {
        try pool.transaction { db in
            let rows = try db.query("SELECT status, dropped_by, era_from, era_to FROM pins WHERE id = $1 AND user_id = $2 FOR UPDATE",
                                    [pinID, userID])
            guard let row = rows.first else { return .notFound }
            let status: PinStatus = try row.decode("status")
            if onlyIfNew && status != .new { return .unchanged }
            if status == .downloading { return .busy }
            // The automatic first album (a pin opened that has none yet: its dropper was past their
            // storage then) is the dropper's, whoever opens it: a look charges nobody.
            let asker = onlyIfNew ? (try row.decode("dropped_by", as: Int64?.self) ?? person) : person
            if let reached = try AlbumStart.quotaReached(db, pinID: pinID, userID: userID, person: asker, quotas: quotas, newCollection: !onlyIfNew) {
                return .quotaReached(asker == person ? reached : .droppersStorage)
            }
            // Only a collection that starts changes the era (a refused one leaves the album as it was).
            if case .change(let new) = era, new != (try Self.era(row)) {
                try db.query("""
                    UPDATE pins SET era_from = $3, era_to = $4, total_pages = NULL, total_photos = NULL, shown_pages = '{}'
                    WHERE id = $1 AND user_id = $2
                    """, [pinID, userID, new?.from, new?.to])
            }
            try AlbumStart.collections(db, pinIDs: [pinID], userID: userID, askedBy: asker, announce: true)
            return .started
        }
    }

    /// Adds chosen photos (from the picker) to the current album and queues their download.
    /// Returns how many were new (already-saved ones are skipped).
    /// `person`: who picks them (their photo quota is checked, and counts them: `photos.added_by`);
    /// throws `QuotaReached` when they have no storage left.
    public func addPhotos(_ photos: [RemotePhoto], pinID: Int64, userID: Int64, by person: Int64? = nil) throws -> Int? {
        try pool.transaction { db in
            let rows = try db.query("SELECT status, generation FROM pins WHERE id = $1 AND user_id = $2 FOR UPDATE", [pinID, userID])
            guard let row = rows.first else { return nil }
            guard try row.decode("status", as: PinStatus.self) != .downloading else { return 0 }
            if let reached = try AlbumStart.quotaReached(db, pinID: 0, userID: userID, person: person, quotas: quotas, newCollection: false) {
                throw reached
            }
            let generation: Int = try row.decode("generation")
            var added = 0
            for photo in photos {
                added += try Self.insertPlaceholders(db, pinID: pinID, userID: userID, generation: generation,
                                                     firstPosition: nil, [photo], addedBy: person ?? userID).count
            }
            guard added > 0 else { return 0 }
            try db.query("UPDATE pins SET status = \(PinStatus.downloading.sql), error = NULL, updated_at = now() WHERE id = $1 AND user_id = $2",
                         [pinID, userID])
            try Self.replaceJob(db, pinID: pinID, userID: userID, generation: generation, kind: .photos)
            return added
        }
    }

    /// Cancels the pin's live job and queues `kind` in its place (one live job per pin), then wakes
    /// the workers and the watching pages — both delivered when the transaction commits.
    private static func replaceJob(_ db: PostgresConnection, pinID: Int64, userID: Int64, generation: Int, kind: JobKind) throws {
        try db.query("""
            UPDATE album_jobs SET state = \(JobState.cancelled.sql), finished_at = now()
            WHERE pin_id = $1 AND user_id = $2 AND state IN (\(JobState.queued.sql), \(JobState.running.sql))
            """, [pinID, userID])
        try db.query("INSERT INTO album_jobs (pin_id, user_id, generation, kind) VALUES ($1, $2, $3, $4)",
                     [pinID, userID, generation, kind])
        try db.query("SELECT pg_notify($1, ''), pg_notify($2, $3)", [AlbumChange.jobsChannel, AlbumChange.channel, AlbumChange(userID: userID, pinID: pinID).payload])
    }

    /// The one photo INSERT: placeholders (status pending, the image still to download) for `photos`,
    /// numbered from `firstPosition` (nil: after the album's last photo). A photo already in the album
    /// (same provider and remote id) is skipped; returns the rows added, their ids by position. The
    /// rows travel as one JSON array, values still bound, never in the SQL: one round trip for a
    /// whole page of results, and `announce` rides along in the same statement (delivered at commit,
    /// like any NOTIFY).
    @discardableResult
    package static func insertPlaceholders(_ db: PostgresConnection, pinID: Int64, userID: Int64, generation: Int,
                                           firstPosition: Int?, _ photos: [RemotePhoto], announce: AlbumChange? = nil,
                                           addedBy: Int64? = nil) throws -> [Int: Int64] {
        let rows = try placeholderRows(photos)
        // Licences not seen before first, in a statement of their own: the INSERT below then
        // finds them, also one another worker added a moment ago (each statement sees what was
        // committed when it began; DO NOTHING waited for that worker's commit).
        try db.query("""
            INSERT INTO photo_licenses (name, url)
            SELECT DISTINCT coalesce(e.p->>'license', ''), coalesce(e.p->>'licenseURL', '') FROM jsonb_array_elements($1::jsonb) AS e(p)
            ON CONFLICT (name, url) DO NOTHING
            """, [rows])
        let row = try db.query("""
            WITH placed AS (
                INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, title, owner_name, license_id,
                                    page_url, remote_url, date_taken, added_by)
                SELECT $1, $2, $3,
                       coalesce($4::int, (SELECT coalesce(max(position) + 1, 0) FROM photos WHERE pin_id = $1)) + (e.n - 1)::int,
                       e.p->>'provider', e.p->>'remoteID', e.p->>'title', e.p->>'ownerName',
                       (SELECT l.id FROM photo_licenses l
                        WHERE l.name = coalesce(e.p->>'license', '') AND l.url = coalesce(e.p->>'licenseURL', '')),
                       e.p->>'pageURL', e.p->>'imageURL', e.p->>'dateTaken', $8::bigint
                FROM jsonb_array_elements($5::jsonb) WITH ORDINALITY AS e(p, n)
                ORDER BY e.n
                ON CONFLICT (pin_id, hashtextextended(provider || ' ' || remote_id, 0)) DO NOTHING
                RETURNING id, position)
            SELECT (SELECT coalesce(string_agg(position || ' ' || id, ','), '') FROM placed) AS placed,
                   CASE WHEN $7::text IS NOT NULL THEN pg_notify($6, $7) END AS announced
            """, [pinID, userID, generation, firstPosition, rows, AlbumChange.channel, announce?.payload, addedBy])[0]
        var placed: [Int: Int64] = [:]
        for pair in try row.decode("placed", as: String.self).split(separator: ",") {
            let parts = pair.split(separator: " ")
            if parts.count == 2, let position = Int(parts[0]), let id = Int64(parts[1]) { placed[position] = id }
        }
        return placed
    }

    /// The search result as a JSON array for insertPlaceholders. NUL characters are dropped: jsonb
    /// refuses \u0000, and text parameters never carried them anyway. The provider's thumbnail
    /// URL is left out: the picker reads it from the search answer, never from a stored photo, and
    /// it would be a tenth of each row.
    package static func placeholderRows(_ photos: [RemotePhoto]) throws -> String {
        func clean(_ text: String?) -> String? { text.map { $0.replacingOccurrences(of: "\u{0}", with: "") } }
        let rows: [[String: String?]] = photos.map { photo in
            ["provider": clean(photo.provider), "remoteID": clean(photo.remoteID), "title": clean(photo.title),
             "ownerName": clean(photo.ownerName), "license": clean(photo.license), "pageURL": clean(photo.pageURL),
             "imageURL": clean(photo.imageURL), "dateTaken": clean(photo.dateTaken),
             "licenseURL": clean(photo.licenseURL)]
        }
        return String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
    }

    /// Remote ids already in the album (the picker marks them).
    public func savedRemoteIDs(pinID: Int64, userID: Int64) throws -> Set<String> {
        Set(try pool.query("""
            SELECT ph.remote_id FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.generation = ph.generation
            WHERE ph.pin_id = $1 AND ph.user_id = $2
            """, [pinID, userID]).map { try $0.decode("remote_id", as: String.self) })
    }

    package func notifyEvent(userID: Int64, pinID: Int64) throws {
        try AlbumChange(userID: userID, pinID: pinID).announce(pool)
    }

    private static func photo(_ row: PostgresRow) throws -> AlbumPhoto {
        AlbumPhoto(id: try row.decode("id"), position: try row.decode("position"), status: try row.decode("status"),
                   title: try row.decode("title"), ownerName: try row.decode("owner_name"), license: try row.decode("license"),
                   licenseURL: try row.decode("license_url"), pageURL: try row.decode("page_url"), dateTaken: try row.decode("date_taken"),
                   width: try row.decode("width"), height: try row.decode("height"),
                   generation: try row.decode("generation"), remoteID: try row.decode("remote_id"))
    }
}

extension AlbumStore {
    /// Whether `person` is still a member of the shared map `mapID` (an open album stream on a
    /// shared map asks before each read).
    package func isMember(_ person: Int64, of mapID: Int64) throws -> Bool {
        try !pool.query("SELECT 1 FROM map_members WHERE map_id = $1 AND user_id = $2", [mapID, person]).isEmpty
    }
}
