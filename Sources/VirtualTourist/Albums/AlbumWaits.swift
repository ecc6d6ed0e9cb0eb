import Foundation
import Postgres

/// An album whose provider asked for a wait, or failed (docs/providers.md): the job waits or fails,
/// and the pin carries the fixed phrase people read. The provider's own words stay in
/// album_jobs.last_error and the log.
extension AlbumStore {
    /// Queues the job again in `seconds`; a wait the provider named does not use up an attempt.
    func wait(_ job: AlbumJob, seconds: Int, phrase: String, detail: String, countsAttempt: Bool) throws {
        try pool.transaction { db in
            try db.query("""
                UPDATE album_jobs SET state = 'queued', run_after = now() + make_interval(secs => $2::int), last_error = $3,
                       attempts = attempts - CASE WHEN $4 THEN 0 ELSE 1 END, locked_by = NULL, locked_until = NULL
                WHERE id = $1 AND state = 'running'
                """, [job.id, seconds, detail, countsAttempt])
            try db.query("""
                UPDATE pins SET waiting = $4, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = 'downloading'
                """, [job.pinID, job.userID, job.generation, phrase])
            try db.query("SELECT pg_notify($1, $2)", [Self.eventsChannel, "\(job.userID):\(job.pinID)"])
        }
    }

    /// The search went through: the album no longer waits.
    func clearWaiting(_ job: AlbumJob) throws {
        try pool.query("UPDATE pins SET waiting = NULL WHERE id = $1 AND user_id = $2 AND waiting IS NOT NULL", [job.pinID, job.userID])
    }

    /// Gives up with a fixed phrase; `retryable` false hides the Retry button (only the administrator can help).
    func fail(_ job: AlbumJob, phrase: String, detail: String, retryable: Bool) throws {
        try pool.transaction { db in
            try db.query("""
                UPDATE album_jobs SET state = 'failed', finished_at = now(), last_error = $2, locked_by = NULL, locked_until = NULL
                WHERE id = $1
                """, [job.id, detail])
            try db.query("""
                UPDATE pins SET status = 'failed', error = $4, retryable = $5, waiting = NULL, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = 'downloading'
                """, [job.pinID, job.userID, job.generation, phrase, retryable])
            try db.query("SELECT pg_notify($1, $2)", [Self.eventsChannel, "\(job.userID):\(job.pinID)"])
        }
    }
}

extension AlbumWorkers {
    /// What a provider failure does to an album: wait as long as the provider (or our budget) says,
    /// retry a service that is down with backoff, fail at once for a bad key or a refused request.
    func providerTrouble(_ job: AlbumJob, _ error: PhotoProviderError) {
        let detail = error.description
        let failure = error.failureClass
        provider.budget?.noteProblem(detail)
        do {
            switch failure {
            case .wait(let seconds, let reason):
                logger.notice("album of pin \(job.pinID): \(detail); waiting \(seconds) s")
                try store.wait(job, seconds: seconds, phrase: ProviderPhrases.waiting(provider.name, reason: reason, until: Date(timeIntervalSinceNow: Double(seconds))),
                               detail: detail, countsAttempt: false)
            case .unavailable where job.attempts < settings.maxAttempts:
                let delay = min(60, settings.retryBaseSeconds << (job.attempts - 1))
                logger.notice("album of pin \(job.pinID): \(detail); retrying in \(delay) s")
                try store.wait(job, seconds: delay, phrase: ProviderPhrases.waiting(provider.name, reason: nil, until: Date(timeIntervalSinceNow: Double(delay))),
                               detail: detail, countsAttempt: true)
            case .unavailable, .invalidKey, .refused:
                logger.warning("album of pin \(job.pinID) failed: \(detail)")
                try store.fail(job, phrase: ProviderPhrases.failed(provider.name, failure), detail: detail, retryable: failure != .invalidKey)
            }
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }
}
