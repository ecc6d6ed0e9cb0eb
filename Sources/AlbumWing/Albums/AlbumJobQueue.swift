import Foundation
import Postgres
import Domain

/// A job a worker has claimed.
public struct AlbumJob: Sendable {
    public let id: Int64
    public let pinID: Int64
    public let userID: Int64
    public let generation: Int
    public let kind: JobKind
    public let attempts: Int
    /// The worker holding it: every update of the job names it, so a worker whose lease was taken
    /// over changes nothing.
    public var worker = ""
}

/// The job is no longer held by this worker (taken over after its lease lapsed, or cancelled):
/// nothing was written.
package struct LeaseLost: Error {}

/// `holds(jobParameter, workerParameter)`: SQL true while the worker named holds the running job. FOR
/// SHARE, so a claim waits for the statement, and a statement after a claim sees the new holder.
package func holds(_ job: String, _ worker: String) -> String {
    "EXISTS (SELECT 1 FROM album_jobs hj WHERE hj.id = \(job) AND hj.locked_by = \(worker) AND hj.state = \(JobState.running.sql) FOR SHARE)"
}

/// The album job queue in SQL, the workers' side of albums (docs/architecture.md, Albums): claims
/// and leases, the search result and the downloads' results, retries, waits and the end of a
/// job. Jobs are queued by AlbumStore; every statement here names the job's owner and generation,
/// so a result that arrives after a newer collection began changes nothing.
public struct AlbumJobQueue: Sendable {
    package let pool: PostgresPool
    /// Where the downloaded images go; rows keep their hash.
    public let photos: any PhotoStore

    public init(pool: PostgresPool, photos: any PhotoStore = FileStore(root: ".data/photos")) {
        self.pool = pool
        self.photos = photos
    }

    /// Claims the next due job, or one whose worker's lease ran out (the worker died). People take
    /// turns (by who asked, on whichever map): the job of the person served least recently comes first (then the oldest), and the
    /// claim records the turn in the same statement. A job whose lease has lapsed `parkAfterLapses`
    /// times with no progress between (its worker keeps dying with it in hand) is parked instead: failed with Retry on the
    /// album, its reason in admin_jobs, so one album cannot take the workers down forever.
    public func claimJob(worker: String, leaseSeconds: Int, parkAfterLapses: Int = 3) throws -> AlbumJob? {
        try pool.query("""
            WITH parked AS (
                UPDATE album_jobs SET state = \(JobState.failed.sql), finished_at = now(), locked_by = NULL, locked_until = NULL,
                       last_error = 'parked: its worker stopped ' || lapses || ' times while downloading it'
                WHERE state = \(JobState.running.sql) AND locked_until < now() AND lapses >= $3
                  AND NOT (locked_until < pg_postmaster_start_time() AND now() < pg_postmaster_start_time() + make_interval(secs => $2::int))
                RETURNING pin_id, user_id, generation),
            parked_pins AS (
                UPDATE pins p SET status = \(PinStatus.failed.sql), error = $4, retryable = true, waiting = NULL, updated_at = now()
                FROM parked WHERE p.id = parked.pin_id AND p.user_id = parked.user_id AND p.generation = parked.generation
                  AND p.status = \(PinStatus.downloading.sql)
                RETURNING p.id, p.user_id),
            next AS (
                SELECT j.id, coalesce(j.asked_by, j.user_id) AS asker FROM album_jobs j
                LEFT JOIN queue_turns t ON t.user_id = coalesce(j.asked_by, j.user_id)
                WHERE (j.state = \(JobState.queued.sql) AND j.run_after <= now())
                   OR (j.state = \(JobState.running.sql) AND j.locked_until < now() AND j.lapses < $3
                       -- A lease that ran out while the database was down is its holder's to
                       -- renew for one lease after the database's start, not a worker's death.
                       AND NOT (j.locked_until < pg_postmaster_start_time()
                                AND now() < pg_postmaster_start_time() + make_interval(secs => $2::int)))
                ORDER BY t.served_at NULLS FIRST, j.run_after, j.id
                LIMIT 1 FOR UPDATE OF j SKIP LOCKED),
            turn AS (
                INSERT INTO queue_turns (user_id, served_at) SELECT asker, clock_timestamp() FROM next
                ON CONFLICT (user_id) DO UPDATE SET served_at = EXCLUDED.served_at)
            UPDATE album_jobs SET state = \(JobState.running.sql), attempts = attempts + 1, locked_by = $1,
                   lapses = lapses + CASE WHEN state = \(JobState.running.sql) THEN 1 ELSE 0 END,
                   locked_until = now() + make_interval(secs => $2::int)
            WHERE id = (SELECT id FROM next)
              AND (SELECT count(pg_notify($5, \(AlbumChange.sqlPayload(user: "user_id", pin: "id")))) FROM parked_pins) >= 0
            RETURNING id, pin_id, user_id, generation, kind, attempts
            """, [worker, leaseSeconds, parkAfterLapses, Self.parkedPhrase, AlbumChange.channel]).first.map {
            AlbumJob(id: try $0.decode("id"), pinID: try $0.decode("pin_id"), userID: try $0.decode("user_id"),
                     generation: try $0.decode("generation"), kind: try $0.decode("kind"), attempts: try $0.decode("attempts"),
                     worker: worker)
        }
    }

