import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// What becomes of an album's job once its download ended, on values: no database, no clock.
@Suite struct AlbumJobPolicyTests {
    let policy = AlbumJobPolicy(maxAttempts: 5, retryBaseSeconds: 2, outageBackoffFirst: 2, outageBackoffMax: 600,
                                storeBackoffFirst: 1, storeBackoffMax: 60, providerOutageHorizon: 3600)

    @Test func eachEndHasOneStep() {
        #expect(policy.step(after: .finished, attempts: 1) == .finish)
        #expect(policy.step(after: .superseded, attempts: 1) == .cancel)
        #expect(policy.step(after: .leaseLost, attempts: 1) == .leave)
        #expect(policy.step(after: .released, attempts: 1) == .release)
        #expect(policy.step(after: .databaseDown, attempts: 9) == .awaitDatabase, "an outage uses no attempt")
        #expect(policy.step(after: .storeDown, attempts: 9) == .waitForStore)
        #expect(policy.step(after: .imageHostDown(retryAfter: 30), attempts: 9) == .waitForImageHost(retryAfter: 30))
        #expect(policy.step(after: .writeRefused, attempts: 1, refused: "25006 read-only") == .retry(afterSeconds: 2, reason: "25006 read-only"))
        #expect(policy.step(after: .writeRefused, attempts: 5, refused: "53100 disk full") == .fail(reason: "53100 disk full"))
    }

    @Test func aFailedSearchIsDecidedByWhatFailed() {
        let outage = PhotoProviderError.unexpectedStatus(503)
        #expect(policy.step(after: .searchFailed, attempts: 1, search: .provider(outage)) == .provider(outage))
        #expect(policy.step(after: .searchFailed, attempts: 1, search: .databaseDown) == .awaitDatabase)
        #expect(policy.step(after: .searchFailed, attempts: 2, search: .other("boom")) == .retry(afterSeconds: 4, reason: "boom"))
        #expect(policy.step(after: .searchFailed, attempts: 5) == .fail(reason: "the search failed"))
    }

    /// The one backoff: doubling from the base, at most a minute, never a trap on a huge count.
    @Test func theRetryDelayDoublesUpToAMinute() {
        #expect((1...7).map { policy.retryDelay(attempts: $0) } == [2, 4, 8, 16, 32, 60, 60])
        #expect(policy.retryDelay(attempts: 0) == 2)
        #expect(policy.retryDelay(attempts: Int.max) == 60)
        var zero = policy
        zero.retryBaseSeconds = 0
        #expect(zero.retryDelay(attempts: 3) == 0, "the tests' setting: retried at the next claim")
    }

    @Test func aProviderOutageIsWaitedOutUpToTheHorizon() {
        let outage = PhotoProviderError.unexpectedStatus(503)
        #expect(policy.providerWait(outage, waited: 0, attempts: 1) == .wait(seconds: 2, reason: nil, countsAttempt: false))
        #expect(policy.providerWait(outage, waited: 100, attempts: 1) == .wait(seconds: 100, reason: nil, countsAttempt: false), "as long as it lasted")
        #expect(policy.providerWait(outage, waited: 3000, attempts: 1) == .wait(seconds: 600, reason: nil, countsAttempt: false))
        #expect(policy.providerWait(outage, waited: 3500, attempts: 1) == .wait(seconds: 100, reason: nil, countsAttempt: false), "never past the horizon")
        #expect(policy.providerWait(outage, waited: 3600, attempts: 1) == .fail(retryable: true, afterHorizon: true))
        let named = PhotoProviderError.mustWait(seconds: 120, reason: .rateLimited)
        #expect(policy.providerWait(named, waited: 10, attempts: 1) == .wait(seconds: 120, reason: .rateLimited, countsAttempt: false))
        let budget = PhotoProviderError.mustWait(seconds: 7200, reason: .budget)
        #expect(policy.providerWait(budget, waited: 1_000_000, attempts: 1) == .wait(seconds: 7200, reason: .budget, countsAttempt: false),
                "our own budget has no horizon")
    }

    @Test func aBadAnswerIsRetriedAndABadKeyFailsAtOnce() {
        #expect(policy.providerWait(.malformed("not JSON"), waited: 0, attempts: 2) == .wait(seconds: 4, reason: nil, countsAttempt: true))
        #expect(policy.providerWait(.malformed("not JSON"), waited: 0, attempts: 5) == .fail(retryable: true, afterHorizon: false))
        #expect(policy.providerWait(.invalidKey, waited: 0, attempts: 1) == .fail(retryable: false, afterHorizon: false))
        #expect(policy.providerWait(.service(code: 3, message: "bad"), waited: 0, attempts: 1) == .fail(retryable: true, afterHorizon: false))
    }

    @Test func theImageHostAndTheStoreAreWaitedForAsLongAsTheyLasted() {
        #expect(policy.imageHostWait(retryAfter: nil, waited: 0) == 2)
        #expect(policy.imageHostWait(retryAfter: 45, waited: 0) == 45)
        #expect(policy.imageHostWait(retryAfter: 1, waited: 300) == 300, "a named second every time still backs off")
        #expect(policy.imageHostWait(retryAfter: 9999, waited: 3000) == 600, "never past the horizon")
        #expect(policy.imageHostWait(retryAfter: nil, waited: 3600) == nil, "past it the rest fail")
        #expect(policy.storeWait(lasted: 0) == 1)
        #expect(policy.storeWait(lasted: 30) == 30)
        #expect(policy.storeWait(lasted: 3000) == 60)
    }
}
