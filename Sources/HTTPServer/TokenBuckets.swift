import LRU

/// Token buckets keyed by what a limiter counts (an address, a link, an address on a link), in a
/// table of bounded size: when it is full, the bucket used longest ago gives its place to the new
/// one. A dropped bucket comes back full, which is what a bucket left alone that long mostly is.
///
/// Every call is O(1) whatever the table holds (an `LRUList`: no whole-table copy or scan, however
/// many addresses come). A value with no clock and no lock: the caller passes the time in seconds
/// and keeps the table under its own lock, so the rules are plain arithmetic and unit tested.
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
        var at: Double
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
    public mutating func tokens(_ key: Key, _ rule: Rule, now: Double) -> Double {
        guard let bucket = buckets.get(key) else { return rule.capacity }
        return min(rule.capacity, bucket.tokens + max(0, now - bucket.at) * rule.perSecond)
    }

    /// Takes one token from `key`'s bucket; false (and nothing taken) when it has less than one.
    public mutating func take(_ key: Key, _ rule: Rule, now: Double) -> Bool {
        take([(key, rule)], now: now)
    }

    /// Takes one token from every key's bucket, or from none of them when any has less than one.
    /// Each key's bucket is marked used either way.
    public mutating func take(_ keys: [(Key, Rule)], now: Double) -> Bool {
        let held = keys.map { tokens($0.0, $0.1, now: now) }
        let allowed = held.allSatisfy { $0 >= 1 }
        for ((key, _), tokens) in zip(keys, held) { store(key, tokens: tokens - (allowed ? 1 : 0), now: now) }
        return allowed
    }

    /// Takes `amount` tokens from `key`'s bucket whatever it holds (down to zero): charges for
    /// something found out after the request was let in (a token that does not exist).
    public mutating func charge(_ key: Key, _ rule: Rule, amount: Double = 1, now: Double) {
        store(key, tokens: max(0, tokens(key, rule, now: now) - amount), now: now)
    }

    /// Drops the buckets `isDone` says need no remembering (full again, say); O(count).
    public mutating func forget(where isDone: (Key, _ tokens: Double, _ at: Double) -> Bool) {
        buckets.removeAll { key, bucket in isDone(key, bucket.tokens, bucket.at) }
    }

    private mutating func store(_ key: Key, tokens: Double, now: Double) {
        let at = max(now, buckets.get(key)?.at ?? now)
        buckets.put(key, Bucket(tokens: tokens, at: at), cost: 0)
        buckets.evict(maxCount: limit, maxCost: .max)
    }
}
