import Dispatch
import Foundation
import Synchronization

/// The photo store's answer to "can you take writes?" for /readyz and /metrics, which never wait
/// for it: the store is asked in the background at most every few seconds (an object store that
/// hangs costs its whole timeout per question, and a balancer's health check gives up long before),
/// and not at all while the breaker is open — its reason is the answer then.
package final class StoreCheck: Sendable {
    package let store: any PhotoStore
    private struct Kept {
        package var at: ContinuousClock.Instant?
        package var problem: String?
        package var asking = false
    }
    private let kept = Mutex(Kept())
    package static let askEvery = Duration.seconds(5)

    /// Asks the store once at once, so the first /readyz has an answer to give.
    package init(store: any PhotoStore) {
        self.store = store
        _ = ownProblem()
    }

    package var breaker: StoreBreaker? { store as? StoreBreaker }

    /// The store as the operator configured it, for /readyz.
    package var name: String {
        switch store.base {
        case let s3 as S3Store: "s3://\(s3.settings.bucket) at \(s3.settings.endpoint)"
        case let files as FileStore: files.root
        default: "\(type(of: store.base))"
        }
    }

    /// The breaker's reason while it is open, and the store's own last answer unless reads are
    /// refused.
    package func problem() -> String? {
        let status = breaker?.status
        let breakerProblem = status?.available == false ? breaker?.problem() : nil
        if status?.reads == false { return breakerProblem }
        let both = [ownProblem(), breakerProblem].compactMap { $0 }
        return both.isEmpty ? nil : both.joined(separator: "; ")
    }

    /// The last answer of the store itself; a new question is sent when it is older than
    /// `askEvery` and none is out.
    private func ownProblem() -> String? {
        let (problem, ask) = kept.withLock { k -> (String?, Bool) in
            let stale = k.at.map { ContinuousClock.now - $0 >= Self.askEvery } ?? true
            guard stale, !k.asking else { return (k.problem, false) }
            k.asking = true
            return (k.problem, true)
        }
        if ask {
            DispatchQueue.global().async { [self] in
                let answer = store.base.problem()
                kept.withLock { $0 = Kept(at: .now, problem: answer, asking: false) }
            }
        }
        return problem
    }
}
