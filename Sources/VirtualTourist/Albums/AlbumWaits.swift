import Foundation
import Postgres

/// An album whose provider asked for a wait, or failed (docs/providers.md): the job waits or fails,
/// and the pin carries the fixed phrase people read. The provider's own words stay in
/// album_jobs.last_error and the log.
extension AlbumJobQueue {
    /// Queues the job again in `seconds`; a wait the provider named, or an outage waited out,
    /// does not use up an attempt.
    func wait(_ job: AlbumJob, seconds: Double, phrase: String, detail: String, countsAttempt: Bool) throws {
        try pool.transaction { db in
            try db.query("""
                UPDATE album_jobs SET state = 'queued', run_after = now() + make_interval(secs => $2::float8), last_error = $3,
                       attempts = attempts - CASE WHEN $4 THEN 0 ELSE 1 END, locked_by = NULL, locked_until = NULL
                WHERE id = $1 AND state = 'running'
                """, [job.id, seconds, detail, countsAttempt])
            try db.query("""
                UPDATE pins SET waiting = $4, updated_at = now()
                WHERE id = $1 AND user_id = $2 AND generation = $3 AND status = 'downloading'
                """, [job.pinID, job.userID, job.generation, phrase])
            try db.query("SELECT pg_notify($1, $2)", [AlbumStore.eventsChannel, "\(job.userID):\(job.pinID)"])
        }
    }

    /// How long this job's provider calls have been failing or told to wait, in seconds; the
    /// first failure in a row starts the count (0).
    func waitedForProvider(_ job: AlbumJob) throws -> Double {
        try pool.query("""
            UPDATE album_jobs SET waiting_since = coalesce(waiting_since, now()) WHERE id = $1
            RETURNING extract(epoch FROM now() - waiting_since)::float8 AS waited
            """, [job.id]).first?.decode("waited") ?? 0
    }

    /// The search went through: the album no longer waits, and a later outage counts afresh.
    func clearWaiting(_ job: AlbumJob) throws {
        try pool.query("""
            WITH job AS (UPDATE album_jobs SET waiting_since = NULL WHERE id = $3 AND waiting_since IS NOT NULL)
            UPDATE pins SET waiting = NULL WHERE id = $1 AND user_id = $2 AND waiting IS NOT NULL
            """, [job.pinID, job.userID, job.id])
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
            try db.query("SELECT pg_notify($1, $2)", [AlbumStore.eventsChannel, "\(job.userID):\(job.pinID)"])
        }
    }
}

extension AlbumWorkers {
    /// What a provider failure does to an album: wait as long as our budget says; wait as long as
    /// the provider says, or out a service that is down with backoff — both up to the outage
    /// horizon, so an album dropped during an outage of hours completes by itself; retry an
    /// unreadable answer a few times; fail at once for a bad key or a refused request.
    func providerTrouble(_ job: AlbumJob, _ error: PhotoProviderError) {
        let detail = error.description
        let failure = error.failureClass
        provider.budget?.noteProblem(detail)
        do {
            switch failure {
            case .wait(let seconds, .budget):
                // Our own hourly budget, not the provider's trouble: a long queue drains at its
                // pace however many hours that takes, so no horizon.
                logger.notice("album of pin \(job.pinID): \(detail); waiting \(seconds) s")
                try store.wait(job, seconds: Double(seconds), phrase: ProviderPhrases.waiting(provider.name, reason: .budget, until: Date(timeIntervalSinceNow: Double(seconds))),
                               detail: detail, countsAttempt: false)
            case .wait, .unavailable:
                let waited = try store.waitedForProvider(job)
                let left = settings.providerOutageHorizon - waited
                guard left > 0 else {
                    logger.warning("album of pin \(job.pinID) failed after waiting \(Int(waited)) s for \(provider.name): \(detail)")
                    try store.fail(job, phrase: ProviderPhrases.failed(provider.name, .unavailable), detail: detail, retryable: true)
                    return
                }
                var seconds: Double, reason: ProviderBudget.WaitReason?
                if case .wait(let named, let why) = failure {
                    (seconds, reason) = (Double(named), why)
                } else {
                    // As long as the outage has lasted so far: the waits double, and the job looks
                    // again soon after a short blip but only every few minutes during a long outage.
                    (seconds, reason) = (min(settings.outageBackoffMax, max(settings.outageBackoffFirst, waited)), nil)
                }
                seconds = min(seconds, left)
                logger.notice("album of pin \(job.pinID): \(detail); waiting \(String(format: "%.1f", seconds)) s (\(Int(waited)) s so far)")
                try store.wait(job, seconds: seconds, phrase: ProviderPhrases.waiting(provider.name, reason: reason, until: Date(timeIntervalSinceNow: seconds)),
                               detail: detail, countsAttempt: false)
            case .unreadable where job.attempts < settings.maxAttempts:
                let delay = min(60, settings.retryBaseSeconds << (job.attempts - 1))
                logger.notice("album of pin \(job.pinID): \(detail); retrying in \(delay) s")
                try store.wait(job, seconds: Double(delay), phrase: ProviderPhrases.waiting(provider.name, reason: nil, until: Date(timeIntervalSinceNow: Double(delay))),
                               detail: detail, countsAttempt: true)
            case .unreadable, .invalidKey, .refused:
                logger.warning("album of pin \(job.pinID) failed: \(detail)")
                try store.fail(job, phrase: ProviderPhrases.failed(provider.name, failure), detail: detail, retryable: failure != .invalidKey)
            }
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }
}
