import LRU

/// Token buckets keyed by what a limiter counts (an address, a link, an address on a link), in a
/// table of bounded size: when it is full, the bucket used longest ago gives its place to the new
/// one. A dropped bucket comes back full, which is what a bucket left alone that long mostly is.
///
/// Every call is O(1) whatever the table holds (an `LRUList`: no whole-table copy or scan, however
/// many addresses come). A value with no clock and no lock: the caller passes the instant in and
/// keeps the table under its own lock, so the rules are plain arithmetic and unit tested.
public struct TokenBuckets<Key: Hashable> {
    /// What one bucket holds at most and how fast it refills.
    public struct Rule: Sendable, Equatable {
        public var capacity: Double
        public var perSecond: Double
        public init(capacity: Double, perSecond: Double) {
            self.capacity = max(1, capacity)
            self.perSecond = max(0, perSecond)
        }
        /// `count` tokens, refilled at that many per `seconds`.
        public init(_ count: Int, per seconds: Double) {
            self.init(capacity: Double(count), perSecond: Double(count) / seconds)
        }
    }

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    /// Buckets kept at most.
    public let limit: Int
    private var buckets = LRUList<Key, Bucket>()

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Buckets remembered now.
    public var count: Int { buckets.count }

    /// Tokens `key` has at `now` (the bucket counts as used: a refused client stays remembered).
    public mutating func tokens(_ key: Key, _ rule: Rule, now: ContinuousClock.Instant) -> Double {
        Self.refilled(buckets.get(key), rule, now: now).tokens
    }

    /// Takes one token from `key`'s bucket; false (and nothing taken) when it has less than one.
    public mutating func take(_ key: Key, _ rule: Rule, now: ContinuousClock.Instant) -> Bool {
        take([(key, rule)], now: now)
    }

    /// Takes one token from every key's bucket, or from none of them when any has less than one.
    /// Each key's bucket is marked used either way.
    public mutating func take(_ keys: [(Key, Rule)], now: ContinuousClock.Instant) -> Bool {
        let refilled = keys.map { Self.refilled(buckets.get($0.0), $0.1, now: now) }
        let allowed = refilled.allSatisfy { $0.tokens >= 1 }
        for ((key, _), var bucket) in zip(keys, refilled) {
            if allowed { bucket.tokens -= 1 }
            keep(key, bucket)
        }
        return allowed
    }

    /// Takes `amount` tokens from `key`'s bucket whatever it holds (down to zero): charges for
    /// something found out after the request was let in (a token that does not exist).
    public mutating func charge(_ key: Key, _ rule: Rule, amount: Double = 1, now: ContinuousClock.Instant) {
        var bucket = Self.refilled(buckets.get(key), rule, now: now)
        bucket.tokens = max(0, bucket.tokens - amount)
        keep(key, bucket)
    }

    /// Drops the buckets that are full again by `now`: they say nothing a new one would not, so
    /// memory follows the keys of the last while, not every key ever seen. O(count).
    public mutating func forgetRefilled(_ rule: Rule, now: ContinuousClock.Instant) {
        buckets.removeAll { _, bucket in Self.refilled(bucket, rule, now: now).tokens >= rule.capacity }
    }

    /// A bucket as it stands at `now`: refilled at the rule's rate since it was last used, never
    /// above its capacity; a key with none has a full one.
    private static func refilled(_ bucket: Bucket?, _ rule: Rule, now: ContinuousClock.Instant) -> Bucket {
        guard let bucket else { return Bucket(tokens: rule.capacity, at: now) }
        let elapsed = max(.zero, now - bucket.at) / .seconds(1)
        return Bucket(tokens: min(rule.capacity, bucket.tokens + elapsed * rule.perSecond), at: max(now, bucket.at))
    }

    private mutating func keep(_ key: Key, _ bucket: Bucket) {
        buckets.put(key, bucket, cost: 0)
        buckets.evict(maxCount: limit, maxCost: .max)
    }
}
