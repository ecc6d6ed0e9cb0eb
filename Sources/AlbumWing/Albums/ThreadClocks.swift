import Foundation
import Synchronization

/// The CPU time of a set of threads, read from any thread (pthread_getcpuclockid): how the album
/// workers show that waiting for the database or a host costs no CPU, where a driver that spun
/// would use a whole core.
package final class ThreadClocks: Sendable {
    private let clocks = Mutex<[clockid_t]>([])

    /// Adds the calling thread.
    package func add() {
        var clock = clockid_t()
        guard pthread_getcpuclockid(pthread_self(), &clock) == 0 else { return }
        clocks.withLock { $0.append(clock) }
    }

    /// CPU seconds used by the threads added so far (a thread that ended counts no more).
    package var seconds: Double {
        clocks.withLock { clocks in
            clocks.reduce(0) { total, clock in
                var time = timespec()
                guard clock_gettime(clock, &time) == 0 else { return total }
                return total + Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
            }
        }
    }
}
