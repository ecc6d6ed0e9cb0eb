import Foundation
import Waiting

/// The download slots: a fixed number of threads shared by every album of this instance
/// (docs/architecture.md, "Albums"). An album's driver hands over each fetch and put as a task
/// (its machine keeps at most `width` in flight), and tasks from several albums share the slots
/// first come, first served. Threads rather than
/// Dispatch because each download blocks in curl, and libdispatch does not add threads for work
/// blocked in system calls. Fixed rather than per album, so a hundred albums cost the same number
/// of threads (and curl handles, and connections) as one.
package final class DownloadPool: Sendable {
    package let slots: Int
    private struct Queue {
        var tasks: [@Sendable () -> Void] = []
        var started = false
        var stopping = false
    }
    private let queue = Waitable(Queue())

    package init(slots: Int) { self.slots = max(1, slots) }

    /// Runs `task` on a slot without waiting for it; false once the pool has stopped. `first`:
    /// ahead of the tasks waiting (an image already downloaded is stored before more are fetched,
    /// so downloaded bytes never pile up behind other albums' downloads).
    @discardableResult
    package func submit(first: Bool = false, _ task: @escaping @Sendable () -> Void) -> Bool {
        guard startIfNeeded() else { return false }
        // Checked again under the same lock as the append: a stop in between would otherwise let
        // the slots exit with this task queued and never run.
        return queue.change(wake: .one) { state in
            guard !state.stopping else { return false }
            if first { state.tasks.insert(task, at: 0) } else { state.tasks.append(task) }
            return true
        }
    }

    /// Lets the slots finish what they hold and exit; the pool does not start again.
    package func stop() {
        queue.change { $0.stopping = true }
    }

    /// Starts the slots on first use; false once stopped.
    private func startIfNeeded() -> Bool {
        let (start, stopping) = queue.withLock { state -> (Bool, Bool) in
            guard !state.stopping else { return (false, true) }
            guard !state.started else { return (false, false) }
            state.started = true
            return (true, false)
        }
        if stopping { return false }
        guard start else { return true }
        for index in 0..<slots {
            let thread = Thread { [self] in work() }
            thread.name = "download-\(index)"
            thread.stackSize = 1024 * 1024
            thread.start()
        }
        return true
    }

    /// A slot: the next task, or the end once stopping with nothing left.
    private func work() {
        while let task = queue.wait(for: { state -> (@Sendable () -> Void)?? in
            if !state.tasks.isEmpty { return .some(state.tasks.removeFirst()) }
            return state.stopping ? .some(nil) : nil
        }) {
            task()
        }
    }
}
