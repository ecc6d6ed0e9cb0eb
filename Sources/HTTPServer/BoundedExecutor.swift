import Dispatch
import Synchronization

/// Runs blocking work (request handlers) with at most `width` jobs at once. Jobs beyond the width
/// wait in a FIFO; beyond `backlog` waiting jobs, `submit` refuses, and the server answers 503
/// instead of queueing without bound.
///
/// Each slot is a serial Dispatch queue of its own. Handlers block (libpq, a slow photo service),
/// and libdispatch does not add threads to a concurrent queue for work blocked in system calls.
/// Serial queues are "overcommit" in libdispatch — each busy one gets a thread even when others
/// block — so `width` blocked handlers really run side by side, while idle slots cost no thread
/// and a quick handler runs without a context switch, which dedicated threads woken through a
/// condition variable would cost (docs/performance.md, "HTTP server", has the measurements).
public final class BoundedExecutor: Sendable {
    public let width: Int
    public let backlog: Int
    private let slots: [DispatchQueue]
    private let state: Mutex<State>

    private struct State {
        var idle: [Int]
        var waiting: [@Sendable () -> Void] = []
        var head = 0
        var waitingCount: Int { waiting.count - head }
    }

    public init(label: String, width: Int, backlog: Int) {
        precondition(width > 0)
        self.width = width
        self.backlog = backlog
        slots = (0..<width).map { DispatchQueue(label: "\(label).\($0)") }
        state = Mutex(State(idle: Array((0..<width).reversed())))
    }

    /// False when the backlog is full and the job was not taken.
    @discardableResult
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let slot: Int?? = state.withLock { s in
            if let slot = s.idle.popLast() { return .some(slot) }
            guard s.waitingCount < backlog else { return nil }
            s.waiting.append(job)
            return .some(nil)
        }
        guard let slot else { return false }
        if let slot { slots[slot].async { self.run(job, in: slot) } }
        return true
    }

    /// Jobs running and waiting, for metrics.
    public var load: (running: Int, waiting: Int) {
        state.withLock { (width - $0.idle.count, $0.waitingCount) }
    }

    private func run(_ first: @escaping @Sendable () -> Void, in slot: Int) {
        var job = first
        while true {
            job()
            // Take the next waiting job in this slot rather than giving the slot back.
            let next: (@Sendable () -> Void)? = state.withLock { s in
                guard s.head < s.waiting.count else {
                    s.idle.append(slot)
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