    package static let parkedPhrase = "The photos could not be downloaded: the download kept stopping. Try again, or ask the administrator."

    /// Gives the job back (the worker is stopping): queued again at once, the attempt not counted.
    package func release(_ job: AlbumJob) throws {
        try pool.query("""
            UPDATE album_jobs SET state = \(JobState.queued.sql), run_after = now(), attempts = greatest(attempts - 1, 0),
                   locked_by = NULL, locked_until = NULL
            WHERE id = $1 AND locked_by = $2 AND state = \(JobState.running.sql)
            """, [job.id, job.worker])
    }

    /// Keeps a long job's lease; false when the job is no longer ours (cancelled or taken over).
    public func renewLease(_ job: AlbumJob, leaseSeconds: Int) throws -> Bool {
        try pool.query("""
            UPDATE album_jobs SET locked_until = now() + make_interval(secs => $3::int)
            WHERE id = $1 AND state = \(JobState.running.sql) AND locked_by = $2
            """, [job.id, job.worker, leaseSeconds]).affectedRows == 1
    }

    package struct SearchState {
        package let lat: Double
        package let lon: Double
        package let current: Bool
        package let placeholders: Int
        package let totalPages: Int?
        package let shownPages: [Int]
        package let era: Era?
    }

    package func searchState(_ job: AlbumJob) throws -> SearchState? {
        let rows = try pool.query("""
            SELECT lat, lon, generation = $3 AS current, total_pages, array_to_string(shown_pages, ',') AS shown, era_from, era_to,
                   (SELECT count(*) FROM photos WHERE pin_id = $1 AND generation = $3) AS placeholders
            FROM pins WHERE id = $1 AND user_id = $2
            """, [job.pinID, job.userID, job.generation])
        guard let row = rows.first else { return nil }
        let shown: String = try row.decode("shown")
        return SearchState(lat: try row.decode("lat"), lon: try row.decode("lon"), current: try row.decode("current"),
                           placeholders: try row.decode("placeholders"), totalPages: try row.decode("total_pages"),
                           shownPages: shown.split(separator: ",").compactMap { Int($0) }, era: try AlbumStore.era(row))
    }

    /// Writes the search result: placeholders (their ids by position, from 0), or status empty.
    /// Nil when the job is stale.
    package func storeSearchResult(_ job: AlbumJob, _ result: PhotoSearchPage) throws -> [Int: Int64]? {
        try pool.transaction { db in
            let updated = try db.query("""
                UPDATE pins SET page = $4, total_pages = $5, total_photos = $6,
                       shown_pages = CASE WHEN $4::int = ANY(shown_pages) THEN shown_pages ELSE array_append(shown_pages, $4::int) END,
                       status = CASE WHEN $7 THEN \(PinStatus.empty.sql) ELSE status END, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = \(PinStatus.downloading.sql) AND \(holds("$8", "$9"))
                """, [job.pinID, job.userID, job.generation, result.page, result.pages, result.total, result.photos.isEmpty,
                      job.id, job.worker]).affectedRows
            guard updated == 1 else { return nil }
            // All placeholders and their announcement in one statement: one round trip, not one per photo.
            return try AlbumStore.insertPlaceholders(db, pinID: job.pinID, userID: job.userID, generation: job.generation,
                                                     firstPosition: 0, result.photos, announce: AlbumChange(userID: job.userID, pinID: job.pinID))
        }
    }

