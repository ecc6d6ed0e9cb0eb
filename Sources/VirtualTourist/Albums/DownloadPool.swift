import Foundation
import Synchronization

/// The download slots: a fixed number of threads shared by every album of this instance
/// (docs/architecture.md, "Albums"). An album's driver hands over each fetch and put as a task
/// (its machine keeps at most `width` in flight), and tasks from several albums share the slots
/// first come, first served. Threads rather than
/// Dispatch because each download blocks in curl, and libdispatch does not add threads for work
/// blocked in system calls. Fixed rather than per album, so a hundred albums cost the same number
/// of threads (and curl handles, and connections) as one.
final class DownloadPool: Sendable {
    let slots: Int
    private let condition = NSCondition()
    /// Guarded by `condition`'s lock; the Mutex only satisfies Sendable checking.
    private let queue = Mutex<(tasks: [@Sendable () -> Void], started: Bool, stopping: Bool)>(([], false, false))

    init(slots: Int) { self.slots = max(1, slots) }

    /// Runs `task` on a slot without waiting for it; false once the pool has stopped. `first`:
    /// ahead of the tasks waiting (an image already downloaded is stored before more are fetched,
    /// so downloaded bytes never pile up behind other albums' downloads).
    @discardableResult
    func submit(first: Bool = false, _ task: @escaping @Sendable () -> Void) -> Bool {
        guard startIfNeeded() else { return false }
        enqueue(task, first: first)
        return true
    }

    /// Lets the slots finish what they hold and exit; the pool does not start again.
    func stop() {
        condition.lock()
        queue.withLock { $0.stopping = true }
        condition.broadcast()
        condition.unlock()
    }

    private func enqueue(_ task: @escaping @Sendable () -> Void, first: Bool = false) {
        condition.lock()
        queue.withLock { if first { $0.tasks.insert(task, at: 0) } else { $0.tasks.append(task) } }
        condition.signal()
        condition.unlock()
    }

    /// Starts the slots on first use; false once stopped.
    private func startIfNeeded() -> Bool {
        condition.lock()
        let (start, stopping) = queue.withLock { state -> (Bool, Bool) in
            guard !state.stopping else { return (false, true) }
            guard !state.started else { return (false, false) }
            state.started = true
            return (true, false)
        }
        condition.unlock()
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

    private func work() {
        while true {
            condition.lock()
            var task: (@Sendable () -> Void)?
            while true {
                let (next, stopping) = queue.withLock { state -> ((@Sendable () -> Void)?, Bool) in
                    state.tasks.isEmpty ? (nil, state.stopping) : (state.tasks.removeFirst(), false)
                }
                if let next { task = next; break }
                if stopping {
                    condition.unlock()
                    return
                }
                condition.wait()
            }
            condition.unlock()
            task?()
        }
    }
}
