import Foundation
import Log

/// A bounded pool of connections. A caller borrows one connection for the length of a closure, so
/// no PGconn is ever used by two threads at once. When all are lent out, callers wait up to
/// `acquireTimeout` and then get `PostgresError.poolTimeout` (the HTTP layer answers 503) instead
/// of piling up. A connection found broken, on borrowing or after a query, is thrown away and a
/// new one made on demand: a database restart costs failed requests, never a process restart.
public final class PostgresPool: @unchecked Sendable {
    public let url: String
    public let maxConnections: Int
    public let acquireTimeout: Double
    public let options: PostgresConnection.Options
    private let logger = Logger(label: "postgres")

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var waiting = 0
    private var closed = false

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
        public var inUse: Int { open - idle }
    }

    public var statistics: Statistics {
        condition.lock()
        defer { condition.unlock() }
        return Statistics(open: open, idle: idle.count, waiting: waiting)
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

    /// Closes idle connections and refuses new borrowers; lent connections close when returned.
    public func close() {
        condition.lock()
        closed = true
        let toClose = idle
        idle.removeAll()
        open -= toClose.count
        condition.broadcast()
        condition.unlock()
        toClose.forEach { $0.close() }
    }

    private func acquire() throws -> PostgresConnection {
        let deadline = Date(timeIntervalSinceNow: acquireTimeout)
        condition.lock()
        while true {
            if closed {
                condition.unlock()
                throw PostgresError.poolClosed
            }
            if let candidate = idle.popLast() {
                condition.unlock()
                if candidate.looksAliveWhileIdle() { return candidate }
                logger.notice("dropping a broken pooled connection (backend \(candidate.backendPID))")
                candidate.close()
                condition.lock()
                open -= 1
                continue
            }
            if open < maxConnections {
                open += 1
                condition.unlock()
                do {
                    return try PostgresConnection(url: url, options: options)
                } catch {
                    condition.lock()
                    open -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            waiting += 1
            let signalled = condition.wait(until: deadline)
            waiting -= 1
            if !signalled && idle.isEmpty && open >= maxConnections {
                condition.unlock()
                throw PostgresError.poolTimeout(waited: acquireTimeout)
            }
        }
    }

    private func release(_ connection: PostgresConnection) {
        let healthy = connection.isHealthy
        condition.lock()
        let keep = healthy && !closed
        if keep { idle.append(connection) } else { open -= 1 }
        condition.signal()
        condition.unlock()
        if !keep {
            if !healthy { logger.notice("discarding a connection that broke during use") }
            connection.close()
        }
    }
}
