import Testing
@testable import HTTPServer

/// The limiters' one bucket table: refill, all-or-none takes, and a bounded size that drops the
/// bucket used longest ago.
@Suite struct TokenBucketsTests {
    let rule = TokenBuckets<String>.Rule(3, per: 3) // 3 at once, one a second
    let t0 = ContinuousClock.now
    /// The instant `seconds` after the test's start.
    func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .seconds(seconds) }

    @Test func aBucketEmptiesAndRefillsAtItsRate() {
        var buckets = TokenBuckets<String>(limit: 10)
        let burst = (0..<4).map { _ in buckets.take("a", rule, now: at(0)) }
        #expect(burst == [true, true, true, false])
        let early = buckets.take("a", rule, now: at(0.5)), refilled = buckets.take("a", rule, now: at(1.0))
        #expect(!early && refilled)
        let other = buckets.take("b", rule, now: at(1.0))
        #expect(other, "another key has its own bucket")
        #expect(buckets.tokens("a", rule, now: at(100)) == 3, "never above its capacity")
    }

    @Test func severalKeysAreTakenFromTogetherOrNotAtAll() {
        var buckets = TokenBuckets<String>(limit: 10)
        let one = TokenBuckets<String>.Rule(1, per: 60)
        let first = buckets.take([("address", rule), ("link", one)], now: at(0))
        let second = buckets.take([("address", rule), ("link", one)], now: at(0))
        #expect(first && !second)
        #expect(buckets.tokens("address", rule, now: at(0)) == 2, "a refusal takes nothing")
        buckets.charge("address", rule, amount: 5, now: at(0))
        #expect(buckets.tokens("address", rule, now: at(0)) == 0, "a charge empties, never below zero")
    }

    @Test func theTableKeepsItsLimitAndDropsTheLeastRecentlyUsed() {
        var buckets = TokenBuckets<String>(limit: 3)
        for key in ["a", "b", "c"] { _ = buckets.take(key, rule, now: at(0)) }
        _ = buckets.take("a", rule, now: at(0)) // a is now the newest, b the oldest
        _ = buckets.take("d", rule, now: at(0))
        #expect(buckets.count == 3)
        #expect(buckets.tokens("b", rule, now: at(0)) == 3, "b was dropped: a fresh bucket")
        #expect(buckets.tokens("a", rule, now: at(0)) == 1 && buckets.tokens("c", rule, now: at(0)) == 2)
        for n in 0..<100_000 { _ = buckets.take("k\(n)", rule, now: at(0)) }
        #expect(buckets.count == 3)
    }

    @Test func refilledBucketsAreForgottenAndFreeTheirPlaces() {
        var buckets = TokenBuckets<String>(limit: 4)
        for key in ["a", "b", "c", "d"] { _ = buckets.take(key, rule, now: at(0)) }
        _ = buckets.take("a", rule, now: at(0))
        // A second later b, c and d are full again (2 + 1), a is not (1 + 1).
        buckets.forgetRefilled(rule, now: at(1))
        #expect(buckets.count == 1)
        for key in ["e", "f", "g"] { _ = buckets.take(key, rule, now: at(1)) }
        #expect(buckets.count == 4, "the freed places were taken again, nothing dropped")
        _ = buckets.take("h", rule, now: at(1))
        #expect(buckets.count == 4 && buckets.tokens("a", rule, now: at(1)) == 3, "then a, the oldest, was dropped for h")
    }
}
