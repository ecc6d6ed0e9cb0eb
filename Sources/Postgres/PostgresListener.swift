@preconcurrency import Dispatch
import Foundation
import Log
import Synchronization

/// LISTEN/NOTIFY on a dedicated connection whose socket a Dispatch read source watches, so waiting
/// for a notification costs no thread. The rules (health check with a deadline, backoff, reconnect)
/// live in `ListenLinkStateMachine`; this class performs its actions.
///
/// Nothing here blocks the listener's queue on the network: connection attempts run on a queue of
/// their own (bounded by libpq's connect_timeout), the health check is sent without waiting, and TCP
/// keepalives are on (`PostgresConnection.Options`, as on every connection). After every reconnect
/// the `onReconnect` handlers run, since notifications sent meanwhile were lost and subscribers
/// should re-read what they show.
///
/// `@unchecked Sendable`: its `var`s are only touched on `queue`.
public final class PostgresListener: @unchecked Sendable {
    public typealias Handler = @Sendable (_ payload: String) -> Void

    private let url: String
    private let options: PostgresConnection.Options
    private let queue = DispatchQueue(label: "postgres.listener")
    private let connectQueue = DispatchQueue(label: "postgres.listener.connect")
    private let logger = Logger(label: "postgres.listen")

    // Confined to `queue`.
    private var machine: ListenLinkStateMachine
    private var connection: PostgresConnection?
    private var source: (any DispatchSourceRead)?
    private var timer: (any DispatchSourceTimer)?
    private var handlers: [String: [Handler]] = [:]
    private var reconnectHandlers: [@Sendable () -> Void] = []
    /// `isConnected`, refreshed on `queue` after every event: PhotoAccess asks on every photo
    /// request, and a `queue.sync` there cost each request a lock hand-off with this queue.
    private let connected = Atomic<Bool>(false)

    /// `healthCheckInterval`: silence before the link is checked; `healthCheckDeadline`: how long the
    /// check's answer may take before the connection counts as lost.
    public init(url: String, options: PostgresConnection.Options = .init(), healthCheckInterval: Duration = .seconds(15),
                healthCheckDeadline: Duration = .seconds(3), maxBackoff: Duration = .seconds(2)) {
        self.url = url
        var options = options
        options.applicationName += " listener"
        options.statementTimeoutMilliseconds = 0
        let deadline = healthCheckDeadline.components  // whole seconds, rounded up
        options.connectTimeoutSeconds = max(2, Int(clamping: deadline.seconds) + (deadline.attoseconds > 0 ? 1 : 0))
        self.options = options
        var settings = ListenLinkStateMachine.Settings()
        settings.checkInterval = healthCheckInterval
        settings.checkDeadline = healthCheckDeadline
        settings.maxBackoff = maxBackoff
        machine = ListenLinkStateMachine(settings: settings)
    }

    /// Connects now; throws when the database cannot be reached at all. Register channels with
    /// `listen` before or after.
    public func start() throws {
        try queue.sync {
            _ = machine.start()
            do {
                let connection = try openConnection(channels: Array(handlers.keys))
                perform(machine.connected(now: ContinuousClock.now), connection: connection)
            } catch {
                _ = machine.stop()
                throw error
            }
        }
    }

    /// Subscribes to `channel`; the handler runs on the listener's queue, so it should be quick.
    /// Meant for start-up: when connected, the LISTEN statement is sent and waited for.
    public func listen(_ channel: String, _ handler: @escaping Handler) throws {
        try queue.sync {
            let first = handlers[channel] == nil
            handlers[channel, default: []].append(handler)
            if first, let connection, machine.isConnected {
                try connection.execute(Self.listenStatement(channel))
            }
        }
    }

    public func onReconnect(_ handler: @escaping @Sendable () -> Void) {
        queue.sync { reconnectHandlers.append(handler) }
    }

    /// Whether the LISTEN connection is up (for readiness checks).
    public var isConnected: Bool { connected.load(ordering: .acquiring) }

    /// Called on `queue` once an event is handled (the machine's state and libpq's are both
    /// changed only there).
    private func refreshConnected() {
        connected.store(machine.isConnected && (connection?.isHealthy ?? false), ordering: .releasing)
    }

    /// The link's state, for logs and tests.
    var state: ListenLinkStateMachine.State { queue.sync { machine.state } }

    /// The listener connection's backend pid (tests terminate it to check the reconnect).
    public var backendPID: Int32 { queue.sync { connection?.backendPID ?? 0 } }

