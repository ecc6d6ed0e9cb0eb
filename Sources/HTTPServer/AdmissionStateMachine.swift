/// Which new connections the server takes, and what happens to those it does not: every rule of
/// admission as a value, with no socket, no Dispatch and no clock. The driver (`HTTPServer`) reports
/// what happened — a connection arrived from an address at `now`, one closed, the sweep timer ticked,
/// accepting ran out of descriptors, the server stops — and performs the actions: set up or refuse a
/// socket, reset or close descriptors, pause or resume the listener, write a log line.
///
/// Rules, in the order they are applied to an arriving connection (a trusted proxy is exempt from the
/// per-address ones, and an IPv6 client's address is its /64):
/// 1. stopping: refused as busy;
/// 2. its address holds `maxConnectionsPerAddress`: held unread until its hold ends, then reset
///    (a reset when no hold is configured or the held ones are at their cap). A client that
///    reconnects when refused waits out the hold instead of looping, and a reset leaves no FIN
///    exchange and no TIME_WAIT behind;
/// 3. its address opened more than its rate (`ConnectionRates`): answered 503 with Retry-After, its
///    input drained until the client hangs up (a reset when the answered ones are at their cap). An
///    answer, not a reset: behind a reverse proxy that is not trusted, everyone shares the proxy's
///    address, and a 503 passes through the proxy as itself where a reset becomes a 502;
/// 4. the table is full: an idle keep-alive connection is reclaimed to make room, or it is refused
///    as busy (503, Retry-After: 1).
/// Refusals are counted and reported at most once a `refusalReportInterval`.
struct AdmissionStateMachine {
    typealias ConnectionID = Int

    struct Settings {
        var maxConnections = 4096
        var maxConnectionsPerAddress = 256
        var newConnectionsPerSecond: Double = 0
        var newConnectionBurst: Double = 1
        /// How long a connection over its address's share is held before its reset (0: reset at once).
        var overShareHold: Duration = .zero
        /// Held and answered connections each, at most (the driver lowers it to a quarter of the
        /// process's descriptors when it starts).
        var maxHeldOverShare = 4096
        /// How long a client answered 503 for its rate has to hang up before it is closed.
        var answeredLinger: Duration = .seconds(2)
        var refusalReportInterval: Duration = .seconds(1)
        var trustedProxies = TrustedProxies()
        var ipv6PrefixLength = 64
        /// A hold's share of `overShareHold`: half to one and a half, so connections refused together
        /// are not let go together (their client's reconnects would come back as one burst).
        var holdJitter: @Sendable () -> Double = { Double.random(in: 0.5...1.5) }

        init() {}

        init(_ configuration: ServerConfiguration) {
            maxConnections = configuration.maxConnections
            maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
            newConnectionsPerSecond = configuration.newConnectionsPerSecond
            newConnectionBurst = configuration.newConnectionBurst
            overShareHold = .seconds(max(0, configuration.overShareHold))
            maxHeldOverShare = configuration.maxHeldOverShare
            trustedProxies = configuration.trustedProxies
            ipv6PrefixLength = configuration.ipv6PrefixLength
        }
    }

    enum Lifecycle: Equatable {
        case accepting
        /// Out of descriptors: the listener is suspended until `resumeDue`.
        case paused
        /// Nothing new is admitted; held and answered connections were handed back for a reset.
        case stopping
    }

    /// What to do with an arriving connection.
    enum Arrival: Equatable {
        /// Set the socket up and start serving it; close `reclaim` (idle) to make room.
        case admit(ConnectionID, reclaim: ConnectionID?)
        case refuse(Refusal)
    }

    struct Refusal: Equatable {
        enum Reason: Equatable { case full, perAddress, rate }
        enum Answer: Equatable {
            /// 503 with Retry-After: 1, shut and close.
            case busy
            /// The rate's 503, shut for writing, then report `answeredPastRate`.
            case pastRate
            /// Kept unread by the machine; `tick` hands it back for a reset when its hold ends.
            case held
            /// Reset at once (SO_LINGER 0).
            case reset
        }
        let reason: Reason
        let answer: Answer
        /// Refusals since the last report, when a log line is due (at most one an interval).
        var report: Int?
    }

    /// What the sweep timer does on this tick.
    struct Sweep: Equatable {
        /// Held connections whose hold is over: reset them.
        var reset: [Int32] = []
        /// Answered connections whose client hung up or whose time is up: close them (a FIN).
        var close: [Int32] = []
        /// Check every connection's timeouts.
        var checkTimeouts = false
    }

    /// What shutdown does with the listener and the descriptors the machine kept.
    struct Stop: Equatable {
        /// The listener was suspended: resume it before cancelling it (Dispatch requires it).
        var resumeListener = false
        var reset: [Int32] = []
    }

    let settings: Settings
    private(set) var lifecycle: Lifecycle = .accepting
    /// Held and answered connections each, at most.
    private(set) var heldCap = 0
    /// Open connections and the address (limit key) each counts against.
    private var open: [ConnectionID: String] = [:]
    /// Open connections per limit key (maxConnectionsPerAddress).
    private var perAddress: [String: Int] = [:]
    private(set) var held: [(fd: Int32, until: ContinuousClock.Instant)] = []
    /// Answered 503 and shut for writing: what the client sent is read and dropped until it hangs up,
    /// so the close sends a FIN, never a reset that could destroy the 503 before the client reads it.
    private(set) var answered: [(fd: Int32, until: ContinuousClock.Instant)] = []
    private var rates: ConnectionRates
    private var nextID = 0
    private(set) var accepted = 0
    private var ticks = 0
    private var ticksPerTimeoutCheck = 1
    private var refusals = 0
    private var lastReport: ContinuousClock.Instant?

