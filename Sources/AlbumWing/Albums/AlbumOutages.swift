import Foundation
import Postgres

/// The album workers' outage policy: what the database, the photo store, the provider's search
/// and the image host being down or asking for a wait do to an album. None of them uses up the
/// job's attempts while it lasts; each shows the album waiting with the time it looks again; the
/// provider and the image host are waited out up to the outage horizon (PROVIDER_OUTAGE_HOURS).
extension AlbumWorkers {

    /// What a provider failure does to an album: wait as long as our budget says; wait as long as
    /// the provider says, or out a service that is down with backoff — both up to the outage
    /// horizon, so an album dropped during an outage of hours completes by itself; retry an
    /// unreadable answer a few times; fail at once for a bad key or a refused request.
    package func providerTrouble(_ job: AlbumJob, _ error: PhotoProviderError) {
        let detail = error.description
        provider.budget?.noteProblem(detail)
        record(job) {
            // Only an outage is timed (one statement); the rest is decided without asking.
            let waited: Double
            switch error.failureClass {
            case .wait(_, let reason) where reason != .budget: waited = try store.waitedForProvider(job)
            case .unavailable: waited = try store.waitedForProvider(job)
            default: waited = 0
            }
            switch policy.providerWait(error, waited: waited, attempts: job.attempts) {
            case .wait(let seconds, let reason, let countsAttempt):
                logger.notice("album of pin \(job.pinID): \(detail); waiting \(String(format: "%.1f", seconds)) s (\(Int(waited)) s so far)")
                try store.wait(job, seconds: seconds, phrase: ProviderPhrases.waiting(provider.name, reason: reason, until: Date(timeIntervalSinceNow: seconds)),
                               detail: detail, countsAttempt: countsAttempt, resumesPerSecond: settings.resumesPerSecond)
            case .fail(let retryable, let afterHorizon):
                // Troubleshooting: album of pin N failed
                logger.warning("album of pin \(job.pinID) failed\(afterHorizon ? " after waiting \(Int(waited)) s for \(provider.name)" : ""): \(detail)")
                try store.fail(job, phrase: ProviderPhrases.failed(provider.name, afterHorizon ? .unavailable : error.failureClass),
                               detail: detail, retryable: retryable)
            }
        }
    }

    /// The image host is down or asked for a wait: the album waits with its photos pending, as for
    /// the search, up to the same horizon; past it the photos still pending fail (with the host's
    /// last answer) and the album completes with the rest.
    package func imageHostTrouble(_ job: AlbumJob, retryAfter: Int?, reason: String) {
        record(job) {
            let waited = try store.waitedForProvider(job)
            guard let seconds = policy.imageHostWait(retryAfter: retryAfter, waited: waited) else {
                // Troubleshooting: images still failing after
                logger.warning("album of pin \(job.pinID): images still failing after \(Int(waited)) s (\(reason)); the rest fail")
                try store.failPending(job, reason: reason)
                try store.finish(job)
                return
            }
            logger.notice("album of pin \(job.pinID): \(reason); images wait \(String(format: "%.1f", seconds)) s (\(Int(waited)) s so far)")
            try store.wait(job, seconds: seconds,
                           phrase: ProviderPhrases.waiting(provider.name, reason: retryAfter == nil ? nil : .rateLimited,
                                                           until: Date(timeIntervalSinceNow: seconds)),
                           detail: "images: \(reason)", countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
        }
    }

    // MARK: Database outages

    package func databaseUnavailable(_ error: PostgresError) {
        let first = outage.withLock { since -> Bool in
            guard since == nil else { return false }
            since = .now
            return true
        }
        // Troubleshooting: album workers wait for it
        if first { logger.warning("the database is unavailable (\(error)); album workers wait for it") }
    }

    package func databaseAnswered() {
        guard let since = outage.withLock({ since -> ContinuousClock.Instant? in defer { since = nil }; return since }) else { return }
        logger.notice(String(format: "the database is back after %.1f s; album workers resume", (ContinuousClock.now - since).inSeconds))
    }

    // MARK: Photo store outages

    /// A put the store could not take because it is down, and when that put began.
    package struct StoreDown: Error {
        package let error: PhotoStoreError
        package let putStarted: ContinuousClock.Instant
    }

    /// The photo store is down (unreachable, failing, full): the album's unstored photos stay
    /// pending and the job is queued again, after as long as the outage has lasted so far; no
    /// attempt is used, so it resumes by itself however long the store takes. Logged once per
    /// outage: a put that began before the last outage ended and failed late is part of that one.
    package func waitForStore(_ job: AlbumJob, _ down: StoreDown) {
        let now = ContinuousClock.now
        let (since, first) = storeOutage.withLock { state -> (ContinuousClock.Instant, Bool) in
            if let since = state.since { return (since, false) }
            if let ended = state.endedAt, down.putStarted < ended { return (now, false) }
            state.since = now
            return (now, true)
        }
        // Troubleshooting: the photo store is unavailable
        if first { logger.warning("the photo store is unavailable (\(down.error)); albums wait for it") }
        let seconds = policy.storeWait(lasted: (now - since).inSeconds)
        record(job) {
            try store.wait(job, seconds: seconds, phrase: Self.storeWaitingPhrase(until: Date(timeIntervalSinceNow: seconds)),
                           detail: down.error.description, countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
        }
    }

    /// A put that started after the outage began went through (one that started before may
    /// land after the first failure and proves nothing).
    package func storeAnswered(putStarted: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        guard let since = storeOutage.withLock({ state -> ContinuousClock.Instant? in
            guard let started = state.since, putStarted > started else { return nil }
            state = (nil, now)
            return started
        }) else { return }
        logger.notice(String(format: "the photo store is back after %.1f s; albums resume", (now - since).inSeconds))
    }

    package static func storeWaitingPhrase(until: Date) -> String {
        "Photos cannot be saved right now; trying again at \(ProviderPhrases.clockTime(until))."
    }

    /// The database went away in the middle of a job. The job is still ours unless another
    /// worker claimed it meanwhile, so wait for the database however long it takes and carry on
    /// where it stopped: placeholders already written are kept and only pending images are
    /// fetched, so nothing is lost or done twice. The renewal tells whether it is still ours (it
    /// names the holder, not the time), so an outage longer than the lease is not taken for this
    /// worker's death; a takeover meanwhile (another instance was back first) is, and the
    /// holder's next progress clears it (AlbumJobQueue.storeResults).
    package func resumeAfterOutage(_ job: AlbumJob, error: PostgresError) {
        databaseUnavailable(error)
        while running {
            usleep(250_000)
            do {
                guard try store.renewLease(job, leaseSeconds: settings.leaseSeconds) else { return }
                databaseAnswered()
                process(job)
                return
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                continue
            } catch {
                // Troubleshooting: album of pin N: ERROR
                logger.warning("album of pin \(job.pinID): \(error)")
                return
            }
        }
    }
}
