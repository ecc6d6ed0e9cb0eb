import Foundation
import Synchronization
import Waiting

/// Store calls the caller waits for with a deadline: the call runs on a thread of these, the caller
/// stops waiting when the deadline passes. A call cannot be cancelled (a process stuck in `open`
/// on a dead NFS mount, a `write` to a FUSE file system that stopped answering), so its thread
/// stays with it until it ends; `overdue` counts those, and past `maxOverdue` further calls are
/// given up at once without a thread. The breaker keeps the number far lower in practice: the
/// first call past its deadline opens it, and while it is open calls are refused without a thread.
package final class DeadlineCalls: Sendable {
    /// Calls given up at their deadline that have not ended yet, each holding a thread.
    package let overdue = Atomic<Int>(0)
    package let maxOverdue: Int
    private let queue = Waitable(Queue())

    private struct Queue {
        var jobs: [Job] = []
        /// Threads waiting for a job.
        var idle = 0
    }

    /// A job is handed from the caller to a thread once: unchecked because the closure is run on
    /// exactly one thread, never two at once.
    private struct Job: @unchecked Sendable {
        let run: () -> Void
    }

    package init(maxOverdue: Int = 64) {
        self.maxOverdue = maxOverdue
    }

    /// Ways a call may end, for the caller.
    package enum Ending<T> {
        case returned(Result<T, any Error>)
        /// Past the deadline, or not started because too many calls are overdue already.
        case overdue
    }

    /// Runs `body` on one of the threads and waits for it at most `deadline`.
    package func run<T>(within deadline: Duration, _ body: @escaping () throws -> T) -> Ending<T> {
        guard overdue.load(ordering: .relaxed) < maxOverdue else { return .overdue }
        let call = Call<T>()
        submit(Job { [self] in
            let result = Result { try body() }
            // A caller that gave up has counted this call overdue: it ends now.
            if !call.finish(result) { overdue.subtract(1, ordering: .relaxed) }
        })
        if let result = call.wait(deadline) { return .returned(result) }
        // Counted under the call's lock, so the thread either sees it and uncounts it, or had
        // already finished (then its result is used).
        if let result = call.abandon({ overdue.add(1, ordering: .relaxed) }) { return .returned(result) }
        return .overdue
    }

    private func submit(_ job: Job) {
        // A thread per job queued beyond the idle ones: a job never waits behind a hung one.
        let spawn = queue.change(wake: .one) { q in
            q.jobs.append(job)
            return q.jobs.count > q.idle
        }
        if spawn {
            let thread = Thread { [self] in work() }
            thread.name = "photo-store"
            thread.start()
        }
    }

    /// Takes jobs until none comes for a minute. A thread counts as idle while it waits, and stops
    /// counting in the same step that takes a job or leaves, so `submit` never counts on a thread
    /// that is gone or busy.
    private func work() {
        while true {
            queue.withLock { $0.idle += 1 }
            var job = queue.wait(for: { q -> Job? in
                guard !q.jobs.isEmpty else { return nil }
                q.idle -= 1
                return q.jobs.removeFirst()
            }, timeout: .seconds(60))
            if job == nil {
                job = queue.withLock { q in
                    q.idle -= 1
                    return q.jobs.isEmpty ? nil : q.jobs.removeFirst()
                }
            }
            guard let job else { return }
            job.run()
        }
    }

    /// One call's result, handed over between its thread and its caller. Unchecked because `T`
    /// need not be Sendable: the result moves once, from the call's thread to the caller, under
    /// the Waitable's mutex, and is never touched by both.
    private final class Call<T>: @unchecked Sendable {
        private let state = Waitable<(value: Result<T, any Error>?, abandoned: Bool)>((nil, false))

        /// False when the caller gave up already.
        func finish(_ result: Result<T, any Error>) -> Bool {
            state.change { s in
                guard !s.abandoned else { return false }
                s.value = result
                return true
            }
        }

        /// The result, waited for at most `deadline`.
        func wait(_ deadline: Duration) -> Result<T, any Error>? {
            state.wait(for: { $0.value }, timeout: deadline)
        }

        /// The result when it came after all; else marks the call given up and runs `counted`.
        func abandon(_ counted: () -> Void) -> Result<T, any Error>? {
            state.withLock { s in
                if let value = s.value { return value }
                s.abandoned = true
                counted()
                return nil
            }
        }
    }
}
