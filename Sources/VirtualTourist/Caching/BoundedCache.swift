import Synchronization

/// The one in-memory cache of the app: at most `maxCount` entries and `maxCost` of their cost
/// (bytes, when `cost` counts bytes), the least recently used dropped first. Every cache the
/// process keeps (PMTiles leaf directories and tiles, map pages, thumbnails) is one of these, so
/// none can grow without a bound. A lock, not a queue: every operation is O(1) and comes from the
/// handler or worker threads.
final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    let maxCount: Int
    let maxCost: Int
    private let cost: @Sendable (Value) -> Int
    private let state: Mutex<LRUList<Key, Value>>

    init(maxCount: Int = .max, maxCost: Int = .max, cost: @escaping @Sendable (Value) -> Int = { _ in 1 }) {
        self.maxCount = max(0, maxCount)
        self.maxCost = max(0, maxCost)
        self.cost = cost
        state = Mutex(LRUList())
    }

    /// The value for `key`, which becomes the most recently used; nil when there is none.
    func get(_ key: Key) -> Value? {
        state.withLock { $0.get(key) }
    }

    /// Keeps `value` as the most recently used, replacing what `key` held, then drops the least
    /// recently used until both bounds hold (which may be this value, when it alone exceeds them).
    func put(_ key: Key, _ value: Value) {
        let cost = cost(value)
        state.withLock { list in
            list.put(key, value, cost: cost)
            list.evict(maxCount: maxCount, maxCost: maxCost)
        }
    }

    /// Changes the value `key` holds in place, under the cache's lock, so a check and a change
    /// cannot be split by another thread's put; nothing happens when the key is absent.
    func update(_ key: Key, _ change: @Sendable (inout Value) -> Void) {
        let cost = cost
        state.withLock { list in
            guard list.update(key, change, cost: cost) else { return }
            list.evict(maxCount: maxCount, maxCost: maxCost)
        }
    }

    func remove(_ key: Key) {
        state.withLock { $0.remove(key) }
    }

    /// Drops every entry the predicate picks: O(count), for rare events (a revocation).
    func removeAll(where shouldRemove: @Sendable (Key, Value) -> Bool) {
        state.withLock { $0.removeAll(where: shouldRemove) }
    }

    func removeAll() {
        state.withLock { $0 = LRUList() }
    }

    var count: Int { state.withLock { $0.count } }
    var totalCost: Int { state.withLock { $0.totalCost } }
}

/// A least-recently-used order over a dictionary: nodes in an array linked by index, so a hit or
/// an eviction moves two links instead of scanning for the oldest entry.
struct LRUList<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var cost: Int
        var newer: Int
        var older: Int
    }

    private var nodes: [Node?] = []
    private var slots: [Key: Int] = [:]
    private var free: [Int] = []
    /// Most and least recently used node, -1 when empty.
    private var newest = -1
    private var oldest = -1
    private(set) var totalCost = 0

    var count: Int { slots.count }

    mutating func get(_ key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[slot]!.value
    }

    mutating func put(_ key: Key, _ value: Value, cost: Int) {
        if let slot = slots[key] {
            totalCost += cost - nodes[slot]!.cost
            nodes[slot]!.value = value
            nodes[slot]!.cost = cost
            moveToFront(slot)
            return
        }
        let node = Node(key: key, value: value, cost: cost, newer: -1, older: newest)
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        if newest >= 0 { nodes[newest]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
        slots[key] = slot
        totalCost += cost
    }

    /// False when the key is absent.
    mutating func update(_ key: Key, _ change: (inout Value) -> Void, cost: (Value) -> Int) -> Bool {
        guard let slot = slots[key] else { return false }
        change(&nodes[slot]!.value)
        let new = cost(nodes[slot]!.value)
        totalCost += new - nodes[slot]!.cost
        nodes[slot]!.cost = new
        return true
    }

    mutating func remove(_ key: Key) {
        if let slot = slots[key] { remove(slot) }
    }

    mutating func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        let doomed = slots.values.filter { shouldRemove(nodes[$0]!.key, nodes[$0]!.value) }
        for slot in doomed { remove(slot) }
    }

    mutating func evict(maxCount: Int, maxCost: Int) {
        while oldest >= 0 && (slots.count > maxCount || totalCost > maxCost) {
            remove(oldest)
        }
    }

    private mutating func remove(_ slot: Int) {
        let node = nodes[slot]!
        unlink(slot)
        slots[node.key] = nil
        totalCost -= node.cost
        nodes[slot] = nil
        free.append(slot)
    }

    private mutating func unlink(_ slot: Int) {
        let node = nodes[slot]!
        if node.newer >= 0 { nodes[node.newer]!.older = node.older } else { newest = node.older }
        if node.older >= 0 { nodes[node.older]!.newer = node.newer } else { oldest = node.newer }
    }

    private mutating func moveToFront(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        nodes[slot]!.newer = -1
        nodes[slot]!.older = newest
        if newest >= 0 { nodes[newest]!.newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
