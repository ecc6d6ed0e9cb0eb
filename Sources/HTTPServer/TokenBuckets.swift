/// Token buckets keyed by what a limiter counts (an address, a link, an address on a link), in a
/// table of bounded size: when it is full, the bucket used longest ago gives its place to the new
/// one. A dropped bucket comes back full, which is what a bucket left alone that long mostly is.
///
/// Every call is O(1) whatever the table holds: a dictionary from key to slot, and the slots kept
/// in order of use as a doubly linked list inside one array (no whole-table copy or scan, however
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

    /// Buckets kept at most.
    public let limit: Int

    private struct Slot {
        var key: Key
        var tokens: Double
        var at: Double
        var newer: Int
        var older: Int
    }
    private var slots: [Slot] = []
    private var index: [Key: Int] = [:]
    /// The most and least recently used slots (-1: none).
    private var newest = -1
    private var oldest = -1
    /// Slots emptied by `forget`, reused before the table grows.
    private var vacant: [Int] = []

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Buckets remembered now.
    public var count: Int { index.count }

    /// Tokens `key` would have at `now`.
    public func tokens(_ key: Key, _ rule: Rule, now: Double) -> Double {
        guard let slot = index[key] else { return rule.capacity }
        return Self.refilled(slots[slot].tokens, since: slots[slot].at, rule, now: now)
    }

    /// Takes one token from `key`'s bucket; false (and nothing taken) when it has less than one.
    public mutating func take(_ key: Key, _ rule: Rule, now: Double) -> Bool {
        take([(key, rule)], now: now)
    }

    /// Takes one token from every key's bucket, or from none of them when any has less than one.
    /// Each key's bucket is marked used either way, so a refused client stays remembered.
    public mutating func take(_ keys: [(Key, Rule)], now: Double) -> Bool {
        let allowed = keys.allSatisfy { tokens($0.0, $0.1, now: now) >= 1 }
        for (key, rule) in keys {
            let left = tokens(key, rule, now: now) - (allowed ? 1 : 0)
            store(key, tokens: left, now: now)
        }
        return allowed
    }

    /// Takes `amount` tokens from `key`'s bucket whatever it holds (down to zero): charges for
    /// something found out after the request was let in (a token that does not exist).
    public mutating func charge(_ key: Key, _ rule: Rule, amount: Double = 1, now: Double) {
        store(key, tokens: max(0, tokens(key, rule, now: now) - amount), now: now)
    }

    /// Drops the buckets `isDone` says need no remembering (full again, say); O(count).
    public mutating func forget(where isDone: (Key, _ tokens: Double, _ at: Double) -> Bool) {
        for (key, slot) in index where isDone(key, slots[slot].tokens, slots[slot].at) {
            unlink(slot)
            index[key] = nil
            vacant.append(slot)
        }
    }

    private static func refilled(_ tokens: Double, since at: Double, _ rule: Rule, now: Double) -> Double {
        min(rule.capacity, tokens + max(0, now - at) * rule.perSecond)
    }

    private mutating func store(_ key: Key, tokens: Double, now: Double) {
        if let slot = index[key] {
            slots[slot].tokens = tokens
            slots[slot].at = max(now, slots[slot].at)
            unlink(slot)
            pushNewest(slot)
            return
        }
        let fresh = Slot(key: key, tokens: tokens, at: now, newer: -1, older: -1)
        let slot: Int
        if index.count >= limit {
            slot = oldest
            unlink(slot)
            index[slots[slot].key] = nil
            slots[slot] = fresh
        } else if let reused = vacant.popLast() {
            slot = reused
            slots[slot] = fresh
        } else {
            slot = slots.count
            slots.append(fresh)
        }
        index[key] = slot
        pushNewest(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let newer = slots[slot].newer, older = slots[slot].older
        if newer >= 0 { slots[newer].older = older } else { newest = older }
        if older >= 0 { slots[older].newer = newer } else { oldest = newer }
        slots[slot].newer = -1
        slots[slot].older = -1
    }

    private mutating func pushNewest(_ slot: Int) {
        slots[slot].older = newest
        slots[slot].newer = -1
        if newest >= 0 { slots[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
