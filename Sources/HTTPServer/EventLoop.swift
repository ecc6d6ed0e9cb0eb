#if canImport(Glibc)
import Glibc
#endif
import CEpoll
import Synchronization

/// What a descriptor registered with an `EventLoop` is told: epoll's event bits (EPOLLIN, EPOLLOUT,
/// EPOLLERR, EPOLLHUP) for it, on the loop's thread.
protocol EventLoopHandler: AnyObject {
    func ready(_ events: UInt32)
    /// What the handler put off with `EventLoop.later`, now that the events in hand are done.
    func resume()
}

/// One thread waiting in epoll_wait(2) for its descriptors, timers and jobs, and running each on
/// itself. A connection is driven by one loop for its whole life, so its reads, sends and the
/// state machine between them run on one thread with no hand-off: a request answered from memory
/// costs no context switch at all, where a libdispatch read source wakes a worker thread for
/// every read event: a task switch and an eventfd write per request (docs/performance.md,
/// "HTTP server").
///
/// Level-triggered, as Dispatch's read and write sources are: a descriptor reports for as long
/// as it is readable (or writable) and its driver wants it. A descriptor with no interest left is
/// taken out of the epoll set, since EPOLLHUP and EPOLLERR are reported whatever one asks for.
///
/// Other threads hand work in with `execute`: a locked list and an eventfd written only while the
/// loop sleeps. Timers are few (event streams' heartbeats): a table, its nearest deadline is
/// epoll_wait's timeout.
///
/// Concurrency: `inbox` is the only state touched from other threads (under its lock). Everything
/// else — the handler table, timers, the registration calls — belongs to the loop's thread and is
/// touched only there, which is why the class is `@unchecked Sendable`.
final class EventLoop: @unchecked Sendable {
    /// The process's loops, one per processor it may run on, started on first use and never
    /// stopped (as a thread pool is): every server in the process shares them.
    static let shared: [EventLoop] = (0..<Int(cepoll_allowed_processors())).map { EventLoop(index: $0) }
    private static let turn = Atomic<Int>(0)

    /// The loop for a new connection: round robin.
    static func next() -> EventLoop {
        let loops = shared
        return loops[turn.add(1, ordering: .relaxed).newValue % loops.count]
    }

    private let epoll: Int32
    private let wakeFD: Int32
    private let inbox = Mutex(Inbox())

    private struct Inbox {
        var jobs: [() -> Void] = []
        /// The loop is in (or about to enter) epoll_wait with a timeout: a new job must wake it.
        var sleeping = false
    }

    // The loop's thread only.
    private var handlers: [UInt64: any EventLoopHandler] = [:]
    private var lastToken: UInt64 = 0
    private var running: [() -> Void] = []
    private var postponed: [any EventLoopHandler] = []
    private var resuming: [any EventLoopHandler] = []
    private var timers: [Int: Timer] = [:]
    private var lastTimer = 0

    private struct Timer {
        var deadline: ContinuousClock.Instant
        let interval: Duration?
        let action: () -> Void
    }

    private static let wakeToken: UInt64 = 0

