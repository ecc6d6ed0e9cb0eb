@preconcurrency import Dispatch
import Foundation
import Log

/// LISTEN/NOTIFY on a dedicated connection whose socket a Dispatch read source watches, so waiting
/// for a notification costs no thread. When the connection drops, it reconnects with backoff and
/// LISTENs again; `onReconnect` handlers run then, since notifications sent meanwhile were lost
/// and subscribers should look for work they missed.
public final class PostgresListener: @unchecked Sendable {
    public typealias Handler = @Sendable (_ payload: String) -> Void

    private let url: String
    private let options: PostgresConnection.Options
    private let queue = DispatchQueue(label: "postgres.listener")
    private let logger = Logger(label: "postgres.listen")

    // Confined to `queue`.
    private var connection: PostgresConnection?
    private var source: (any DispatchSourceRead)?
    private var handlers: [String: [Handler]] = [:]
    private var reconnectHandlers: [@Sendable () -> Void] = []
    private var backoff = 0.1
    private var stopped = false
    private var generation = 0
    private var healthTimer: (any DispatchSourceTimer)?
    private let healthCheckInterval: Double

    public init(url: String, options: PostgresConnection.Options = .init(), healthCheckInterval: Double = 15) {
        self.url = url
        self.healthCheckInterval = healthCheckInterval
        var options = options
        options.applicationName += " listener"
        options.statementTimeoutMilliseconds = 0
        self.options = options
    }

    /// Connects now; throws when the database cannot be reached at all.
    public func start() throws {
        try queue.sync {
            try connect()
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + healthCheckInterval, repeating: healthCheckInterval)
            timer.setEventHandler { [weak self] in self?.checkHealth() }
            timer.resume()
            healthTimer = timer
        }
    }

    /// Subscribes to `channel`; the handler runs on the listener's queue, so it should be quick.
    public func listen(_ channel: String, _ handler: @escaping Handler) throws {
        try queue.sync {
            let first = handlers[channel] == nil
            handlers[channel, default: []].append(handler)
            if first, let connection {
                try connection.execute("LISTEN \(PostgresConnection.quoteIdentifier(channel))")
            }
        }
    }

    public func onReconnect(_ handler: @escaping @Sendable () -> Void) {
        queue.sync { reconnectHandlers.append(handler) }
    }

    /// Whether the LISTEN connection is up (for readiness checks).
    public var isConnected: Bool { queue.sync { connection?.isHealthy ?? false } }

    /// The listener connection's backend pid (tests terminate it to check the reconnect).
    public var backendPID: Int32 { queue.sync { connection?.backendPID ?? 0 } }

    public func stop() {
        queue.sync {
            stopped = true
            healthTimer?.cancel()
            healthTimer = nil
            dropConnection()
        }
    }

    private func connect() throws {
        let connection = try PostgresConnection(url: url, options: options)
        for channel in handlers.keys {
            try connection.execute("LISTEN \(PostgresConnection.quoteIdentifier(channel))")
        }
        self.connection = connection
        generation += 1
        let source = DispatchSource.makeReadSource(fileDescriptor: connection.socket, queue: queue)
        source.setEventHandler { [weak self] in self?.readable() }
        // PQfinish closes the socket: only after the source is cancelled (libdispatch #949).
        source.setCancelHandler { connection.close() }
        self.source = source
        source.resume()
        backoff = 0.1
    }

    private func readable() {
        guard let connection else { return }
        guard connection.consumeInput(), !connection.peerHasClosed() else {
            logger.warning("LISTEN connection lost; reconnecting")
            dropConnection()
            scheduleReconnect()
            return
        }
        deliverNotifications()
    }

    private func deliverNotifications() {
        while let n = connection?.nextNotification() {
            for handler in handlers[n.channel] ?? [] { handler(n.payload) }
        }
    }

    /// A cut network sends no FIN: a periodic round trip is the only way to notice it.
    private func checkHealth() {
        guard let connection, !stopped else { return }
        do {
            try connection.execute("SELECT 1")
            deliverNotifications()
        } catch {
            logger.warning("LISTEN connection failed its health check; reconnecting")
            dropConnection()
            scheduleReconnect()
        }
    }

    private func dropConnection() {
        source?.cancel()
        source = nil
        connection = nil
    }

    private func scheduleReconnect() {
        guard !stopped else { return }
        let delay = backoff
        backoff = min(backoff * 2, 5)
        queue.asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self, !self.stopped, self.connection == nil else { return }
            do {
                try self.connect()
                self.logger.notice("LISTEN connection restored")
                for handler in self.reconnectHandlers { handler() }
            } catch {
                self.logger.warning("LISTEN reconnect failed: \(error)")
                self.scheduleReconnect()
            }
        }
    }
}

extension PostgresPool {
    /// NOTIFY through a pooled connection; delivered when the surrounding transaction (if any) commits.
    public func notify(_ channel: String, payload: String = "") throws {
        try query("SELECT pg_notify($1, $2)", [channel, payload])
    }
}
