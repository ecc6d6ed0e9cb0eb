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
                               detail: detail, countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
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
                               detail: detail, countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
            case .unreadable where job.attempts < settings.maxAttempts:
                let delay = min(60, settings.retryBaseSeconds << (job.attempts - 1))
                logger.notice("album of pin \(job.pinID): \(detail); retrying in \(delay) s")
                try store.wait(job, seconds: Double(delay), phrase: ProviderPhrases.waiting(provider.name, reason: nil, until: Date(timeIntervalSinceNow: Double(delay))),
                               detail: detail, countsAttempt: true, resumesPerSecond: settings.resumesPerSecond)
            case .unreadable, .invalidKey, .refused:
                logger.warning("album of pin \(job.pinID) failed: \(detail)")
                try store.fail(job, phrase: ProviderPhrases.failed(provider.name, failure), detail: detail, retryable: failure != .invalidKey)
            }
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }

    /// The image host is down or asked for a wait: the album waits with its photos pending, as for
    /// the search, up to the same horizon; past it the photos still pending fail (with the host's
    /// last answer) and the album completes with the rest.
    func imageHostTrouble(_ job: AlbumJob, retryAfter: Int?, reason: String) {
        do {
            let waited = try store.waitedForProvider(job)
            let left = settings.providerOutageHorizon - waited
            guard left > 0 else {
                logger.warning("album of pin \(job.pinID): images still failing after \(Int(waited)) s (\(reason)); the rest fail")
                try store.failPending(job, reason: reason)
                try store.finish(job)
                return
            }
            let seconds = min(left, retryAfter.map(Double.init) ?? min(settings.outageBackoffMax, max(settings.outageBackoffFirst, waited)))
            logger.notice("album of pin \(job.pinID): \(reason); images wait \(String(format: "%.1f", seconds)) s (\(Int(waited)) s so far)")
            try store.wait(job, seconds: seconds,
                           phrase: ProviderPhrases.waiting(provider.name, reason: retryAfter == nil ? nil : .rateLimited,
                                                           until: Date(timeIntervalSinceNow: seconds)),
                           detail: "images: \(reason)", countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
        } catch is LeaseLost {
            logger.notice("album of pin \(job.pinID): the job was taken over or cancelled; this worker stops")
        } catch {
            logger.error("queuing job \(job.id) to wait for the image host failed: \(error)")
        }
    }

    // MARK: Database outages

    func databaseUnavailable(_ error: PostgresError) {
        let first = outage.withLock { since -> Bool in
            guard since == nil else { return false }
            since = Date()
            return true
        }
        if first { logger.warning("the database is unavailable (\(error)); album workers wait for it") }
    }

    func databaseAnswered() {
        guard let since = outage.withLock({ since -> Date? in defer { since = nil }; return since }) else { return }
        logger.notice(String(format: "the database is back after %.1f s; album workers resume", Date().timeIntervalSince(since)))
    }

    // MARK: Photo store outages

    /// A put the store could not take because it is down, and when that put began.
    struct StoreDown: Error {
        let error: PhotoStoreError
        let putStarted: Date
    }

    /// The photo store is down (unreachable, failing, full): the album's unstored photos stay
    /// pending and the job is queued again, after as long as the outage has lasted so far; no
    /// attempt is used, so it resumes by itself however long the store takes. Logged once per
    /// outage: a put that began before the last outage ended and failed late is part of that one.
    func waitForStore(_ job: AlbumJob, _ down: StoreDown) {
        let (since, first) = storeOutage.withLock { state -> (Date, Bool) in
            if let since = state.since { return (since, false) }
            if let ended = state.endedAt, down.putStarted < ended { return (Date(), false) }
            state.since = Date()
            return (state.since!, true)
        }
        if first { logger.warning("the photo store is unavailable (\(down.error)); albums wait for it") }
        let seconds = min(settings.storeBackoffMax, max(settings.storeBackoffFirst, Date().timeIntervalSince(since)))
        do {
            try store.wait(job, seconds: seconds, phrase: Self.storeWaitingPhrase(until: Date(timeIntervalSinceNow: seconds)),
                           detail: down.error.description, countsAttempt: false, resumesPerSecond: settings.resumesPerSecond)
        } catch {
            logger.error("queuing job \(job.id) to wait for the photo store failed: \(error)")
        }
    }

    /// A put that started after the outage began went through (one that started before may
    /// land after the first failure and proves nothing).
    func storeAnswered(putStarted: Date) {
        guard let since = storeOutage.withLock({ state -> Date? in
            guard let started = state.since, putStarted > started else { return nil }
            state = (nil, Date())
            return started
        }) else { return }
        logger.notice(String(format: "the photo store is back after %.1f s; albums resume", Date().timeIntervalSince(since)))
    }

    static func storeWaitingPhrase(until: Date) -> String {
        "Photos cannot be saved right now; trying again at \(ProviderPhrases.clockTime(until))."
    }

    /// The database went away in the middle of a job. The job is still ours (its lease runs on),
    /// so wait for the database and carry on where it stopped: placeholders already written are
    /// kept and only pending images are fetched, so nothing is lost or done twice. Past the
    /// lease, the job is left for whichever worker claims it next.
    func resumeAfterOutage(_ job: AlbumJob, error: PostgresError) {
        databaseUnavailable(error)
        let deadline = Date(timeIntervalSinceNow: Double(settings.leaseSeconds) * 0.8)
        while running && Date() < deadline {
            usleep(250_000)
            do {
                guard try store.renewLease(job, leaseSeconds: settings.leaseSeconds) else { return }
                databaseAnswered()
                process(job)
                return
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                continue
            } catch {
                logger.warning("album of pin \(job.pinID): \(error)")
                return
            }
        }
    }
}
