import Dispatch
import Log
import Postgres

/// Hourly housekeeping. Photos past the retention period (Flickr asks that copies be kept only
/// "for reasonable periods"; PHOTO_RETENTION_DAYS, 0 keeps them); finished album jobs past
/// JOB_RETENTION_DAYS (older rows only weigh on the queue's table and its indexes); and the photo
/// store's upkeep: at the first run images still held in rows move into the store, then blobs no
/// row names any more are removed once past the grace period. Every instance may run it: the
/// DELETEs are idempotent, the move skips rows another instance holds, the sweep honours the grace.
/// `@unchecked Sendable`: `timer` is only touched on `queue`.
package final class Housekeeping: @unchecked Sendable {
    package let pool: PostgresPool
    package let photoDays: Int
    package let jobDays: Int
    /// Nil: no store upkeep.
    package let collector: PhotoCollector?
    package let grace: Double
    package let firstRunAfter: Double
    private let queue = DispatchQueue(label: "housekeeping")
    private var timer: (any DispatchSourceTimer)?
    private let logger = Logger(label: "photo-store")
    private let retentionLogger = Logger(label: "housekeeping")

    package init(pool: PostgresPool, photoDays: Int, jobDays: Int = 7, collector: PhotoCollector? = nil, grace: Double = 3600,
         firstRunAfter: Double = 60) {
        self.pool = pool
        self.photoDays = photoDays
        self.jobDays = jobDays
        self.collector = collector
        self.grace = grace
        self.firstRunAfter = firstRunAfter
    }

    package func start() {
        queue.sync {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + firstRunAfter, repeating: 3600)
            timer.setEventHandler { [weak self] in self?.run() }
            timer.resume()
            self.timer = timer
        }
    }

    package func stop() { queue.sync { timer?.cancel(); timer = nil } }

    private func run() {
        purgePhotos()
        pruneJobs()
        pruneMail()
        guard let collector else { return }
        do {
            let moved = try collector.moveAllBytesToStore()
            if moved > 0 { logger.info("photo store: moved \(moved) images out of the database") }
            try collector.collect(grace: grace)
        } catch {
            // Troubleshooting: photo store upkeep failed
            logger.warning("photo store upkeep failed: \(error)")
        }
    }

    @discardableResult
    package func purgePhotos() -> Int {
        guard photoDays > 0 else { return 0 }
        return deleting("photos past PHOTO_RETENTION_DAYS") {
            try pool.query("DELETE FROM photos WHERE created_at < now() - make_interval(days => $1::int)", [photoDays]).affectedRows
        }
    }

    /// Deletes done, failed and cancelled jobs that finished more than `jobDays` ago.
    @discardableResult
    package func pruneJobs() -> Int {
        guard jobDays > 0 else { return 0 }
        return deleting("album jobs past JOB_RETENTION_DAYS") {
            try pool.query("""
                DELETE FROM album_jobs
                WHERE state IN ('done', 'failed', 'cancelled') AND finished_at < now() - make_interval(days => $1::int)
                """, [jobDays]).affectedRows
        }
    }

    /// Mail sent or given up more than 30 days ago, and password reset links a day past expiry.
    @discardableResult
    package func pruneMail() -> Int {
        deleting("old mail and password reset links") {
            try pool.query("DELETE FROM mail_outbox WHERE coalesce(sent_at, failed_at) < now() - interval '30 days'").affectedRows
                + pool.query("DELETE FROM password_resets WHERE expires_at < now() - interval '1 day'").affectedRows
        }
    }

    /// A failed delete is said in the log: unsaid, retention looks on while nothing is deleted.
    private func deleting(_ what: String, _ delete: () throws -> Int) -> Int {
        do {
            return try delete()
        } catch {
            // Troubleshooting: could not delete
            retentionLogger.warning("could not delete \(what): \(error)")
            return 0
        }
    }
}
