import Foundation
import Synchronization

/// The photo store's answer to "can you take writes?", asked at most every few seconds: /readyz is
/// polled, and an object store that is down costs its connect timeout per question.
final class StoreCheck: Sendable {
    let store: any PhotoStore
    private let last = Mutex<(at: Date, problem: String?)?>(nil)
    static let seconds = 5.0

    init(store: any PhotoStore) {
        self.store = store
    }

    func problem() -> String? {
        if let kept = last.withLock({ $0 }), Date().timeIntervalSince(kept.at) < Self.seconds { return kept.problem }
        let problem = store.problem()
        last.withLock { $0 = (Date(), problem) }
        return problem
    }
}
