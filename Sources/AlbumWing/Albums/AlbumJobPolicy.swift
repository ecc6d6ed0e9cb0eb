import Foundation

/// What becomes of an album's job once its download ended, and how long it waits: decided on
/// values (Tests/VirtualTouristTests/AlbumJobPolicyTests), carried out by the worker
/// (AlbumWorkers.conclude, AlbumOutages). No clock and no database here: how long an outage has
/// lasted comes in as a number.
package struct AlbumJobPolicy: Equatable {
    package var maxAttempts = 5
    package var retryBaseSeconds = 2
    package var outageBackoffFirst: Double = 2
    package var outageBackoffMax: Double = 600
    package var storeBackoffFirst: Double = 1
    package var storeBackoffMax: Double = 60
    package var providerOutageHorizon: Double = 24 * 3600

    /// Why a search failed, as far as the job's fate goes.
    package enum SearchTrouble: Equatable {
        case provider(PhotoProviderError)
        case databaseDown
        case other(String)
    }

    package enum Step: Equatable {
        case finish
        /// A newer collection (or a deleted pin) made the job stale.
        case cancel
        /// Given back for another worker (this one stops).
        case release
        /// The job is no longer ours: nothing is written.
        case leave
        /// Wait for the database, then carry on with the same job.
        case awaitDatabase
        case retry(afterSeconds: Int, reason: String)
        case fail(reason: String)
        /// The provider's trouble decides (`providerWait`, once how long it has lasted is known).
        case provider(PhotoProviderError)
        case waitForStore
        case waitForImageHost(retryAfter: Int?)
    }

    package func step(after end: AlbumEnd, attempts: Int, refused: String? = nil, search: SearchTrouble? = nil) -> Step {
        switch end {
        case .finished: return .finish
        case .superseded: return .cancel
        case .leaseLost: return .leave
        case .released: return .release
        case .databaseDown: return .awaitDatabase
        case .writeRefused: return retryOrFail(refused ?? "a write was refused", attempts: attempts)
        case .searchFailed:
            switch search {
            case .provider(let error)?: return .provider(error)
            case .databaseDown?: return .awaitDatabase
            case .other(let reason)?: return retryOrFail(reason, attempts: attempts)
            case nil: return retryOrFail("the search failed", attempts: attempts)
            }
        case .storeDown: return .waitForStore
        case .imageHostDown(let retryAfter): return .waitForImageHost(retryAfter: retryAfter)
        }
    }

    package func retryOrFail(_ reason: String, attempts: Int) -> Step {
        attempts < maxAttempts ? .retry(afterSeconds: retryDelay(attempts: attempts), reason: reason) : .fail(reason: reason)
    }

    /// The one backoff of a retried job: doubling from `retryBaseSeconds`, at most a minute.
    package func retryDelay(attempts: Int) -> Int {
        let doublings = min(max(attempts - 1, 0), 6)
        return min(60, max(0, retryBaseSeconds) << doublings)
    }

    /// The wait for a service that is down: as long as its outage has lasted so far (so the waits
    /// double), from `first`, at most `max`.
    package static func outageWait(lasted: Double, first: Double, max most: Double) -> Double {
        min(most, max(first, lasted))
    }

    package enum Wait: Equatable {
        /// Queued again after `seconds`; `countsAttempt`: whether it uses up one of the job's tries.
        case wait(seconds: Double, reason: ProviderBudget.WaitReason?, countsAttempt: Bool)
        /// Given up: the album fails (`retryable`: people may try again).
        case fail(retryable: Bool, afterHorizon: Bool)
    }

    /// A provider's failure, `waited` seconds into its outage: wait as long as our budget says;
    /// as long as the provider says, or out a service that is down with backoff — both up to the
    /// outage horizon; retry an unreadable answer a few times; fail at once for a bad key or a
    /// refused request.
    package func providerWait(_ error: PhotoProviderError, waited: Double, attempts: Int) -> Wait {
        let failure = error.failureClass
        switch failure {
        case .wait(let seconds, .budget):
            // Our own hourly budget: a long queue drains at its pace, so no horizon.
            return .wait(seconds: Double(seconds), reason: .budget, countsAttempt: false)
        case .wait, .unavailable:
            let left = providerOutageHorizon - waited
            guard left > 0 else { return .fail(retryable: true, afterHorizon: true) }
            if case .wait(let named, let why) = failure { return .wait(seconds: min(Double(named), left), reason: why, countsAttempt: false) }
            return .wait(seconds: min(Self.outageWait(lasted: waited, first: outageBackoffFirst, max: outageBackoffMax), left),
                         reason: nil, countsAttempt: false)
        case .unreadable where attempts < maxAttempts:
            return .wait(seconds: Double(retryDelay(attempts: attempts)), reason: nil, countsAttempt: true)
        case .unreadable, .invalidKey, .refused:
            return .fail(retryable: failure != .invalidKey, afterHorizon: false)
        }
    }

    /// The image host down `waited` seconds: the outage's backoff, or the wait it named when that
    /// is longer (a host that names a second every time is still looked at less and less often),
    /// up to the horizon; nil past it (the photos still pending fail, the album completes with the rest).
    package func imageHostWait(retryAfter: Int?, waited: Double) -> Double? {
        let left = providerOutageHorizon - waited
        guard left > 0 else { return nil }
        let backoff = Self.outageWait(lasted: waited, first: outageBackoffFirst, max: outageBackoffMax)
        return min(left, max(backoff, retryAfter.map(Double.init) ?? 0))
    }

    /// The photo store down for `lasted` seconds: looked at again after as long.
    package func storeWait(lasted: Double) -> Double {
        Self.outageWait(lasted: lasted, first: storeBackoffFirst, max: storeBackoffMax)
    }
}