    public func stop() {
        queue.sync {
            perform(machine.stop())
            timer?.cancel()
            timer = nil
        }
    }

    // MARK: Actions

    private func perform(_ actions: ListenLinkStateMachine.Actions, connection new: PostgresConnection? = nil) {
        defer { refreshConnected() }
        if actions.drop {
            if let new { new.close() } else { dropConnection() }
        } else if let new {
            adopt(new)
        }
        if actions.connect { connectInBackground() }
        if actions.sendCheck {
            if connection?.sendQuery("SELECT 1") != true {
                // Troubleshooting: could not send its health check
                logger.warning("LISTEN connection could not send its health check; reconnecting")
                perform(machine.connectionLost(now: ContinuousClock.now))
            }
        }
        if actions.announceReconnect {
            logger.notice("LISTEN connection restored")
            for handler in reconnectHandlers { handler() }
        }
        if let wakeAt = actions.wakeAt { schedule(at: wakeAt) }
    }

    private func adopt(_ connection: PostgresConnection) {
        self.connection = connection
        let source = DispatchSource.makeReadSource(fileDescriptor: connection.socket, queue: queue)
        source.setEventHandler { [weak self] in self?.readable() }
        // PQfinish closes the socket: only after the source is cancelled (libdispatch #949).
        source.setCancelHandler { connection.close() }
        self.source = source
        source.resume()
    }

    private func dropConnection() {
        source?.cancel()
        source = nil
        connection = nil
    }

    /// Connects off the listener's queue, so a network that swallows packets stalls only the attempt
    /// (bounded by connect_timeout), never the notifications, `stop` or `isConnected`.
    private func connectInBackground() {
        let channels = Array(handlers.keys)
        connectQueue.async { [weak self] in
            guard let self else { return }
            let result = Result { try self.openConnection(channels: channels) }
            self.queue.async {
                switch result {
                case .success(let connection):
                    self.perform(self.machine.connected(now: ContinuousClock.now), connection: connection)
                case .failure(let error):
                    // Troubleshooting: LISTEN reconnect failed
                    self.logger.warning("LISTEN reconnect failed: \(error)")
                    self.perform(self.machine.connectFailed(now: ContinuousClock.now))
                }
            }
        }
    }

    private func openConnection(channels: [String]) throws -> PostgresConnection {
        let connection = try PostgresConnection(url: url, options: options)
        for channel in channels { try connection.execute(Self.listenStatement(channel)) }
        return connection
    }

    private static func listenStatement(_ channel: String) -> String {
        "LISTEN \(PostgresConnection.quoteIdentifier(channel))"
    }

    private func schedule(at deadline: ContinuousClock.Instant) {
        if timer == nil {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                self.perform(self.machine.timerFired(now: ContinuousClock.now))
            }
            timer.resume()
            self.timer = timer
        }
        let delay = max(.zero, deadline - .now).components
        // At most a day away: the machine's waits are seconds, and a day cannot overflow.
        let nanoseconds = Int(min(delay.seconds, 86_400)) * 1_000_000_000 + Int(delay.attoseconds / 1_000_000_000)
        timer?.schedule(deadline: .now() + .nanoseconds(nanoseconds), leeway: .milliseconds(20))
    }

    // MARK: Events

    private func readable() {
        defer { refreshConnected() }
        guard let connection else { return }
        let now = ContinuousClock.now
        guard connection.consumeInput(), !connection.peerHasClosed() else {
            // Troubleshooting: LISTEN connection lost
            logger.warning("LISTEN connection lost; reconnecting")
            return perform(machine.connectionLost(now: now))
        }
        if case .checking = machine.state {
            switch connection.pollResult() {
            case nil: break
            case true?: perform(machine.checkAnswered(now: now))
            case false?:
                // Troubleshooting: failed its health check
                logger.warning("LISTEN connection failed its health check; reconnecting")
                return perform(machine.connectionLost(now: now))
            }
        }
        var heard = false
        while let n = self.connection?.nextNotification() {
            heard = true
            for handler in handlers[n.channel] ?? [] { handler(n.payload) }
        }
        if heard { perform(machine.heard(now: now)) }
    }
}

extension PostgresPool {
    /// NOTIFY through a pooled connection; delivered when the surrounding transaction (if any) commits.
    public func notify(_ channel: String, payload: String = "") throws {
        try query("SELECT pg_notify($1, $2)", [channel, payload])
    }
}
