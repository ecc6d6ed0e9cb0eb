#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// glibc's malloc_trim(3) (malloc.h), which the Glibc module does not export.
@_silgen_name("malloc_trim") private func mallocTrim(_ pad: Int) -> Int32

/// Gives freed memory back to the system every few seconds. glibc keeps what large pages and album
/// downloads freed in its arenas (one per thread that allocated), so without a trim RSS only grows
/// (docs/architecture.md, "Memory"; docs/performance.md, "Memory"). `malloc_trim(0)` releases the
/// free tops and, since glibc 2.8, whole free pages inside each arena; with nothing to release it
/// costs well under a millisecond.
/// `@unchecked Sendable`: `timer` is only touched on `queue`.
package final class MemoryTrim: @unchecked Sendable {
    package let seconds: Double
    private let queue = DispatchQueue(label: "memory-trim", qos: .background)
    private var timer: (any DispatchSourceTimer)?

    package init(seconds: Double) { self.seconds = seconds }

    package func start() {
        guard seconds > 0 else { return }
        queue.sync {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + seconds, repeating: seconds, leeway: .seconds(1))
            timer.setEventHandler { _ = mallocTrim(0) }
            timer.resume()
            self.timer = timer
        }
    }

    package func stop() { queue.sync { timer?.cancel(); timer = nil } }

    /// A trim now: after work that freed tens of megabytes at once on a thread that may not
    /// allocate again for a while (a photo's pixels, OwnPhotoStore.prepare).
    package static func now() { _ = mallocTrim(0) }
}