    /// Placeholders of this job's generation still waiting for their image, with the downloads
    /// their host already failed them in.
    package func pendingPhotos(_ job: AlbumJob) throws -> [(id: Int64, url: String, hostFailures: Int)] {
        try pool.query("""
            SELECT id, remote_url, host_failures FROM photos
            WHERE pin_id = $1 AND user_id = $2 AND generation = $3 AND status = \(PhotoStatus.pending.sql) ORDER BY position
            """, [job.pinID, job.userID, job.generation]).map { (try $0.decode("id"), try $0.decode("remote_url"), try $0.decode("host_failures")) }
    }

    /// These pending photos' host failed them in this download (one bad image is counted, so it
    /// can fail alone at the third: AlbumDownload).
    package func noteHostFailures(_ photoIDs: [Int64], job: AlbumJob) throws {
        try pool.query("""
            UPDATE photos SET host_failures = least(host_failures + 1, 100)
            WHERE id = ANY($1::bigint[]) AND user_id = $2 AND generation = $3 AND status = \(PhotoStatus.pending.sql)
              AND \(holds("$4", "$5"))
            """, ["{" + photoIDs.map(String.init).joined(separator: ",") + "}", job.userID, job.generation, job.id, job.worker])
    }

    /// What became of one placeholder's download: an image already in the photo store, or a
    /// failure with its reason.
    package struct PhotoResult: Sendable, Encodable {
        package var id: Int64
        package var hash: String? = nil
        package var byteSize: Int? = nil
        package var contentType: String? = nil
        package var width: Int? = nil
        package var height: Int? = nil
        package var error: String? = nil
        package var thumb256: String? = nil
        package var thumb512: String? = nil

        package static func stored(_ id: Int64, hash: String, byteSize: Int, info: ImageInfo, thumbnails: [Int: String] = [:]) -> PhotoResult {
            PhotoResult(id: id, hash: hash, byteSize: byteSize, contentType: info.contentType, width: info.width, height: info.height,
                        thumb256: thumbnails[256], thumb512: thumbnails[512])
        }
        package static func failed(_ id: Int64, reason: String) -> PhotoResult { PhotoResult(id: id, error: reason) }
    }

    /// Writes a batch of results in one statement with one NOTIFY: an album's 30 downloads cost a
    /// few round trips and a few page refreshes instead of 30 of each. The rows travel as one JSON
    /// array (as placeholders do), values bound, never in the SQL. Rows of an older generation are
    /// left alone (their blobs are then the collector's).
    ///
    /// A deadlock or serialization failure is tried again (PostgreSQL's own advice: the statement
    /// is whole and can simply run again); any other error, or the third of those, is the caller's:
    /// the album stops with those photos pending.
    @discardableResult
    package func storeResults(_ results: [PhotoResult], job: AlbumJob) throws -> Bool {
        guard !results.isEmpty else { return true }
        let rows = String(decoding: try JSONEncoder().encode(results), as: UTF8.self)
        return try pool.retryingConflicts { try storeResults(rows: rows, job: job) }
    }

    private func storeResults(rows: String, job: AlbumJob) throws -> Bool {
        try pool.query("""
            WITH held AS (SELECT \(holds("$7", "$8")) AS held),
            r AS (
                SELECT * FROM jsonb_to_recordset($4::jsonb)
                    AS r(id bigint, "hash" text, "byteSize" int, "contentType" text, width int, height int, error text,
                          "thumb256" text, "thumb512" text)),
            stored AS (
                UPDATE photos ph SET status = CASE WHEN r.hash IS NULL THEN \(PhotoStatus.failed.sql) ELSE \(PhotoStatus.ready.sql) END,
                       hash = decode(r.hash, 'hex'), byte_size = r."byteSize", bytes = NULL, content_type = r."contentType",
                       width = r.width, height = r.height, error = r.error,
                       thumb_256 = decode(r."thumb256", 'hex'), thumb_512 = decode(r."thumb512", 'hex'),
                       -- Only a download reads the image URL (0095): a ready row lets it go.
                       remote_url = CASE WHEN r.hash IS NULL THEN ph.remote_url END
                FROM r, pins p
                WHERE ph.id = r.id AND ph.user_id = $2 AND ph.generation = $3 AND ph.status = \(PhotoStatus.pending.sql)
                  AND p.id = ph.pin_id AND p.user_id = ph.user_id AND p.id = $1 AND p.generation = $3
                  AND (SELECT held FROM held)
                RETURNING ph.id),
            -- Progress: whatever lapses the job had were not this album's fault (a worker cut off
            -- by an outage, a restart); only lapses with no progress between them park it.
            progressed AS (
                UPDATE album_jobs SET lapses = 0
                WHERE id = $7 AND locked_by = $8 AND lapses > 0 AND EXISTS (SELECT 1 FROM stored))
            SELECT (SELECT held FROM held) AS held,
                   (SELECT pg_notify($5, $6) FROM (SELECT 1 FROM stored LIMIT 1) AS any_stored) AS notified
            """, [job.pinID, job.userID, job.generation, rows, AlbumChange.channel,
                  AlbumChange(userID: job.userID, pinID: job.pinID).payload, job.id, job.worker])[0].decode("held")
    }

