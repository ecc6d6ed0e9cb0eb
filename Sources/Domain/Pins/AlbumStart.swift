import Postgres

/// Starting a pin's album, in one place: whether the person who asks has room for it
/// (`quotaReached`), and the start itself (`collections`: a new generation, the old photos
/// dropped, the live job cancelled, a collection queued, the workers and the album's pages told
/// when the transaction commits). A dropped pin (PinStore.drop), an import's pins
/// (PinImportStore.confirm), New Collection and Retry (AlbumStore.startCollection) all come here;
/// the callers hold the pins' row locks.
package enum AlbumStart {
    /// Starts a collection on pins the caller has locked and checked (status, quotas): a new
    /// generation, the old photos dropped, the live job cancelled and a collection queued, for all
    /// of them in one statement; the workers are woken at commit. A dropped pin and an import's
    /// thousands take the same path. Returns the pins started.
    /// `announce`: also tell each pin's open album pages (a drop, New Collection, Retry); an
    /// import's thousands of pins are announced to the map once instead.
    @discardableResult
    package static func collections(_ db: PostgresConnection, pinIDs: [Int64], userID: Int64, askedBy person: Int64? = nil,
                            announce: Bool = false) throws -> [Int64] {
        guard !pinIDs.isEmpty else { return [] }
        // The INSERT reads `cancelled` first, so the old jobs are cancelled before the new ones go
        // in: one live job per pin is a unique index, and a data-modifying WITH has no order of
        // its own. Identical notifications in a transaction are delivered once.
        let rows = try db.query("""
            WITH started AS (
                UPDATE pins SET generation = generation + 1, status = \(PinStatus.downloading.sql), error = NULL, updated_at = now(),
                       collected_by = $4
                WHERE id = ANY($1::bigint[]) AND user_id = $2 RETURNING id, generation
            ), dropped AS (
                DELETE FROM photos WHERE pin_id IN (SELECT id FROM started) AND user_id = $2
            ), cancelled AS (
                UPDATE album_jobs SET state = \(JobState.cancelled.sql), finished_at = now()
                WHERE pin_id IN (SELECT id FROM started) AND user_id = $2 AND state IN (\(JobState.queued.sql), \(JobState.running.sql))
                RETURNING id
            ), queued AS (
                INSERT INTO album_jobs (pin_id, user_id, generation, kind, asked_by)
                SELECT id, $2, generation, \(JobKind.collection.sql), $4 FROM started WHERE (SELECT count(*) FROM cancelled) >= 0
            )
            SELECT id, pg_notify($3, ''), CASE WHEN $5 THEN pg_notify($6, \(AlbumChange.sqlPayload(user: "$2", pin: "id"))) END FROM started
            """, ["{" + pinIDs.map(String.init).joined(separator: ",") + "}", userID, AlbumChange.jobsChannel, person ?? userID,
                  announce, AlbumChange.channel])
        return try rows.map { try $0.decode("id") }
    }

    /// Whether starting a collection on this pin would pass a quota of the person who asks
    /// (`person`; nil: the holder, a person on their own map): the photo bytes charged to them (not
    /// counting this pin's, which the new collection replaces) and, for New Collection and Retry,
    /// the collections they started in the past hour. Per person on every map (migration 0124):
    /// a pin's photos are charged to whoever last asked for its album, else who dropped it, else
    /// the holder, and a photo picked into it to who picked it (`photos.added_by`); a collection to
    /// whoever asked. Runs under the pin's row lock.
    package static func quotaReached(_ db: PostgresConnection, pinID: Int64, userID: Int64, person: Int64? = nil, quotas: Quotas,
                             newCollection: Bool) throws -> QuotaReached? {
        let row = try db.query("""
            SELECT coalesce(u.max_photo_bytes, $3) AS byte_limit,
                   coalesce(u.max_collections_per_hour, $4) AS collection_limit,
                   \(Self.chargedBytes(person: "$1", exceptPin: "$2")) AS bytes,
                   (SELECT count(*) FROM album_jobs WHERE coalesce(asked_by, user_id) = $1 AND kind = 'collection' AND generation > 1
                        AND created_at > now() - interval '1 hour') AS collections
            FROM users u WHERE u.id = $1
            """, [person ?? userID, pinID, quotas.photoBytes, quotas.collectionsPerHour])[0]
        let byteLimit: Int64 = try row.decode("byte_limit")
        if try row.decode("bytes", as: Int64.self) >= byteLimit { return .photoBytes(byteLimit) }
        let collectionLimit: Int = try row.decode("collection_limit")
        if newCollection, try row.decode("collections", as: Int.self) >= collectionLimit { return .collections(collectionLimit) }
        return nil
    }

    /// The photo bytes charged to `person` (an SQL parameter) on every map, as the quota counts
    /// them: the provider's photos of pins charged to them, those they picked, their own photos;
    /// with `exceptPin`, without that pin's provider photos (a new collection replaces them).
    package static func chargedBytes(person: String, exceptPin: String? = nil) -> String {
        let except = exceptPin.map { " AND p.id <> \($0)" } ?? "", exceptPicked = exceptPin.map { " AND pin_id <> \($0)" } ?? ""
        return """
            ((SELECT coalesce(sum(ph.byte_size), 0) FROM pins p JOIN photos ph ON ph.pin_id = p.id
              WHERE \(chargedTo("p")) = \(person) AND ph.added_by IS NULL\(except))
             + (SELECT coalesce(sum(byte_size), 0) FROM photos WHERE added_by = \(person)\(exceptPicked))
             + (SELECT coalesce(sum(byte_size), 0) FROM own_photos WHERE added_by = \(person)))::bigint
            """
    }

    /// The person a pin's photos are charged to, as SQL on the pins row `alias` (indexed by
    /// migration 0124: keep the expression as it is there).
    package static func chargedTo(_ alias: String) -> String { "coalesce(\(alias).collected_by, \(alias).dropped_by, \(alias).user_id)" }

}
