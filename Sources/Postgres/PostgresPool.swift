import Foundation
import Log
import Synchronization
import Waiting

/// A bounded pool of connections. A caller borrows one connection for the length of a closure, so
/// no PGconn is ever used by two threads at once. When all are lent out, callers wait in line, first
/// come first served: a connection given back goes straight to the caller who has waited longest,
/// never to one who arrived later (with a shared condition variable a thread giving a connection
/// back and asking again could take it ahead of everyone woken for it). A caller who has waited
/// `acquireTimeout` gets `PostgresError.poolTimeout` (the HTTP layer answers 503, and it counts as
/// the database unavailable) instead of piling up; one who opens the connection itself waits at
/// most libpq's connect_timeout more. A connection found broken, on borrowing or after a query, is
/// thrown away and a new one made on demand: a database restart costs failed requests, never a
/// process restart. Every connection has TCP keepalives (`PostgresConnection.Options.keepalive`),
/// so a database that went silent — a partition, a failover that reset nothing — fails the
/// queries waiting on it within `Keepalive.bound` rather than after the kernel's 15 minutes.
///
/// The rules are `PoolStateMachine`'s; this class is its driver: it connects, checks, closes and
/// wakes waiters as the machine answers, always outside the lock.
public final class PostgresPool: Sendable {
    public let url: String
    public let maxConnections: Int
    public let acquireTimeout: Double
    public let options: PostgresConnection.Options
    private let logger = Logger(label: "postgres")

    private typealias Machine = PoolStateMachine<PostgresConnection>
    private struct State: Sendable {
        var machine: Machine
        /// Each waiter in line sleeps on a bell of its own, rung when the machine answers it (a
        /// connection, a place, or the pool closed): a release wakes the one thread it serves,
        /// never the whole line (at saturation every release hands off, and a shared condition
        /// woke every waiter each time).
        var bells: [Machine.WaiterID: Waitable<Bool>] = [:]
    }
    private let state: Waitable<State>

    public init(url: String, maxConnections: Int = 10, acquireTimeout: Double = 5,
                options: PostgresConnection.Options = .init()) {
        precondition(maxConnections > 0)
        self.url = url
        self.maxConnections = maxConnections
        self.acquireTimeout = acquireTimeout
        self.options = options
        self.state = Waitable(State(machine: PoolStateMachine(maxConnections: maxConnections)))
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
        state.withLock {
            Statistics(open: $0.machine.open, idle: $0.machine.idle.count, waiting: $0.machine.waiting, lent: $0.machine.lent)
        }
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
        let (toClose, bells) = state.withLock { s -> ([PostgresConnection], [Waitable<Bool>]) in
            let (closing, woken) = s.machine.close()
            return (closing, woken.compactMap { s.bells[$0] })
        }
        bells.forEach { $0.change { $0 = true } }
        toClose.forEach { $0.close() }
    }

    private func acquire() throws -> PostgresConnection {
        // The bell is hung under the same lock as the answer, so no hand-off can come in between.
        let (answer, bell) = state.withLock { s -> (Machine.Acquire, Waitable<Bool>?) in
            let answer = s.machine.acquire(now: .now, timeout: .seconds(acquireTimeout))
            guard case .wait(let id, _) = answer else { return (answer, nil) }
            let bell = Waitable(false)
            s.bells[id] = bell
            return (answer, bell)
        }
        switch answer {
        case .closed: throw PostgresError.poolClosed
        case .use(let connection): return try checked(connection)
        case .connect: return try connect()
        case .wait(let id, let deadline):
            _ = bell?.wait(for: { $0 ? true : nil }, timeout: deadline - .now)
            let grant = state.withLock { s in
                s.bells[id] = nil
                return s.machine.waitEnded(id)
            }
            switch grant {
            case nil: throw PostgresError.poolTimeout(waited: acquireTimeout)
            case .closed: throw PostgresError.poolClosed
            case .place: return try connect()
            case .connection(let connection): return try checked(connection)
            }
        }
    }

    /// An idle connection, or a new one in its place when it broke while idle.
    private func checked(_ connection: PostgresConnection) throws -> PostgresConnection {
        if connection.looksAliveWhileIdle() { return connection }
        logger.notice("dropping a broken pooled connection (backend \(connection.backendPID))")
        handOff { $0.idleConnectionBroken(connection) }
        return try connect()
    }

    /// A new connection in a place already counted as open; on failure the place goes to the next in
    /// line (who tries for itself: the database may be back) or is given up.
    private func connect() throws -> PostgresConnection {
        do {
            return try PostgresConnection(url: url, options: options)
        } catch {
            handOff { $0.connectFailed() }
            throw error
        }
    }

    private func release(_ connection: PostgresConnection) {
        var healthy = connection.isHealthy
        if !healthy { logger.notice("discarding a connection that broke during use") }
        // A pipeline that opened a transaction and failed before its COMMIT leaves it open (and
        // aborted): the next borrower's statements would all fail, or join it.
        if healthy && connection.isInTransaction {
            healthy = (try? connection.execute("ROLLBACK")) != nil
        }
        handOff { $0.released(connection, healthy: healthy) }
    }

    /// Tells the machine under the lock; wakes and closes what it answers outside it.
    private func handOff(_ event: (inout Machine) -> Machine.Handoff) {
        // Only the waiter served is woken, by its own bell; a bell rung before its waiter sleeps
        // is seen by the waiter's first check.
        let (closing, bell) = state.withLock { s -> (PostgresConnection?, Waitable<Bool>?) in
            let handoff = event(&s.machine)
            return (handoff.close, handoff.wake.flatMap { s.bells[$0] })
        }
        bell?.change(wake: .one) { $0 = true }
        closing?.close()
    }
}

extension PostgresPool {
    /// Runs `statement` again after a deadlock or serialization failure, PostgreSQL's advice for a
    /// statement that is whole by itself, at most three times in all (a pin deleted while a worker
    /// writes its album's batch meets that batch in a deadlock; one of them is aborted).
    public func retryingConflicts<T>(_ statement: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try statement()
            } catch let error as PostgresError where attempt < 3 && [.deadlockDetected, .serializationFailure].contains(error.sqlState) {
                usleep(UInt32(20_000 * attempt))
                attempt += 1
            }
        }
    }
}
