/// A least-recently-used order over a dictionary: nodes in an array linked by index, so a hit or
/// an eviction moves two links instead of scanning for the oldest entry. Every bounded table of
/// the server and the app is one: the caches (`BoundedCache`) and the limiters' token buckets
/// (`TokenBuckets`).
public struct LRUList<Key: Hashable, Value> {
    public init() {}

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
    public private(set) var totalCost = 0

    public var count: Int { slots.count }

    public mutating func get(_ key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return nodes[slot]!.value
    }

    public mutating func put(_ key: Key, _ value: Value, cost: Int) {
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
    public mutating func update(_ key: Key, _ change: (inout Value) -> Void, cost: (Value) -> Int) -> Bool {
        guard let slot = slots[key] else { return false }
        change(&nodes[slot]!.value)
        let new = cost(nodes[slot]!.value)
        totalCost += new - nodes[slot]!.cost
        nodes[slot]!.cost = new
        return true
    }

    /// Every entry, in no particular order, without changing the order (checks and metrics).
    public func forEach(_ body: (Key, Value) -> Void) {
        for slot in slots.values { body(nodes[slot]!.key, nodes[slot]!.value) }
    }

    public mutating func remove(_ key: Key) {
        if let slot = slots[key] { remove(slot) }
    }

    public mutating func removeAll(where shouldRemove: (Key, Value) -> Bool) {
        let doomed = slots.values.filter { shouldRemove(nodes[$0]!.key, nodes[$0]!.value) }
        for slot in doomed { remove(slot) }
    }

    public mutating func evict(maxCount: Int, maxCost: Int) {
        evict(maxCount: maxCount, maxCost: maxCost) { _, _ in }
    }

    /// Evicts as above and tells `evicted` each entry it drops (a table that indexes its entries
    /// another way drops them there too).
    public mutating func evict(maxCount: Int, maxCost: Int, evicted: (Key, Value) -> Void) {
        while oldest >= 0 && (slots.count > maxCount || totalCost > maxCost) {
            let node = nodes[oldest]!
            remove(oldest)
            evicted(node.key, node.value)
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