    init(settings: Settings) {
        self.settings = settings
        self.rates = ConnectionRates(rate: settings.newConnectionsPerSecond, burst: settings.newConnectionBurst)
    }

    var openConnections: Int { open.count }

    // MARK: Events

    /// The listener is up: `descriptorCap` is the share of the process's descriptors that held and
    /// answered connections may take each; the sweep checks timeouts every `ticksPerTimeoutCheck`.
    mutating func started(descriptorCap: Int, ticksPerTimeoutCheck: Int) {
        heldCap = min(settings.maxHeldOverShare, descriptorCap)
        self.ticksPerTimeoutCheck = max(1, ticksPerTimeoutCheck)
    }

    /// A connection was accepted on `fd` from `remote`. `isIdle` says whether an open connection is
    /// idle between requests (asked only when the table is full).
    mutating func arrived(fd: Int32, from remote: String, now: ContinuousClock.Instant,
                          isIdle: (ConnectionID) -> Bool) -> Arrival {
        let capped = !settings.trustedProxies.trusts(remote)
        let key = AddressRange.limitKey(remote, ipv6Prefix: settings.ipv6PrefixLength)
        guard lifecycle != .stopping else { return refuse(.full, .busy, now: now) }
        if capped, perAddress[key, default: 0] >= settings.maxConnectionsPerAddress {
            guard settings.overShareHold > .zero, held.count < heldCap else { return refuse(.perAddress, .reset, now: now) }
            held.append((fd, now + settings.overShareHold * settings.holdJitter()))
            return refuse(.perAddress, .held, now: now)
        }
        if capped, !rates.take(key, now: now) {
            return refuse(.rate, answered.count < heldCap ? .pastRate : .reset, now: now)
        }
        var reclaimed: ConnectionID?
        if open.count >= settings.maxConnections {
            // Room is made by an idle keep-alive connection, never by one at work.
            guard let idle = open.keys.first(where: isIdle) else { return refuse(.full, .busy, now: now) }
            reclaimed = idle
        }
        nextID += 1
        accepted += 1
        open[nextID] = key
        perAddress[key, default: 0] += 1
        return .admit(nextID, reclaim: reclaimed)
    }

    /// The rate's 503 was sent on `fd`: true if it now waits for its client to hang up, false if it
    /// is to be reset at once (the server began stopping meanwhile).
    mutating func answeredPastRate(fd: Int32, now: ContinuousClock.Instant) -> Bool {
        guard lifecycle != .stopping else { return false }
        answered.append((fd, now + settings.answeredLinger))
        return true
    }

    /// An admitted connection closed: its place and its address's share are free again.
    mutating func closed(_ id: ConnectionID) {
        guard let key = open.removeValue(forKey: id) else { return }
        if let n = perAddress[key] { perAddress[key] = n > 1 ? n - 1 : nil }
    }

    /// The sweep timer ticked. `hungUp` drains what an answered connection's client sent and says
    /// whether it has hung up (it is asked about every answered connection, due or not).
    mutating func tick(now: ContinuousClock.Instant, hungUp: (Int32) -> Bool) -> Sweep {
        var sweep = Sweep()
        held.removeAll { held in
            guard held.until <= now else { return false }
            sweep.reset.append(held.fd)
            return true
        }
        answered.removeAll { fd, until in
            let ended = hungUp(fd)
            guard ended || until <= now else { return false }
            sweep.close.append(fd)
            return true
        }
        ticks += 1
        if ticks % ticksPerTimeoutCheck == 0 {
            sweep.checkTimeouts = true
            rates.forgetRefilled(now: now)
        }
        return sweep
    }

    /// Accepting failed for lack of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM): true if the
    /// listener is to be suspended now and `resumeDue` reported after a pause.
    mutating func outOfDescriptors() -> Bool {
        guard lifecycle == .accepting else { return false }
        lifecycle = .paused
        return true
    }

    /// The pause is over: true if the listener is to be resumed.
    mutating func resumeDue() -> Bool {
        guard lifecycle == .paused else { return false }
        lifecycle = .accepting
        return true
    }

    /// The server stops: nothing new is admitted, and the connections held or answered are handed
    /// back for a reset. Nil when it was stopping already.
    mutating func stop() -> Stop? {
        guard lifecycle != .stopping else { return nil }
        let stop = Stop(resumeListener: lifecycle == .paused, reset: (held + answered).map(\.fd))
        lifecycle = .stopping
        held = []
        answered = []
        return stop
    }

    // MARK: Rules

    /// Counts a refusal; a report is due once an interval (a flood of refusals must not become a
    /// flood of log writes).
    private mutating func refuse(_ reason: Refusal.Reason, _ answer: Refusal.Answer, now: ContinuousClock.Instant) -> Arrival {
        refusals += 1
        var refusal = Refusal(reason: reason, answer: answer)
        if lastReport.map({ now - $0 >= settings.refusalReportInterval }) ?? true {
            refusal.report = refusals
            refusals = 0
            lastReport = now
        }
        return .refuse(refusal)
    }
}
