import LRU
import Synchronization

/// The one in-memory cache of the app: at most `maxCount` entries and `maxCost` of their cost
/// (bytes, when `cost` counts bytes), the least recently used dropped first. Every cache the
/// process keeps (PMTiles leaf directories and tiles, map pages, thumbnails) is one of these, so
/// none can grow without a bound. A lock, not a queue: every operation is O(1) and comes from the
/// handler or worker threads.
package final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    package let maxCount: Int
    package let maxCost: Int
    private let cost: @Sendable (Value) -> Int
    private let state: Mutex<LRUList<Key, Value>>

    package init(maxCount: Int = .max, maxCost: Int = .max, cost: @escaping @Sendable (Value) -> Int = { _ in 1 }) {
        self.maxCount = max(0, maxCount)
        self.maxCost = max(0, maxCost)
        self.cost = cost
        state = Mutex(LRUList())
    }

    /// The value for `key`, which becomes the most recently used; nil when there is none.
    package func get(_ key: Key) -> Value? {
        state.withLock { $0.get(key) }
    }

    /// Keeps `value` as the most recently used, replacing what `key` held, then drops the least
    /// recently used until both bounds hold (which may be this value, when it alone exceeds them).
    package func put(_ key: Key, _ value: Value) {
        let cost = cost(value)
        state.withLock { list in
            list.put(key, value, cost: cost)
            list.evict(maxCount: maxCount, maxCost: maxCost)
        }
    }

    /// Changes the value `key` holds in place, under the cache's lock, so a check and a change
    /// cannot be split by another thread's put; nothing happens when the key is absent.
    package func update(_ key: Key, _ change: @Sendable (inout Value) -> Void) {
        let cost = cost
        state.withLock { list in
            guard list.update(key, change, cost: cost) else { return }
            list.evict(maxCount: maxCount, maxCost: maxCost)
        }
    }

    package func remove(_ key: Key) {
        state.withLock { $0.remove(key) }
    }

    /// Drops every entry the predicate picks: O(count), for rare events (a revocation).
    package func removeAll(where shouldRemove: @Sendable (Key, Value) -> Bool) {
        state.withLock { $0.removeAll(where: shouldRemove) }
    }

    package func removeAll() {
        state.withLock { $0 = LRUList() }
    }

    package var count: Int { state.withLock { $0.count } }
    package var totalCost: Int { state.withLock { $0.totalCost } }
}