    /// One image already in the photo store (storeResults with a batch of one).
    package func storeImage(photoID: Int64, job: AlbumJob, hash: String, byteSize: Int, info: ImageInfo) throws {
        try storeResults([.stored(photoID, hash: hash, byteSize: byteSize, info: info)], job: job)
    }

    /// Takes a placeholder out of the album (its image was refused: outside the provider's image
    /// hosts or on an internal address), so it is never shown as a broken tile.
    package func dropPhoto(photoID: Int64, job: AlbumJob) throws {
        try pool.query("""
            WITH dropped AS (
                DELETE FROM photos WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = \(PhotoStatus.pending.sql)
                  AND \(holds("$6", "$7")) RETURNING id)
            SELECT pg_notify($4, $5) FROM dropped
            """, [photoID, job.userID, job.generation, AlbumChange.channel, AlbumChange(userID: job.userID, pinID: job.pinID).payload,
                  job.id, job.worker])
    }

    /// The album is complete (or empty): the pin is ready, the job done — only by the job's holder,
    /// and only with no photo left pending (LeaseLost, or AlbumIncomplete, and nothing changes).
    package func finish(_ job: AlbumJob) throws {
        try pool.transaction { db in
            let done = try db.query("""
                UPDATE album_jobs SET state = \(JobState.done.sql), finished_at = now(), locked_by = NULL, locked_until = NULL, last_error = NULL
                WHERE id = $1 AND locked_by = $2 AND state = \(JobState.running.sql)
                """, [job.id, job.worker]).affectedRows
            guard done == 1 else { throw LeaseLost() }
            let pending: Int = try db.query("""
                SELECT count(*) AS n FROM photos WHERE pin_id = $1 AND user_id = $2 AND generation = $3 AND status = \(PhotoStatus.pending.sql)
                """, [job.pinID, job.userID, job.generation])[0].decode("n")
            guard pending == 0 else { throw AlbumIncomplete(pending: pending) }
            try db.query("""
                UPDATE pins SET status = CASE WHEN EXISTS (SELECT 1 FROM photos WHERE pin_id = $1 AND user_id = $2 AND generation = $3)
                                              THEN \(PinStatus.ready.sql) ELSE \(PinStatus.empty.sql) END,
                       waiting = NULL, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = \(PinStatus.downloading.sql)
                """, [job.pinID, job.userID, job.generation])
            try AlbumChange(userID: job.userID, pinID: job.pinID).announce(db)
        }
    }

    /// Photos still pending where the album was to finish: it is tried again, never shown complete.
    package struct AlbumIncomplete: Error, CustomStringConvertible {
        package let pending: Int
        package var description: String { "\(pending) photos still pending at the end of the download" }
    }

    package func cancel(_ job: AlbumJob) throws {
        try pool.query("""
            UPDATE album_jobs SET state = \(JobState.cancelled.sql), finished_at = now(), locked_by = NULL, locked_until = NULL
            WHERE id = $1 AND locked_by = $2 AND state = \(JobState.running.sql)
            """, [job.id, job.worker])
    }

    /// Tries again later, with the reason kept for the admin views.
    package func retryLater(_ job: AlbumJob, reason: String, afterSeconds delay: Int) throws {
        try pool.query("""
            UPDATE album_jobs SET state = \(JobState.queued.sql), run_after = now() + make_interval(secs => $3::int), last_error = $2,
                   locked_by = NULL, locked_until = NULL
            WHERE id = $1 AND locked_by = $4 AND state = \(JobState.running.sql)
            """, [job.id, reason, delay, job.worker])
    }
}

