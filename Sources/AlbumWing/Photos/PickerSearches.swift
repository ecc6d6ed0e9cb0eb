import Dispatch
import Foundation
import Synchronization
import Waiting
import Domain

/// Provider searches made for pages (the photo picker), kept apart from everything else a page
/// handler does. A handler thread blocked on a slow provider is a handler no one else can use:
/// enough slow picker pages would hold every handler and stall every page of the site. Here
/// searches run on their own few slots, a page waits for one at most `timeout` (the search goes on
/// and lands in the cache for the reload), a full set of slots answers "busy" at once, and recent
/// answers are reused.
public final class PickerSearches: Sendable {
    public struct Busy: Error {}
    public struct TimedOut: Error {}

    package struct Key: Hashable, Sendable { let provider: String, lat: Double, lon: Double, page: Int, eraFrom: Int?, eraTo: Int? }
    package struct Entry: Sendable { let page: PhotoSearchPage, at: ContinuousClock.Instant }

    package let slots: Int
    package let timeout: Duration
    package let cacheFor: Duration
    package let cacheEntries: Int
    private let inFlight = Mutex(0)
    /// Recent answers, the least recently used forgotten first; older than `cacheFor` is a miss.
    private let cache: BoundedCache<Key, Entry>
    private let queue = DispatchQueue(label: "picker-searches", attributes: .concurrent)

    public init(slots: Int = 4, timeout: Duration = .seconds(8), cacheFor: Duration = .seconds(300), cacheEntries: Int = 512) {
        self.slots = slots
        self.timeout = timeout
        self.cacheFor = cacheFor
        self.cacheEntries = cacheEntries
        cache = BoundedCache(maxCount: cacheEntries)
    }

    /// The provider's page of results near a point (of an era, or any time): from the cache, or
    /// searched on a free slot.
    public func search(_ provider: any PhotoProvider, lat: Double, lon: Double, page: Int, era: Era? = nil) throws -> PhotoSearchPage {
        let key = Key(provider: provider.name, lat: lat, lon: lon, page: page, eraFrom: era?.from, eraTo: era?.to)
        if let hit = cache.get(key), ContinuousClock.now - hit.at < cacheFor { return hit.page }
        return try run { [self] in
            let found = try provider.search(lat: lat, lon: lon, page: page, era: era)
            cache.put(key, Entry(page: found, at: .now))
            return found
        }
    }

    /// Any provider work for a page (a search, the decades' counts) on a free slot: waited for at
    /// most `timeout`, after which `work` goes on and `TimedOut` is thrown; `Busy` at once when
    /// every slot is taken.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) throws -> T {
        guard inFlight.withLock({ n -> Bool in
            guard n < slots else { return false }
            n += 1
            return true
        }) else { throw Busy() }

        let outcome = Waitable<Result<T, any Error>?>(nil)
        queue.async { [self] in
            let result = Result { try work() }
            inFlight.withLock { $0 -= 1 }
            outcome.change { $0 = result }
        }
        guard let result = outcome.wait(for: { $0 }, timeout: timeout) else { throw TimedOut() }
        return try result.get()
    }

    /// Searches running now (for tests and metrics).
    public var running: Int { inFlight.withLock { $0 } }
}