    private init(index: Int) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        precondition(epoll >= 0 && wakeFD >= 0, "epoll_create1/eventfd: \(String(cString: strerror(errno)))")
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeToken
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, wakeFD, &event) == 0)
        let context = Unmanaged.passRetained(Start(loop: self, name: "http.loop.\(index)")).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
            start.name.withCString { cepoll_name_thread($0) }
            start.loop.run()
            return nil
        }, context)
        precondition(rc == 0, "pthread_create: \(rc)")
        pthread_detach(thread)
    }

    private final class Start {
        let loop: EventLoop
        let name: String
        init(loop: EventLoop, name: String) { self.loop = loop; self.name = name }
    }

    // MARK: From any thread

    /// Runs `job` on the loop's thread, after what is queued before it. From the loop's own thread
    /// it runs after the events in hand (no wake-up needed: the loop is awake).
    func execute(_ job: @escaping @Sendable () -> Void) {
        let wake = inbox.withLock { inbox -> Bool in
            inbox.jobs.append(job)
            guard inbox.sleeping else { return false }
            inbox.sleeping = false
            return true
        }
        if wake {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    // MARK: On the loop's thread

    /// A token for `handler`'s events; its descriptor joins the epoll set with `setInterest`.
    func register(_ handler: any EventLoopHandler) -> UInt64 {
        lastToken += 1
        handlers[lastToken] = handler
        return lastToken
    }

    /// Changes what `fd` is watched for, from `old` to `new` (EPOLLIN and/or EPOLLOUT; 0 takes it out
    /// of the set). Callers track their interest, so a change costs one epoll_ctl and no change none.
    func setInterest(_ fd: Int32, token: UInt64, from old: UInt32, to new: UInt32) {
        guard old != new else { return }
        var event = epoll_event()
        event.events = new
        event.data.u64 = token
        let op = old == 0 ? EPOLL_CTL_ADD : new == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD
        _ = epoll_ctl(epoll, op, fd, &event)
    }

    /// The handler hears nothing more; call before closing its descriptor (after taking it out of
    /// the set), so a later descriptor with the same number is never mistaken for it.
    func deregister(_ token: UInt64) {
        handlers[token] = nil
    }

    /// Calls `handler.resume()` on this thread once the events in hand are handled: `execute` for the
    /// loop's own work, with no closure to allocate and no lock (an inline answer, every request).
    func later(_ handler: any EventLoopHandler) {
        postponed.append(handler)
    }

    /// Runs `action` every `interval` (or once, after `delay`, with `repeating` false) until cancelled.
    func schedule(after delay: Duration, repeating: Bool, _ action: @escaping () -> Void) -> Int {
        lastTimer += 1
        timers[lastTimer] = Timer(deadline: .now + delay, interval: repeating ? delay : nil, action: action)
        return lastTimer
    }

    func cancelTimer(_ id: Int) {
        timers[id] = nil
    }

    // MARK: The loop

    private func run() {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        while true {
            let timeout = nearestTimeout()
            let sleep = postponed.isEmpty && inbox.withLock { inbox -> Bool in
                guard inbox.jobs.isEmpty else { return false }
                if timeout != 0 { inbox.sleeping = true }
                return true
            }
            let count = epoll_wait(epoll, events, Int32(capacity), sleep ? timeout : 0)
            if sleep && timeout != 0 { inbox.withLock { $0.sleeping = false } }
            if count > 0 {
                for i in 0..<Int(count) {
                    let token = events[i].data.u64
                    if token == Self.wakeToken {
                        var value: UInt64 = 0
                        _ = read(wakeFD, &value, 8)
                        continue
                    }
                    // Gone already: closed by an earlier event of this batch.
                    handlers[token]?.ready(events[i].events)
                }
            }
            if !timers.isEmpty { fireTimers() }
            if !postponed.isEmpty {
                swap(&postponed, &resuming)
                for handler in resuming { handler.resume() }
                resuming.removeAll(keepingCapacity: true)
            }
            runJobs()
        }
    }

    private func runJobs() {
        inbox.withLock { swap(&$0.jobs, &running) }
        guard !running.isEmpty else { return }
        for job in running { job() }
        running.removeAll(keepingCapacity: true)
    }

    /// epoll_wait's timeout: -1 (none) without timers, else the milliseconds to the nearest, rounded up.
    private func nearestTimeout() -> Int32 {
        guard let nearest = timers.values.lazy.map(\.deadline).min() else { return -1 }
        let now = ContinuousClock.now
        guard nearest > now else { return 0 }
        let (seconds, attoseconds) = (nearest - now).components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(min(milliseconds, Int64(Int32.max)))
    }

    private func fireTimers() {
        let now = ContinuousClock.now
        let due = timers.filter { $0.value.deadline <= now }.keys.sorted()
        for id in due {
            // An action may have cancelled a later one.
            guard let timer = timers[id] else { continue }
            if let interval = timer.interval {
                timers[id]?.deadline = now + interval
            } else {
                timers[id] = nil
            }
            timer.action()
        }
    }
}
