import Testing
@testable import LRU

/// LRUList against the plainest model there is (an array, most recent last), over seeded random
/// sequences of gets, puts, updates, removals and evictions.
@Suite struct LRUTests {
    struct Model {
        var entries: [(key: Int, value: Int, cost: Int)] = []
        var cost: Int { entries.reduce(0) { $0 + $1.cost } }
        mutating func touch(_ key: Int) -> Int? {
            guard let i = entries.firstIndex(where: { $0.key == key }) else { return nil }
            let entry = entries.remove(at: i)
            entries.append(entry)
            return entry.value
        }
    }

    /// SplitMix64: the same sequence on every machine.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(arguments: 0..<40) func agreesWithTheModel(seed: Int) {
        var random = Seeded(state: UInt64(seed))
        var list = LRUList<Int, Int>()
        var model = Model()
        for step in 0..<400 {
            let key = Int.random(in: 0..<12, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                #expect(list.get(key) == model.touch(key), "seed \(seed) step \(step): get \(key)")
            case 3..<6:
                let cost = Int.random(in: 0..<5, using: &random)
                list.put(key, step, cost: cost)
                if model.touch(key) != nil { model.entries[model.entries.count - 1] = (key, step, cost) } else { model.entries.append((key, step, cost)) }
            case 6:
                let updated = list.update(key, { $0 += 1 }, cost: { $0 % 3 })
                if let i = model.entries.firstIndex(where: { $0.key == key }) {
                    model.entries[i].value += 1
                    model.entries[i].cost = model.entries[i].value % 3
                    #expect(updated)
                } else {
                    #expect(!updated)
                }
            case 7:
                list.remove(key)
                model.entries.removeAll { $0.key == key }
            case 8:
                list.removeAll { k, _ in k % 3 == key % 3 }
                model.entries.removeAll { $0.key % 3 == key % 3 }
            default:
                let maxCount = Int.random(in: 0..<8, using: &random), maxCost = Int.random(in: 0..<12, using: &random)
                list.evict(maxCount: maxCount, maxCost: maxCost)
                while !model.entries.isEmpty && (model.entries.count > maxCount || model.cost > maxCost) { model.entries.removeFirst() }
            }
            #expect(list.count == model.entries.count && list.totalCost == model.cost, "seed \(seed) step \(step)")
        }
        // What is left holds the model's values; evicting down to one leaves the most recent.
        for entry in model.entries { #expect(list.get(entry.key) == entry.value, "seed \(seed): \(entry.key)") }
        if let newest = model.entries.last {
            list.evict(maxCount: 1, maxCost: .max)
            #expect(list.count == 1 && list.get(newest.key) == newest.value)
        }
    }

    @Test func evictionTakesTheLeastRecentlyUsed() {
        var list = LRUList<String, Int>()
        list.put("a", 1, cost: 1)
        list.put("b", 2, cost: 1)
        list.put("c", 3, cost: 1)
        _ = list.get("a")
        list.evict(maxCount: 2, maxCost: .max)
        #expect(list.get("b") == nil && list.get("a") == 1 && list.get("c") == 3)
        list.evict(maxCount: .max, maxCost: 1)
        #expect(list.count == 1 && list.get("c") == 3, "a was used before c")
    }
}
