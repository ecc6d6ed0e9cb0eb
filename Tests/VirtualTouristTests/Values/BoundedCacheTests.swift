import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The one cache every in-memory cache of the app is built on: both bounds hold after every put,
/// and what goes is always the least recently used.
@Suite struct BoundedCacheTests {
    @Test func dropsTheLeastRecentlyUsedBeyondItsCount() {
        let cache = BoundedCache<Int, String>(maxCount: 3)
        for key in 1...3 { cache.put(key, "v\(key)") }
        // 1 is read, so 2 is now the oldest.
        #expect(cache.get(1) == "v1")
        cache.put(4, "v4")
        #expect(cache.count == 3)
        #expect(cache.get(2) == nil)
        #expect(cache.get(1) == "v1" && cache.get(3) == "v3" && cache.get(4) == "v4")
        // Replacing a key keeps one entry for it and makes it the newest.
        cache.put(3, "w3")
        cache.put(5, "v5")
        #expect(cache.get(3) == "w3" && cache.get(1) == nil && cache.count == 3)
    }

    @Test func staysWithinItsCost() {
        let cache = BoundedCache<Int, [UInt8]>(maxCost: 100, cost: { $0.count })
        for key in 0..<50 {
            cache.put(key, [UInt8](repeating: 1, count: 7 + key % 5))
            #expect(cache.totalCost <= 100)
        }
        #expect(cache.get(49) != nil && cache.get(0) == nil)
        #expect(cache.totalCost == (0..<50).reversed().prefix(cache.count).map { 7 + $0 % 5 }.reduce(0, +))
        // A value larger than the whole budget does not stay, and takes everything else with it.
        cache.put(99, [UInt8](repeating: 2, count: 101))
        #expect(cache.get(99) == nil && cache.count == 0 && cache.totalCost == 0)
    }

    @Test func anUpdateChangesTheCostAndKeepsTheBound() {
        let cache = BoundedCache<String, [UInt8]>(maxCost: 10, cost: { $0.count })
        cache.put("a", [1, 2, 3])
        cache.put("b", [1, 2, 3])
        cache.update("b") { $0 += [4, 5, 6] }
        #expect(cache.totalCost == 9 && cache.get("b")?.count == 6)
        cache.update("missing") { $0 = [] }
        #expect(cache.count == 2)
        // "a" is the least recently used, so growing "b" past the budget drops "a" first.
        cache.update("b") { $0 += [7, 8] }
        #expect(cache.get("a") == nil && cache.totalCost == 8)
    }

    @Test func aZeroBoundKeepsNothing() {
        let cache = BoundedCache<Int, Int>(maxCount: 0)
        cache.put(1, 1)
        #expect(cache.get(1) == nil && cache.count == 0)
    }

    /// Slots freed by evictions are reused, and the order stays that of a plain list of keys
    /// through many rounds of it.
    @Test func agreesWithAListThroughManyEvictions() {
        let cache = BoundedCache<Int, Int>(maxCount: 8)
        var order: [Int] = []  // least recently used first
        for key in 0..<1000 {
            cache.put(key, key)
            order.removeAll { $0 == key }
            order.append(key)
            if order.count > 8 { order.removeFirst() }
            if key % 3 == 0 {
                let hit = cache.get(key - 5)
                #expect(hit == (order.contains(key - 5) ? key - 5 : nil))
                if hit != nil { order.removeAll { $0 == key - 5 }; order.append(key - 5) }
            }
        }
        #expect(cache.count == order.count)
        for key in 0..<1000 { #expect((cache.get(key) != nil) == order.contains(key)) }
    }
}
