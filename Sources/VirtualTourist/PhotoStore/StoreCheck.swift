import Foundation
import Synchronization

/// The photo store's answer to "can you take writes?", asked at most every few seconds: /readyz is
/// polled, and an object store that is down costs its timeout per question. While the breaker is
/// open its reason is the answer, and the store is not asked at all.
final class StoreCheck: Sendable {
    let store: any PhotoStore
    private let last = Mutex<(at: Date, problem: String?)?>(nil)
    static let seconds = 5.0

    init(store: any PhotoStore) {
        self.store = store
    }

    var breaker: StoreBreaker? { store as? StoreBreaker }

    /// The store as the operator configured it, for /readyz.
    var name: String {
        switch store.base {
        case let s3 as S3Store: "s3://\(s3.settings.bucket) at \(s3.settings.endpoint)"
        case let files as FileStore: files.root
        default: "\(type(of: store.base))"
        }
    }

    /// The breaker's reason while it is open, and the store's own answer unless reads are
    /// refused (asking then would wait for the store's timeout).
    func problem() -> String? {
        let status = breaker?.status
        let breakerProblem = status?.available == false ? breaker?.problem() : nil
        if status?.reads == false { return breakerProblem }
        let own: String?
        if let kept = last.withLock({ $0 }), Date().timeIntervalSince(kept.at) < Self.seconds {
            own = kept.problem
        } else {
            own = store.base.problem()
            last.withLock { $0 = (Date(), own) }
        }
        let both = [own, breakerProblem].compactMap { $0 }
        return both.isEmpty ? nil : both.joined(separator: "; ")
    }
}
