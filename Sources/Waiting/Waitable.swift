#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one way a thread of ours waits for another: a value, one mutex and one condition
/// variable over it. Every queue, pool and gate that blocks a thread (the download slots, the
/// album workers' wake-up, an album's inbox, the store's read slots and deadline calls, the
/// database pool's line, the mail sender, the picker's searches, a stream's drain) is one of
/// these, in the manner of swift-nio's `ConditionLock` but waiting on a condition of the value
/// rather than on an integer. Timed waits are on the monotonic clock, so a change of the wall
/// clock neither ends nor stretches them. (Mutex, from Synchronization, still guards state that
/// nobody waits on; an Atomic, a flag or counter read without a lock.)
///
/// Sendable when its value is: the value is only reached under the mutex, which the compiler
/// cannot see through the pthread calls (hence `@unchecked`, below).
public final class Waitable<State> {
    private var state: State
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init(_ state: State) {
        self.state = state
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if canImport(Glibc)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Who is woken after a `change`.
    public enum Wake: Sendable { case none, one, all }

    /// Reads or changes the value under the lock; wakes nobody.
    public func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Changes the value and wakes `wake` of the threads waiting on it (all, unless one is enough:
    /// a task for one of several idle threads).
    public func change<R>(wake: Wake = .all, _ body: (inout State) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer {
            switch wake {
            case .none: break
            case .one: pthread_cond_signal(condition)
            case .all: pthread_cond_broadcast(condition)
            }
            pthread_mutex_unlock(mutex)
        }
        return try body(&state)
    }

    /// Waits until `ready` (run under the lock, first at once, then after every change) returns a
    /// value, and returns it.
    public func wait<R>(for ready: (inout State) throws -> R?) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let value = try ready(&state) { return value }
            pthread_cond_wait(condition, mutex)
        }
    }

    /// As `wait(for:)`, giving up after `timeout`: nil when `ready` still had nothing then.
    public func wait<R>(for ready: (inout State) throws -> R?, timeout: Duration) rethrows -> R? {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let (seconds, attoseconds) = max(timeout, .zero).components
        let nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
        // (At most ten years: a sum past the clock's range would trap.)
        deadline.tv_sec += Int(min(seconds, 315_360_000)) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let value = try ready(&state) { return value }
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT {
                return try ready(&state)
            }
        }
    }
}

extension Waitable: @unchecked Sendable where State: Sendable {}
