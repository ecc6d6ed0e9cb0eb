/// The connection pool's rules, as a value: no libpq, no semaphores, no clock of its own. The driver
/// (`PostgresPool`) reports what happened — a caller asks at `now`, a connection comes back healthy
/// or broken, an attempt to connect failed, a wait ended, the pool closes — and does what the answer
/// says. Generic over the connection so the tests use plain values.
///
/// Rules: at most `maxConnections` are open or being opened (`open` counts both). A caller who
/// finds no one waiting takes an idle connection or opens a new one; otherwise it joins the line,
/// and whatever comes back (a connection, or the place of a broken one) goes to the longest waiter,
/// never to a newcomer. A waiter's time is its own deadline, after which it leaves the line.
struct PoolStateMachine<Connection> {
    /// One caller standing in line.
    struct WaiterID: Hashable, Sendable {
        fileprivate let number: Int
    }

    enum Lifecycle: Equatable {
        case running
        /// Nobody is lent anything any more; lent connections are closed as they come back.
        case closed
    }

    /// What a waiter is handed.
    enum Grant {
        /// A connection given back, to be checked before use (it may have broken while idle).
        case connection(Connection)
        /// A place counted in `open` that a broken connection or a failed attempt gave up: the
        /// waiter opens a connection there itself (the database may be back).
        case place
        /// The pool closed while it waited.
        case closed
    }

    /// The answer to a caller that asks for a connection.
    enum Acquire {
        /// An idle connection: check it first (`idleConnectionBroken` if it broke while idle).
        case use(Connection)
        /// A place is counted for the caller: open a connection, and report `connectFailed` if
        /// that fails.
        case connect
        /// Wait until `deadline` to be woken, then report `waitEnded`.
        case wait(WaiterID, deadline: ContinuousClock.Instant)
        /// The pool is closed.
        case closed
    }

    /// What to do after a connection came back or an attempt failed.
    struct Handoff {
        /// Wake this waiter: its grant is ready (`waitEnded` collects it).
        var wake: WaiterID?
        /// Close this connection (broken, or the pool is closed).
        var close: Connection?
    }

    let maxConnections: Int
    private(set) var lifecycle: Lifecycle = .running
    private(set) var idle: [Connection] = []
    /// Connections lent, idle or being opened.
    private(set) var open = 0
    /// Connections lent since the pool was made.
    private(set) var lent = 0
    private var line: [WaiterID] = []
    /// Handed over, not collected yet: the waiter is woken and collects with `waitEnded`.
    private var granted: [WaiterID: Grant] = [:]
    private var nextWaiter = 0

    init(maxConnections: Int) {
        precondition(maxConnections > 0)
        self.maxConnections = maxConnections
    }

    /// Callers in line (those handed something but not woken yet no longer count).
    var waiting: Int { line.count }

    // MARK: Events

    /// A caller asks for a connection at `now` and will wait at most `timeout`.
    mutating func acquire(now: ContinuousClock.Instant, timeout: Duration) -> Acquire {
        guard lifecycle == .running else { return .closed }
        lent += 1
        // An idle connection means no one waits; a newcomer never goes ahead of the line.
        if line.isEmpty, let connection = idle.popLast() { return .use(connection) }
        if line.isEmpty && open < maxConnections {
            open += 1
            return .connect
        }
        nextWaiter += 1
        let id = WaiterID(number: nextWaiter)
        line.append(id)
        return .wait(id, deadline: now + timeout)
    }

    /// A connection taken with `.use` or `.connection` was found broken before use: it is closed and
    /// a new one opened in its place (the count of open connections does not change).
    func idleConnectionBroken(_ connection: Connection) -> Handoff {
        Handoff(close: connection)
    }

    /// A borrower gives its connection back, healthy (it can serve the next) or broken.
    mutating func released(_ connection: Connection, healthy: Bool) -> Handoff {
        guard lifecycle == .running else {
            open -= 1
            return Handoff(close: connection)
        }
        guard !line.isEmpty else {
            if healthy {
                idle.append(connection)
                return Handoff()
            }
            open -= 1
            return Handoff(close: connection)
        }
        let next = line.removeFirst()
        granted[next] = healthy ? .connection(connection) : .place
        return Handoff(wake: next, close: healthy ? nil : connection)
    }

    /// Opening a connection (`.connect` or `.place`) failed: the place goes to the next in line, or
    /// is given up.
    mutating func connectFailed() -> Handoff {
        guard lifecycle == .running, !line.isEmpty else {
            open -= 1
            return Handoff()
        }
        let next = line.removeFirst()
        granted[next] = .place
        return Handoff(wake: next)
    }

    /// A waiter woke, because it was handed something or because its deadline came (both may
    /// happen at once: what was handed over wins). Its grant, or nil when it timed out with none
    /// (it has left the line).
    mutating func waitEnded(_ id: WaiterID) -> Grant? {
        if let grant = granted.removeValue(forKey: id) { return grant }
        line.removeAll { $0 == id }
        return nil
    }

    /// The pool closes: idle connections are closed, everyone in line is sent away, and new callers
    /// are refused; lent connections close when they come back.
    mutating func close() -> (close: [Connection], wake: [WaiterID]) {
        guard lifecycle == .running else { return ([], []) }
        lifecycle = .closed
        let closing = idle
        idle.removeAll()
        open -= closing.count
        let woken = line
        line.removeAll()
        for id in woken { granted[id] = .closed }
        return (closing, woken)
    }
}

extension PoolStateMachine.Grant: Equatable where Connection: Equatable {}
extension PoolStateMachine.Acquire: Equatable where Connection: Equatable {}
extension PoolStateMachine.Handoff: Equatable where Connection: Equatable {}

extension PoolStateMachine: Sendable where Connection: Sendable {}
extension PoolStateMachine.Grant: Sendable where Connection: Sendable {}
extension PoolStateMachine.Lifecycle: Sendable {}
