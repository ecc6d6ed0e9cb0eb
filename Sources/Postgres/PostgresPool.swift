import Foundation
import Log

/// A bounded pool of connections. A caller borrows one connection for the length of a closure, so
/// no PGconn is ever used by two threads at once. When all are lent out, callers wait in line, first
/// come first served: a connection given back goes straight to the caller who has waited longest,
/// never to one who arrived later (with a shared condition variable a thread giving a connection
/// back and asking again could take it ahead of everyone woken for it). A caller who has waited
/// `acquireTimeout` gets `PostgresError.poolTimeout` (the HTTP layer answers 503) instead of piling
/// up. A connection found broken, on borrowing or after a query, is thrown away and a new one made
/// on demand: a database restart costs failed requests, never a process restart.
public final class PostgresPool: @unchecked Sendable {
    public let url: String
    public let maxConnections: Int
    public let acquireTimeout: Double
    public let options: PostgresConnection.Options
    private let logger = Logger(label: "postgres")

    // Guarded by `lock`.
    private let lock = NSLock()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var waiters: [Waiter] = []
    private var closed = false
    private var lent = 0

    /// One caller waiting in line, woken by its own semaphore once `grant` is set.
    private final class Waiter: @unchecked Sendable {
        let wake = DispatchSemaphore(value: 0)
        var grant: Grant?  // guarded by the pool's lock
    }

    private enum Grant {
        /// A connection handed over by the caller who gave it back.
        case connection(PostgresConnection)
        /// A place counted in `open`, given up by a broken connection or a failed attempt: the
        /// waiter makes the new connection.
        case place
        case closed
    }

    public init(url: String, maxConnections: Int = 10, acquireTimeout: Double = 5,
                options: PostgresConnection.Options = .init()) {
        precondition(maxConnections > 0)
        self.url = url
        self.maxConnections = maxConnections
        self.acquireTimeout = acquireTimeout
        self.options = options
    }

    public struct Statistics: Sendable {
        public let open: Int
        public let idle: Int
        public let waiting: Int
        /// Connections lent since the pool was made: each is a borrower's round trip or more.
        public let lent: Int
        public var inUse: Int { open - idle }
    }

    public var statistics: Statistics {
        lock.withLock { Statistics(open: open, idle: idle.count, waiting: waiters.count, lent: lent) }
    }

    /// Lends a connection to `body` and takes it back afterwards, healthy or not.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresResult {
        try withConnection { try $0.query(sql, parameters) }
    }

    /// Several statements in one round trip on one connection (`PostgresConnection.pipeline`).
    public func pipeline(_ statements: [PostgresStatement]) throws -> [PostgresResult] {
        try withConnection { try $0.pipeline(statements) }
    }

    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { try $0.transaction(body) }
    }

    /// Closes idle connections, sends away everyone waiting and refuses new borrowers; lent
    /// connections close when returned.
    public func close() {
        let (toClose, toWake) = lock.withLock { () -> ([PostgresConnection], [Waiter]) in
            closed = true
            let toClose = idle
            idle.removeAll()
            open -= toClose.count
            let toWake = waiters
            waiters.removeAll()
            for waiter in toWake { waiter.grant = .closed }
            return (toClose, toWake)
        }
        toWake.forEach { $0.wake.signal() }
        toClose.forEach { $0.close() }
    }

    private func acquire() throws -> PostgresConnection {
        let deadline = DispatchTime.now() + acquireTimeout
        lock.lock()
        if closed {
            lock.unlock()
            throw PostgresError.poolClosed
        }
        lent += 1
        // Only when no one waits (an idle connection means no one does): a newcomer never goes
        // ahead of the line.
        if waiters.isEmpty, let candidate = idle.popLast() {
            lock.unlock()
            return try checked(candidate)
        }
        if waiters.isEmpty && open < maxConnections {
            open += 1
            lock.unlock()
            return try connect()
        }
        let waiter = Waiter()
        waiters.append(waiter)
        lock.unlock()
        _ = waiter.wake.wait(timeout: deadline)
        lock.lock()
        // Granted, possibly just as the wait timed out; if not, leave the line.
        guard let grant = waiter.grant else {
            waiters.removeAll { $0 === waiter }
            lock.unlock()
            throw PostgresError.poolTimeout(waited: acquireTimeout)
        }
        lock.unlock()
        switch grant {
        case .closed: throw PostgresError.poolClosed
        case .place: return try connect()
        case .connection(let connection): return try checked(connection)
        }
    }

    /// An idle connection, or a new one in its place when it broke while idle.
    private func checked(_ connection: PostgresConnection) throws -> PostgresConnection {
        if connection.looksAliveWhileIdle() { return connection }
        logger.notice("dropping a broken pooled connection (backend \(connection.backendPID))")
        connection.close()
        return try connect()
    }

    /// A new connection in a place already counted in `open`; on failure the place goes to the
    /// next in line (who tries for itself: the database may be back) or is given up.
    private func connect() throws -> PostgresConnection {
        do {
            return try PostgresConnection(url: url, options: options)
        } catch {
            givePlaceOn()
            throw error
        }
    }

    private func givePlaceOn() {
        let next: Waiter? = lock.withLock {
            guard !closed, !waiters.isEmpty else {
                open -= 1
                return nil
            }
            let next = waiters.removeFirst()
            next.grant = .place
            return next
        }
        next?.wake.signal()
    }

    private func release(_ connection: PostgresConnection) {
        let healthy = connection.isHealthy
        if !healthy { logger.notice("discarding a connection that broke during use") }
        var closeIt = !healthy
        let next: Waiter? = lock.withLock {
            if closed {
                open -= 1
                closeIt = true
                return nil
            }
            guard !waiters.isEmpty else {
                if healthy { idle.append(connection) } else { open -= 1 }
                return nil
            }
            let next = waiters.removeFirst()
            next.grant = healthy ? .connection(connection) : .place
            return next
        }
        next?.wake.signal()
        if closeIt { connection.close() }
    }
}
