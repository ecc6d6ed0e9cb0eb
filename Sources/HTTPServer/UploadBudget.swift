import Synchronization

/// The bytes of large uploads (bodies past `HTTPLimits.maxBodyBytes`, which only upload routes
/// take) held at once, across every connection, in memory or in spool files (SpooledBody): a body
/// is kept whole until its handler runs, so without this one client with many connections, signed
/// in or not, could make the server hold hundreds of megabytes (or fill its disk) for bodies it
/// will refuse. A request's reservation grows with
/// the bytes that actually arrive (a step at a time, so a head that only claims a large body holds
/// one step), and goes when the request does (its deinit). Past the budget the request is refused
/// with 503 and Retry-After.
public final class UploadBudget: Sendable {
    public let bytes: Int
    /// How much a reservation grows by at a time.
    public let step: Int
    private let used = Atomic<Int>(0)

    public init(bytes: Int, step: Int = 1 << 20) {
        self.bytes = max(0, bytes)
        self.step = max(1, step)
    }

    /// Bytes reserved now (/metrics, tests).
    public var reserved: Int { used.load(ordering: .relaxed) }

    /// Takes `count` more bytes from the budget, or nothing and false when it has no room.
    fileprivate func take(_ count: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard count <= bytes - current else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + count, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }

    fileprivate func release(_ count: Int) { used.subtract(count, ordering: .releasing) }

    /// A new, empty reservation (it grows with `cover`).
    func reservation() -> Reservation { Reservation(budget: self) }

    /// Held by the request whose body it is for: released when the last copy of the request goes.
    public final class Reservation: Sendable {
        let budget: UploadBudget
        private let count = Atomic<Int>(0)

        fileprivate init(budget: UploadBudget) {
            self.budget = budget
        }

        /// Bytes held now.
        public var held: Int { count.load(ordering: .relaxed) }

        /// Grows the reservation to hold at least `total` bytes (by whole steps); false when the
        /// budget has no room for it.
        func cover(_ total: Int) -> Bool {
            let now = count.load(ordering: .relaxed)
            guard total > now else { return true }
            let more = max(total - now, min(budget.step, budget.bytes))
            guard budget.take(more) else { return false }
            count.add(more, ordering: .relaxed)
            return true
        }

        deinit { budget.release(count.load(ordering: .relaxed)) }
    }

    /// The refusal past the budget.
    static let refusal = HTTPParseError(.serviceUnavailable, "too many large uploads are arriving at once; send it again in a moment",
                                        retryAfter: 5)
}
