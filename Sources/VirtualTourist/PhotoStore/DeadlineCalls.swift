import Foundation
import Synchronization

/// Store calls the caller waits for with a deadline: the call runs on a thread of these, the caller
/// stops waiting when the deadline passes. A call cannot be cancelled (a process stuck in `open`
/// on a dead NFS mount, a `write` to a FUSE file system that stopped answering), so its thread
/// stays with it until it ends; `overdue` counts those, and past `maxOverdue` further calls are
/// given up at once without a thread. The breaker keeps the number far lower in practice: the
/// first call past its deadline opens it, and while it is open calls are refused without a thread.
final class DeadlineCalls: Sendable {
    /// Calls given up at their deadline that have not ended yet, each holding a thread.
    let overdue = Atomic<Int>(0)
    let maxOverdue: Int
    private let queue = Mutex(Queue())
    private let wake = NSCondition()

    private struct Queue {
        var jobs: [Job] = []
        var idle = 0
    }

    /// A job is handed from the caller to a thread once: unchecked because the closure is run on
    /// exactly one thread, never two at once.
    private struct Job: @unchecked Sendable {
        let run: () -> Void
    }

    init(maxOverdue: Int = 64) {
        self.maxOverdue = maxOverdue
    }

    /// Ways a call may end, for the caller.
    enum Ending<T> {
        case returned(Result<T, any Error>)
        /// Past the deadline, or not started because too many calls are overdue already.
        case overdue
    }

    /// Runs `body` on one of the threads and waits for it at most `deadline`.
    func run<T>(within deadline: Duration, _ body: @escaping () throws -> T) -> Ending<T> {
        guard overdue.load(ordering: .relaxed) < maxOverdue else { return .overdue }
        let call = Call<T>()
        submit(Job { [self] in
            let result = Result { try body() }
            // A caller that gave up has counted this call overdue: it ends now.
            if !call.finish(result) { overdue.subtract(1, ordering: .relaxed) }
        })
        let seconds = deadline.inSeconds
        if call.done.wait(timeout: .now() + seconds) == .success, let result = call.result() { return .returned(result) }
        // Counted under the call's lock, so the thread either sees it and uncounts it, or had
        // already finished (then its result is used).
        if let result = call.abandon({ overdue.add(1, ordering: .relaxed) }) { return .returned(result) }
        return .overdue
    }

    private func submit(_ job: Job) {
        // A thread per job queued beyond the idle ones: a job never waits behind a hung one.
        let spawn = queue.withLock { q in
            q.jobs.append(job)
            return q.jobs.count > q.idle
        }
        wake.lock()
        wake.signal()
        wake.unlock()
        if spawn {
            let thread = Thread { [self] in work() }
            thread.name = "photo-store"
            thread.start()
        }
    }

    /// Takes jobs until none comes for a minute.
    private func work() {
        while true {
            if let job = queue.withLock({ $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }) {
                job.run()
                continue
            }
            wake.lock()
            let waiting = queue.withLock { q in
                guard q.jobs.isEmpty else { return false }
                q.idle += 1
                return true
            }
            var woken = true
            if waiting { woken = wake.wait(until: Date(timeIntervalSinceNow: 60)) }
            wake.unlock()
            let leave = queue.withLock { q in
                if waiting { q.idle -= 1 }
                return !woken && q.jobs.isEmpty
            }
            if leave { return }
        }
    }

    /// One call's result, handed over between its thread and its caller.
    private final class Call<T>: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var value: Result<T, any Error>?
        private var abandoned = false

        /// False when the caller gave up already.
        func finish(_ result: Result<T, any Error>) -> Bool {
            lock.lock()
            defer { lock.unlock() }
            guard !abandoned else { return false }
            value = result
            done.signal()
            return true
        }

        func result() -> Result<T, any Error>? {
            lock.lock()
            defer { lock.unlock() }
            return value
        }

        /// The result when it came after all; else marks the call given up and runs `counted`.
        func abandon(_ counted: () -> Void) -> Result<T, any Error>? {
            lock.lock()
            defer { lock.unlock() }
            if let value { return value }
            abandoned = true
            counted()
            return nil
        }
    }
}
