import Foundation
import Log
import Postgres
import Synchronization

/// Upkeep of the photo store: moving images still kept in `photos.bytes` into the store, and
/// removing blobs no row names any more (replaced collections, deleted photos, retention).
///
/// These statements read every person's rows on purpose: a blob is shared by whoever has the same
/// bytes, so whether it is still needed is a question about all rows, and nothing here is shown to
/// anyone.
public struct PhotoCollector: Sendable {
    package let pool: PostgresPool
    package let store: any PhotoStore
    /// How long a blob must have been seen unreferenced before it is removed. A backup dumps the
    /// database, then archives the store: a photo deleted in between is named by the dump, and its
    /// blob must still be there for the archive, however old the blob is. So the wait counts from
    /// when the last row stopped naming the blob, not from the blob's last write, and a backup is
    /// consistent when it takes less than this (docs/admin.md, Backups).
    package let unreferencedGrace: TimeInterval
    /// The default wait: a day, far longer than any backup of one host's photos takes; a deleted
    /// photo's file costs its disk space that much longer.
    public static let backupGrace: TimeInterval = 24 * 3600
    private let sightings = Sightings()
    private let logger = Logger(label: "photo-store")

    /// When this instance first saw each blob that no row names, in the sweep that saw it so. Kept
    /// in memory: a restart forgets them and the wait begins again, which only keeps files longer;
    /// every instance waits on its own sightings, so none removes a blob earlier than it would alone.
    private final class Sightings: Sendable {
        package let firstSeen = Mutex<[String: Date]>([:])

        /// Records the blobs unreferenced in this sweep and forgets every other one (named again,
        /// or gone); returns when each of them was first seen unreferenced.
        package func update(unreferenced: Set<String>, at now: Date) -> [String: Date] {
            firstSeen.withLock { seen in
                var kept: [String: Date] = [:]
                for hash in unreferenced { kept[hash] = seen[hash] ?? now }
                seen = kept
                return kept
            }
        }
    }

    public init(pool: PostgresPool, store: any PhotoStore, unreferencedGrace: TimeInterval = PhotoCollector.backupGrace) {
        self.pool = pool
        self.store = store
        self.unreferencedGrace = unreferencedGrace
    }

    /// Moves up to `batch` images from their rows into the store, in one transaction: a run that
    /// stops (a crash, a deploy) loses at most that batch's work, and the next run carries on with
    /// the rows still holding bytes. SKIP LOCKED lets several instances share the work. Returns
    /// how many rows moved (0: done).
    @discardableResult
    ///
    /// No transaction is held across the store's writes (network calls to an object store, up to
    /// 20 s each when it is slow): the rows are read, their bytes put, and each row then drops its
    /// bytes in a statement of its own, only if it still holds them. Two instances moving the same
    /// row put the same blob twice (content-addressed: one blob) and one of them updates the row.
    public func moveBytesToStore(batch: Int = 50) throws -> Int {
        let rows = try pool.query("""
            SELECT id, bytes FROM photos WHERE hash IS NULL AND bytes IS NOT NULL ORDER BY id LIMIT $1
            """, [batch])
        for row in rows {
            let id: Int64 = try row.decode("id")
            let data: Data = try row.decode("bytes")
            let bytes = Array(data)
            // Written and synced before the row stops holding the bytes.
            let hash = try store.put(bytes)
            try pool.query("""
                UPDATE photos SET hash = decode($2, 'hex'), byte_size = $3, bytes = NULL
                WHERE id = $1 AND hash IS NULL AND bytes IS NOT NULL
                """, [id, hash, bytes.count])
        }
        return rows.count
    }

    /// Moves every image still in a row, batch by batch.
    @discardableResult
    public func moveAllBytesToStore() throws -> Int {
        var moved = 0
        while true {
            let n = try moveBytesToStore()
            if n == 0 { return moved }
            moved += n
        }
    }

    /// Mark and sweep: lists the blobs, then reads which hashes rows name, then removes the rest —
    /// except blobs written or refreshed within `grace`, and blobs this collector has not yet seen
    /// unreferenced for `unreferencedGrace` (sweeps run hourly, so removal comes at the first sweep
    /// after that wait). A download stores its blob (a put, which
    /// refreshes an existing blob's age) before its row names it, so a blob a row is about to name
    /// is always younger than the grace period; and the age is checked again under the store's
    /// lock at the moment of removal, so a put between the mark and the sweep still wins.
    /// `afterMark` runs between the mark and the sweep (tests put a download there).
    @discardableResult
    public func collect(grace: TimeInterval = 3600, afterMark: () throws -> Void = {}) throws -> Int {
        let started = Date()
        let blobs = try store.list()
        guard !blobs.isEmpty else { return 0 }
        let named = Set(try pool.query("""
            SELECT encode(hash, 'hex') AS hash FROM (
                SELECT hash FROM photos WHERE hash IS NOT NULL
                UNION SELECT thumb_256 FROM photos WHERE thumb_256 IS NOT NULL
                UNION SELECT thumb_512 FROM photos WHERE thumb_512 IS NOT NULL
                UNION SELECT original FROM own_photos UNION SELECT display FROM own_photos
                UNION SELECT thumb_256 FROM own_photos WHERE thumb_256 IS NOT NULL
                UNION SELECT thumb_512 FROM own_photos WHERE thumb_512 IS NOT NULL) AS named
            """).map { try $0.decode("hash", as: String.self) })
        let cutoff = started.addingTimeInterval(-grace)
        let firstSeen = sightings.update(unreferenced: Set(blobs.map(\.hash)).subtracting(named), at: started)
        let seenBefore = started.addingTimeInterval(-unreferencedGrace)
        try afterMark()
        var removed = 0
        for blob in blobs where !named.contains(blob.hash) && blob.modified < cutoff && firstSeen[blob.hash].map({ $0 <= seenBefore }) == true {
            if try store.delete(blob.hash, ifNotModifiedSince: cutoff) { removed += 1 }
        }
        if removed > 0 { logger.info("photo store: removed \(removed) unreferenced blobs") }
        return removed
    }
}
