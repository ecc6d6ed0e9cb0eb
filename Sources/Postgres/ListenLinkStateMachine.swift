/// The LISTEN connection's states and rules, as a value: no libpq, no Dispatch, no clock. The driver
/// (`PostgresListener`) reports what happened — connected, the attempt failed, something arrived, the
/// health check answered, the connection broke, its timer fired at `now` — and performs the actions.
/// Times are `ContinuousClock` instants passed in, so backoff and deadlines are tested without sleeping.
///
/// Why a health check at all: a network that drops packets without a FIN (a NAT or firewall timing
/// out, a paused VM) leaves the socket open and silent, and a LISTEN connection never sends anything
/// that would fail. After `checkInterval` of silence a query is sent without waiting for it; if its
/// answer is not back by `checkDeadline`, the connection counts as lost.
struct ListenLinkStateMachine {
    typealias Instant = ContinuousClock.Instant

    struct Settings {
        var checkInterval: Duration = .seconds(15)
        var checkDeadline: Duration = .seconds(3)
        var firstBackoff: Duration = .milliseconds(100)
        /// Kept short: one connection per instance, and live pages stay quiet until it is back.
        var maxBackoff: Duration = .seconds(2)
    }

    enum State: Equatable {
        /// Not started yet.
        case idle
        /// A connection attempt is under way (off the listener's queue); `failures` before it.
        case connecting(failures: Int)
        /// Connected and LISTENing; nothing heard since `quietSince`.
        case listening(quietSince: Instant)
        /// A health check was sent; its answer is due by `deadline`.
        case checking(deadline: Instant)
        /// Waiting out the backoff before the next attempt.
        case reconnecting(failures: Int, at: Instant)
        case stopped
    }

    struct Actions: Equatable {
        /// Open a connection and LISTEN on every channel, without blocking the listener's queue;
        /// report `connected` or `connectFailed`.
        var connect = false
        /// Send the health check query without waiting; report `checkAnswered` when it returns.
        var sendCheck = false
        /// Close the current connection.
        var drop = false
        /// Run the reconnect handlers: notifications sent while the link was down are lost, so
        /// whoever listens must re-read what it shows.
        var announceReconnect = false
        /// When to call `timerFired` next (nil: no timer needed).
        var wakeAt: Instant?
    }

    let settings: Settings
    private(set) var state: State = .idle
    /// A connection was up before: the next one is a reconnect.
    private var everConnected = false

    init(settings: Settings = Settings()) {
        self.settings = settings
    }

    var isConnected: Bool {
        switch state {
        case .listening, .checking: return true
        default: return false
        }
    }

    mutating func start() -> Actions {
        guard state == .idle else { return Actions() }
        state = .connecting(failures: 0)
        return Actions(connect: true)
    }

    mutating func connected(now: Instant) -> Actions {
        guard case .connecting = state else {
            // Stopped while the attempt ran: the new connection is not wanted.
            return Actions(drop: true)
        }
        state = .listening(quietSince: now)
        defer { everConnected = true }
        return Actions(announceReconnect: everConnected, wakeAt: now + settings.checkInterval)
    }

    mutating func connectFailed(now: Instant) -> Actions {
        guard case .connecting(let failures) = state else { return Actions() }
        return retry(after: failures + 1, now: now)
    }

    /// A notification or any other message arrived: the link is alive.
    mutating func heard(now: Instant) -> Actions {
        guard case .listening = state else { return Actions() }
        state = .listening(quietSince: now)
        return Actions()
    }

    mutating func checkAnswered(now: Instant) -> Actions {
        guard case .checking = state else { return Actions() }
        state = .listening(quietSince: now)
        return Actions(wakeAt: now + settings.checkInterval)
    }

    /// EOF, a FATAL message, a failed health check or a send error.
    mutating func connectionLost(now: Instant) -> Actions {
        guard isConnected else { return Actions() }
        var actions = retry(after: 0, now: now)
        actions.drop = true
        return actions
    }

    mutating func timerFired(now: Instant) -> Actions {
        switch state {
        case .listening(let quietSince):
            let due = quietSince + settings.checkInterval
            guard now >= due else { return Actions(wakeAt: due) }
            let deadline = now + settings.checkDeadline
            state = .checking(deadline: deadline)
            return Actions(sendCheck: true, wakeAt: deadline)
        case .checking(let deadline):
            guard now >= deadline else { return Actions(wakeAt: deadline) }
            // A missed deadline is a lost connection.
            var actions = retry(after: 0, now: now)
            actions.drop = true
            return actions
        case .reconnecting(let failures, let at):
            guard now >= at else { return Actions(wakeAt: at) }
            state = .connecting(failures: failures)
            return Actions(connect: true)
        case .idle, .connecting, .stopped:
            return Actions()
        }
    }

    mutating func stop() -> Actions {
        let wasConnected = isConnected
        state = .stopped
        return Actions(drop: wasConnected)
    }

    /// Exponential backoff from `firstBackoff`, capped at `maxBackoff`; the first retry after a
    /// connection that was up comes quickly (a restarted server is usually back at once).
    private mutating func retry(after failures: Int, now: Instant) -> Actions {
        let delay = backoff(afterFailures: failures)
        state = .reconnecting(failures: failures, at: now + delay)
        return Actions(wakeAt: now + delay)
    }

    /// The delay before attempt number `failures + 1`, for tests and logs.
    func backoff(afterFailures failures: Int) -> Duration {
        min(settings.maxBackoff, settings.firstBackoff * (1 << min(failures, 20)))
    }
}