// MARK: Waits and failures: the job waits or fails, and the pin carries the fixed phrase people
// read (docs/providers.md); the provider's own words stay in album_jobs.last_error and the log.
extension AlbumJobQueue {
    /// Queues the job again in `seconds`; a wait the provider named, or an outage waited out,
    /// does not use up an attempt. The resume goes after the jobs already due around then, at
    /// `resumesPerSecond`: after an outage the waiting albums come back a few a second rather
    /// than all in the same second.
    package func wait(_ job: AlbumJob, seconds: Double, phrase: String, detail: String, countsAttempt: Bool, resumesPerSecond: Double = 5) throws {
        try pool.transaction { db in
            let waiting = try db.query("""
                UPDATE album_jobs SET state = 'queued', last_error = $3,
                       run_after = now() + make_interval(secs => $2::float8 + (random() + (
                           SELECT count(*) FROM album_jobs w WHERE w.state = 'queued'
                             AND w.run_after >= now() + make_interval(secs => $2::float8 - 0.5)
                             AND w.run_after < now() + make_interval(secs => $2::float8 + 60))) / $6::float8),
                       attempts = attempts - CASE WHEN $4 THEN 0 ELSE 1 END, locked_by = NULL, locked_until = NULL
                WHERE id = $1 AND locked_by = $5 AND state = 'running'
                """, [job.id, seconds, detail, countsAttempt, job.worker, max(resumesPerSecond, 0.001)]).affectedRows
            guard waiting == 1 else { throw LeaseLost() }
            try db.query("""
                UPDATE pins SET waiting = $4, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = 'downloading'
                """, [job.pinID, job.userID, job.generation, phrase])
            try AlbumChange(userID: job.userID, pinID: job.pinID).announce(db)
        }
    }

    /// How long this job's provider (or image host) calls have been failing or told to wait, in
    /// seconds; the first failure in a row starts the count (0).
    package func waitedForProvider(_ job: AlbumJob) throws -> Double {
        guard let row = try pool.query("""
            UPDATE album_jobs SET waiting_since = coalesce(waiting_since, now()) WHERE id = $1 AND locked_by = $2
            RETURNING extract(epoch FROM now() - waiting_since)::float8 AS waited
            """, [job.id, job.worker]).first else { throw LeaseLost() }
        return try row.decode("waited")
    }

    /// The search or an image went through: the album no longer waits, and a later outage counts afresh.
    package func clearWaiting(_ job: AlbumJob) throws {
        try pool.query("""
            WITH job AS (UPDATE album_jobs SET waiting_since = NULL WHERE id = $3 AND locked_by = $4 AND waiting_since IS NOT NULL)
            UPDATE pins SET waiting = NULL WHERE id = $1 AND user_id = $2 AND waiting IS NOT NULL AND \(holds("$3", "$4"))
            """, [job.pinID, job.userID, job.id, job.worker])
    }

    /// The photos still pending fail with `reason` (the image host never came back).
    package func failPending(_ job: AlbumJob, reason: String) throws {
        try pool.query("""
            UPDATE photos SET status = \(PhotoStatus.failed.sql), error = $4
            WHERE pin_id = $1 AND user_id = $2 AND generation = $3 AND status = \(PhotoStatus.pending.sql) AND \(holds("$5", "$6"))
            """, [job.pinID, job.userID, job.generation, reason, job.id, job.worker])
    }

    /// Gives up with a fixed phrase; `retryable` false hides the Retry button (only the administrator can help).
    package func fail(_ job: AlbumJob, phrase: String, detail: String, retryable: Bool) throws {
        try pool.transaction { db in
            let failed = try db.query("""
                UPDATE album_jobs SET state = 'failed', finished_at = now(), last_error = $2, locked_by = NULL, locked_until = NULL
                WHERE id = $1 AND locked_by = $3 AND state = 'running'
                """, [job.id, detail, job.worker]).affectedRows
            guard failed == 1 else { throw LeaseLost() }
            try db.query("""
                UPDATE pins SET status = 'failed', error = $4, retryable = $5, waiting = NULL, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = 'downloading'
                """, [job.pinID, job.userID, job.generation, phrase, retryable])
            try AlbumChange(userID: job.userID, pinID: job.pinID).announce(db)
        }
    }
}
