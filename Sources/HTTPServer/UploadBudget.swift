import Synchronization

/// The bytes of large uploads (bodies past `HTTPLimits.maxBodyBytes`, which only upload routes
/// take) being received at once, across every connection: a body is held whole in memory until its
/// handler runs, so without this one client with many connections, signed in or not, could make the
/// server hold hundreds of megabytes for bodies it will refuse. A request reserves its
/// Content-Length when its head arrives; the reservation goes when the request does (its deinit).
/// Past the budget the request is refused at once with 503 and Retry-After.
public final class UploadBudget: Sendable {
    public let bytes: Int
    private let used = Atomic<Int>(0)

    public init(bytes: Int) {
        self.bytes = max(0, bytes)
    }

    /// Bytes reserved now (/metrics, tests).
    public var reserved: Int { used.load(ordering: .relaxed) }

    /// A reservation of `count` bytes, or nil when the budget has no room for it.
    func reserve(_ count: Int) -> Reservation? {
        var current = used.load(ordering: .relaxed)
        while true {
            guard count <= bytes - current else { return nil }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + count, ordering: .acquiringAndReleasing)
            if exchanged { return Reservation(budget: self, count: count) }
            current = original
        }
    }

    fileprivate func release(_ count: Int) { used.subtract(count, ordering: .releasing) }

    /// Held by the request whose body it is for: released when the last copy of the request goes.
    public final class Reservation: Sendable {
        let budget: UploadBudget
        let count: Int

        fileprivate init(budget: UploadBudget, count: Int) {
            (self.budget, self.count) = (budget, count)
        }

        deinit { budget.release(count) }
    }

    /// The refusal past the budget.
    static let refusal = HTTPParseError(.serviceUnavailable, "too many large uploads are arriving at once; send it again in a moment",
                                        retryAfter: 5)
}
