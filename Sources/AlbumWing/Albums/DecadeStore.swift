import Foundation
import Synchronization
import Postgres
import Domain

/// What the album page's strip shows: photos the provider holds around a pin, decade by decade.
public struct DecadeCounts: Sendable, Equatable {
    /// A decade's first year → photos (every decade offered, 0 included).
    public let photos: [Int: Int]
    public let countedAt: Date
}

/// The strip's counts, kept per pin (pin_decades, migration 0127): a count costs provider calls,
/// so it is made when the strip is first wanted and again after `freshFor`.
public struct DecadeStore: Sendable {
    public let pool: PostgresPool
    /// 30 days: a place's archive changes slowly; a pin viewed daily costs one count a month.
    public static let freshFor: Duration = .seconds(30 * 86_400)

    public init(pool: PostgresPool) { self.pool = pool }

    /// The pin's counts while fresh; nil when never counted or older than `freshFor`.
    public func counts(pinID: Int64, userID: Int64) throws -> DecadeCounts? {
        let rows = try pool.query("""
            SELECT decade::int, photos, counted_at FROM pin_decades
            WHERE pin_id = $1 AND user_id = $2 AND counted_at > now() - make_interval(secs => $3)
            """, [pinID, userID, Double(Self.freshFor.components.seconds)])
        guard !rows.isEmpty else { return nil }
        var photos: [Int: Int] = [:]
        var oldest = Date.distantFuture
        for row in rows {
            photos[try row.decode("decade")] = try row.decode("photos")
            oldest = min(oldest, try row.decode("counted_at"))
        }
        return DecadeCounts(photos: photos, countedAt: oldest)
    }

    /// Keeps a count for a pin of the holder's (nothing when the pin is gone meanwhile). Every
    /// number is read into its range first: a provider's total is not trusted.
    public func save(pinID: Int64, userID: Int64, _ photos: [Int: Int]) throws {
        let kept = photos.filter { $0.key >= Era.earliest && $0.key <= 2100 && $0.key % 10 == 0 }
        guard !kept.isEmpty else { return }
        let decades = kept.keys.sorted()
        do {
            try write(pinID: pinID, userID: userID, decades: decades, kept)
        } catch let error as PostgresError where error.sqlState == .foreignKeyViolation {
            // The pin was deleted between the count and its write: nothing to keep.
        }
    }

    private func write(pinID: Int64, userID: Int64, decades: [Int], _ kept: [Int: Int]) throws {
        try pool.query("""
            INSERT INTO pin_decades (pin_id, user_id, decade, photos)
            SELECT p.id, p.user_id, d.decade, d.photos
            FROM pins p, unnest($3::int[], $4::int[]) AS d(decade, photos)
            WHERE p.id = $1 AND p.user_id = $2
            ON CONFLICT (pin_id, decade) DO UPDATE SET photos = EXCLUDED.photos, counted_at = now()
            """, [pinID, userID, "{" + decades.map(String.init).joined(separator: ",") + "}",
                  "{" + decades.map { String(min(max(kept[$0] ?? 0, 0), Int(Int32.max))) }.joined(separator: ",") + "}"])
    }
}

/// At most one count of a pin's decades at a time, shared by every page that asks (album.js asks
/// again while a slow provider counts), and a count that failed is not tried again for `rest`:
/// without this, every look at an uncounted album would spend a whole count of provider calls.
public final class DecadeCountGate: Sendable {
    public enum Admission: Equatable { case start, running, resting }

    public let rest: Duration
    /// Failures remembered at most (the oldest forgotten first when full).
    public let limit: Int
    private let state = Mutex<(running: Set<Int64>, failed: [Int64: ContinuousClock.Instant])>(([], [:]))

    public init(rest: Duration = .seconds(600), limit: Int = 10_000) {
        self.rest = rest
        self.limit = limit
    }

    /// `.start`: the caller counts, and must call `finished`; otherwise someone already is, or
    /// the last count failed less than `rest` ago.
    public func admit(_ pin: Int64, now: ContinuousClock.Instant = .now) -> Admission {
        state.withLock { state in
            if state.running.contains(pin) { return .running }
            if let failed = state.failed[pin], now - failed < rest { return .resting }
            state.failed[pin] = nil
            state.running.insert(pin)
            return .start
        }
    }

    public func finished(_ pin: Int64, failed: Bool, now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            state.running.remove(pin)
            guard failed else { return }
            if state.failed.count >= limit {
                state.failed = state.failed.filter { now - $0.value < rest }
                if state.failed.count >= limit, let oldest = state.failed.min(by: { $0.value < $1.value }) { state.failed[oldest.key] = nil }
            }
            state.failed[pin] = now
        }
    }
}
