@preconcurrency import Dispatch
import Synchronization

/// Runs blocking work (request handlers) on Dispatch with at most `width` jobs at once. Jobs beyond
/// the width wait in a FIFO; beyond `backlog` waiting jobs, `submit` refuses, and the server answers
/// 503 instead of queueing without bound. Nothing here blocks a thread while waiting for a slot, so
/// Dispatch never has to grow its pool for us.
public final class BoundedExecutor: Sendable {
    public let width: Int
    public let backlog: Int
    private let queue: DispatchQueue
    private let state = Mutex(State())

    private struct State {
        var running = 0
        var waiting: [@Sendable () -> Void] = []
        var head = 0
        var waitingCount: Int { waiting.count - head }
    }

    public init(label: String, width: Int, backlog: Int) {
        precondition(width > 0)
        self.width = width
        self.backlog = backlog
        self.queue = DispatchQueue(label: label, attributes: .concurrent)
    }

    /// False when the backlog is full and the job was not taken.
    @discardableResult
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let startNow: Bool? = state.withLock { s in
            if s.running < width {
                s.running += 1
                return true
            }
            guard s.waitingCount < backlog else { return nil }
            s.waiting.append(job)
            return false
        }
        guard let startNow else { return false }
        if startNow { queue.async { self.run(job) } }
        return true
    }

    /// Jobs running and waiting, for metrics.
    public var load: (running: Int, waiting: Int) {
        state.withLock { ($0.running, $0.waitingCount) }
    }

    private func run(_ first: @escaping @Sendable () -> Void) {
        var job = first
        while true {
            job()
            // Take the next waiting job on this same thread rather than giving the slot back.
            let next: (@Sendable () -> Void)? = state.withLock { s in
                guard s.head < s.waiting.count else {
                    s.running -= 1
                    s.waiting.removeAll(keepingCapacity: true)
                    s.head = 0
                    return nil
                }
                let next = s.waiting[s.head]
                s.head += 1
                if s.head > 1024 && s.head * 2 > s.waiting.count {
                    s.waiting.removeFirst(s.head)
                    s.head = 0
                }
                return next
            }
            guard let next else { return }
            job = next
        }
    }
}
