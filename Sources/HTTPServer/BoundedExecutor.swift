import Foundation

/// Runs blocking work (request handlers) on at most `width` threads of its own. Jobs beyond the
/// width wait in a FIFO; beyond `backlog` waiting jobs, `submit` refuses, and the server answers
/// 503 instead of queueing without bound.
///
/// Real threads rather than a concurrent Dispatch queue: handlers block (libpq, a slow photo
/// service), and libdispatch does not grow its pool for threads blocked in system calls, so a
/// concurrent queue ran only a handful of handlers at once however wide it was meant to be
/// (measured: 30 requests to a handler sleeping 200 ms took 1.4 s instead of 0.2 s). Threads
/// start as load needs them, up to the width, and then stay.
public final class BoundedExecutor: @unchecked Sendable {
    public let width: Int
    public let backlog: Int
    private let label: String
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var waiting: [@Sendable () -> Void] = []
    private var head = 0
    private var threads = 0
    private var idle = 0

    public init(label: String, width: Int, backlog: Int) {
        precondition(width > 0)
        self.width = width
        self.backlog = backlog
        self.label = label
    }

    /// False when the backlog is full and the job was not taken.
    @discardableResult
    public func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let queued = waiting.count - head
        guard idle > queued || threads < width || queued < backlog else { return false }
        waiting.append(job)
        if idle > queued {
            condition.signal()
        } else if threads < width {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = "\(label)-\(threads)"
            thread.stackSize = 1024 * 1024
            thread.start()
        }
        return true
    }

    /// Jobs running and waiting, for metrics.
    public var load: (running: Int, waiting: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (threads - idle, waiting.count - head)
    }

    private func work() {
        condition.lock()
        while true {
            while head == waiting.count {
                idle += 1
                condition.wait()
                idle -= 1
            }
            let job = waiting[head]
            head += 1
            if head == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 1024 && head * 2 > waiting.count {
                waiting.removeFirst(head)
                head = 0
            }
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
