#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
@preconcurrency import Dispatch
import Log
import Synchronization

let accessLogger = Logger(label: "http")
let serverLogger = Logger(label: "server")

/// An HTTP/1.1 server on non-blocking BSD sockets and Dispatch.
///
/// One read source watches the listening socket and one each connection; connections cost a file
/// descriptor and a few KiB, never a thread. Handlers run on a `BoundedExecutor`, so a blocking
/// handler cannot stall socket I/O. The server knows nothing of the application above it.
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration
    let handler: any HTTPHandler
    let executor: BoundedExecutor
    let ioQueue = DispatchQueue(label: "http.io", qos: .userInitiated, attributes: .concurrent)
    private let acceptQueue = DispatchQueue(label: "http.accept", qos: .userInitiated)
    private let state: Mutex<State>
    /// Sent to a connection past its address's rate.
    private let rateRefusal: [UInt8]

    private struct State {
        var listenFD: Int32 = -1
        var port = 0
        var listener: (any DispatchSourceRead)?
        var sweeper: (any DispatchSourceTimer)?
        var connections: [Int: Connection] = [:]
        /// Open connections per peer address (maxConnectionsPerAddress).
        var perAddress: [String: Int] = [:]
        /// Connections over their address's share, held unread until their deadline (see
        /// ServerConfiguration.overShareHold).
        var held: [(fd: Int32, until: UInt64)] = []
        /// Connections refused for their address's rate, answered 503 and shut for writing: what
        /// the client sent is read and dropped until it hangs up (or the deadline), so the close
        /// sends a FIN, never a reset that could destroy the 503 before the client reads it.
        var answered: [(fd: Int32, until: UInt64)] = []
        /// maxHeldOverShare, and never more than a quarter of the process's descriptors.
        var heldCap = 0
        var nextID = 0
        var accepted = 0
        /// Ticks of the sweep timer so far.
        var sweeps = 0
        var connectionRates: ConnectionRates
        var stopping = false
        var acceptPaused = false
    }

    public init(configuration: ServerConfiguration = ServerConfiguration(), handler: any HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        self.state = Mutex(State(connectionRates: ConnectionRates(rate: configuration.newConnectionsPerSecond,
                                                                  burst: configuration.newConnectionBurst)))
        self.rateRefusal = Self.rateRefusal(newConnectionsPerSecond: configuration.newConnectionsPerSecond)
        self.executor = BoundedExecutor(label: "http.handlers", width: configuration.handlerConcurrency,
                                        backlog: configuration.handlerBacklog)
    }

    /// The port bound by `start()` (useful with port 0).
    public var port: Int { state.withLock { $0.port } }

    public var openConnections: Int { state.withLock { $0.connections.count } }

    /// Connections accepted since start (fixtures count them to show connection reuse).
    public var acceptedConnections: Int { state.withLock { $0.accepted } }

    /// Binds and starts accepting. Returns at once; the server runs on Dispatch.
    public func start() throws {
        // A peer that hangs up mid-response must cost an EPIPE, not the process (sends also use
        // MSG_NOSIGNAL; this covers anything else that writes to a socket).
        signal(SIGPIPE, SIG_IGN)
        let (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port,
                                           backlog: configuration.listenBacklog)
        let listener = DispatchSource.makeReadSource(fileDescriptor: fd, queue: acceptQueue)
        listener.setEventHandler { [weak self] in self?.acceptAll(fd) }
        // libdispatch #949: the fd may only be closed once its source is cancelled.
        listener.setCancelHandler { _ = Glibc.close(fd) }

        // Connections' timeouts are checked every quarter of the shortest; held connections are
        // let go every 0.1 s, a few at a time, rather than ~900 at once with a 2.5 s sweep and
        // their client's reconnects back as one burst. (In script/bench abuse this alone did not
        // measurably lower the idle attack's p99; the new-connection rate did.)
        let timeoutInterval = max(0.05, min(configuration.requestReadTimeout, configuration.idleTimeout,
                                            configuration.writeTimeout) / 4)
        let tick = min(0.1, timeoutInterval)
        let sweeper = DispatchSource.makeTimerSource(queue: acceptQueue)
        sweeper.schedule(deadline: .now() + tick, repeating: tick, leeway: .milliseconds(20))
        let ticksPerTimeoutCheck = max(1, Int((timeoutInterval / tick).rounded()))
        sweeper.setEventHandler { [weak self] in
            guard let self else { return }
            let ticks = state.withLock { s -> Int in s.sweeps += 1; return s.sweeps }
            sweep(checkTimeouts: ticks % ticksPerTimeoutCheck == 0)
        }

        // Descriptors: the soft limit is raised to the hard one (often 1,024 against 524,288), as
        // servers do, since maxConnections alone is 4,096; held connections take at most a quarter.
        var descriptors = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var descriptorCap = 0
        if getrlimit(resource, &descriptors) == 0 {
            if descriptors.rlim_cur < descriptors.rlim_max {
                var raised = descriptors
                raised.rlim_cur = min(descriptors.rlim_max, 1 << 20)
                if setrlimit(resource, &raised) == 0 { descriptors = raised }
            }
            descriptorCap = Int(min(descriptors.rlim_cur, 1 << 30)) / 4
        }
        state.withLock {
            $0.heldCap = min(configuration.maxHeldOverShare, descriptorCap)
            $0.listenFD = fd
            $0.port = port
            $0.listener = listener
            $0.sweeper = sweeper
        }
        listener.resume()
        sweeper.resume()
        serverLogger.notice("listening on http://\(configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host):\(port)")
    }

    /// Stops accepting, lets in-flight requests finish (their responses say Connection: close),
    /// closes idle connections, and returns once all are closed or the grace period has passed.
    public func shutdown(gracePeriod: Double? = nil) {
        let grace = gracePeriod ?? configuration.shutdownGracePeriod
        let (listener, sweeper, connections) = state.withLock { s -> ((any DispatchSourceRead)?, (any DispatchSourceTimer)?, [Connection]) in
            guard !s.stopping else { return (nil, nil, []) }
            s.stopping = true
            let taken = (s.listener, s.sweeper, Array(s.connections.values))
            s.listener = nil
            s.sweeper = nil
            return taken
        }
        guard let listener else { return }
        let held = state.withLock { s -> [Int32] in defer { s.held = []; s.answered = [] }; return (s.held + s.answered).map(\.fd) }
        held.forEach(Self.reset)
        if state.withLock({ $0.acceptPaused }) { listener.resume() }
        listener.cancel()
        sweeper?.cancel()
        for connection in connections { connection.queue.async { connection.drain() } }

        let deadline = monotonicNanos() + UInt64(grace * 1e9)
        while openConnections > 0 && monotonicNanos() < deadline { usleep(5_000) }
        let stragglers = state.withLock { Array($0.connections.values) }
        if !stragglers.isEmpty {
            serverLogger.warning("closing \(stragglers.count) connection(s) still busy after \(grace)s")
            for connection in stragglers { connection.queue.async { connection.close() } }
            let hard = monotonicNanos() + 1_000_000_000
            while openConnections > 0 && monotonicNanos() < hard { usleep(5_000) }
        }
        serverLogger.notice("stopped")
    }

    // MARK: Accepting

    private func acceptAll(_ listenFD: Int32) {
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listenFD, $0, &len)
                }
            }
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EAGAIN, EWOULDBLOCK: return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: the pending connection stays queued in the kernel. Pause
                    // accepting briefly instead of spinning on a level-triggered source.
                    serverLogger.error("accept: \(String(cString: strerror(errno))); pausing 100ms")
                    pauseAccepting()
                    return
                default:
                    serverLogger.error("accept: \(String(cString: strerror(errno)))")
                    return
                }
            }
            admit(fd, remote: Socket.address(of: storage))
        }
    }

    private func pauseAccepting() {
        let listener: (any DispatchSourceRead)? = state.withLock {
            guard !$0.stopping, !$0.acceptPaused else { return nil }
            $0.acceptPaused = true
            return $0.listener
        }
        guard let listener else { return }
        listener.suspend()
        acceptQueue.asyncAfter(deadline: .now() + 0.1) { [weak self] in
            guard let self else { return }
            let resume = self.state.withLock { s -> Bool in
                guard s.acceptPaused, !s.stopping else { return false }
                s.acceptPaused = false
                return true
            }
            if resume { listener.resume() }
        }
    }

    /// Refused connections since the last log line about them (see `admit`).
    private let refusals = Mutex<(since: UInt64, count: Int)>((since: 0, count: 0))

    private func admit(_ fd: Int32, remote: String) {
        enum Refusal: Error { case full, perAddress, rate }
        let capped = !configuration.trustedProxies.trusts(remote)
        // An IPv6 client holds a whole /64 (or more): its limits are its network's.
        let key = AddressRange.limitKey(remote, ipv6Prefix: configuration.ipv6PrefixLength)
        let admitted: Result<(Connection, reclaimed: Connection?), Refusal> = state.withLock { s in
            guard !s.stopping else { return .failure(.full) }
            if capped, s.perAddress[key, default: 0] >= configuration.maxConnectionsPerAddress { return .failure(.perAddress) }
            if capped, !s.connectionRates.take(key, now: monotonicNanos()) { return .failure(.rate) }
            var reclaimed: Connection?
            if s.connections.count >= configuration.maxConnections {
                // Room is made by an idle keep-alive connection, never by one at work.
                guard let idle = s.connections.values.first(where: { $0.reclaimable.load(ordering: .relaxed) }) else {
                    return .failure(.full)
                }
                idle.reclaimable.store(false, ordering: .relaxed)
                reclaimed = idle
            }
            s.nextID += 1
            s.accepted += 1
            let c = Connection(id: s.nextID, fd: fd, remoteAddress: remote, server: self)
            s.connections[c.id] = c
            s.perAddress[key, default: 0] += 1
            return .success((c, reclaimed))
        }
        let connection: Connection
        switch admitted {
        case .success(let (c, reclaimed)):
            connection = c
            // Only now the socket is set up (a refusal costs no more syscalls than it must: one
            // address flooding connects made these a third of the server's time). accept4 is not
            // exported to Swift by Glibc; two fcntls do the same.
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            Socket.setNoDelay(fd)
            if let reclaimed { reclaimed.queue.async { reclaimed.reclaim() } }
        case .failure(let refusal):
            switch refusal {
            case .full:
                // Over capacity: say so and hang up; the connections already open keep being served.
                let busy = Array("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                _ = busy.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                Glibc.shutdown(fd, Int32(SHUT_WR))
                Glibc.close(fd)
            case .rate:
                // Past its rate an address is told so: 503 with Retry-After, written at once (a
                // fresh socket's send buffer always takes it, so it costs one send), then the
                // socket is shut for writing and what the client sent is drained until it hangs
                // up (`answered`, swept every 0.1 s). Behind a reverse proxy nobody configured as
                // trusted, the proxy is "one address" for everyone, and a silent hold and reset
                // became 502s for every visitor with nothing to say why; a 503 passes through the
                // proxy as itself. Past the cap of such connections, a reset as before.
                // Sent before the socket joins `answered`, so the sweep or shutdown never closes
                // it under the send (admit runs on the accept queue alone: the room stays).
                let room = state.withLock { s in !s.stopping && s.answered.count < s.heldCap }
                var kept = false
                if room {
                    _ = rateRefusal.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                    Glibc.shutdown(fd, Int32(SHUT_WR))
                    kept = state.withLock { s in
                        guard !s.stopping else { return false }
                        s.answered.append((fd, monotonicNanos() + 2_000_000_000))
                        return true
                    }
                }
                if !kept { Self.reset(fd) }
            case .perAddress:
                // One address past its share is refusing itself. Held first, unread (nothing is
                // registered for it: a descriptor and no CPU), so a client that reconnects when
                // refused waits out the hold instead of looping; then a reset. A reset, not an
                // answer: no FIN exchange, no TIME_WAIT left behind; under a connect flood the polite
                // 503 and close cost the server most of a core.
                let held: Bool = configuration.overShareHold > 0 && state.withLock { s in
                    guard !s.stopping, s.held.count < s.heldCap else { return false }
                    // Half to one and a half holds: connections refused together are not let go
                    // together, or their client's reconnects would come back as one burst.
                    let hold = configuration.overShareHold * Double.random(in: 0.5...1.5)
                    s.held.append((fd, monotonicNanos() + UInt64(hold * 1e9)))
                    return true
                }
                if !held { Self.reset(fd) }
            }
            // One line a second at most: a flood of refusals must not become a flood of log writes
            // (one per refusal was most of what refusing cost).
            let report: Int? = refusals.withLock { r in
                r.count += 1
                let now = monotonicNanos()
                guard now - r.since >= 1_000_000_000 else { return nil }
                defer { r = (since: now, count: 0) }
                return r.count
            }
            if let report {
                let port = port
                switch refusal {
                case .full: serverLogger.warning("port \(port) refused \(report) connection(s) in the last second (latest from \(remote)): \(configuration.maxConnections) already open, none idle")
                case .perAddress: serverLogger.warning("port \(port) refused \(report) connection(s) in the last second (latest from \(remote)): \(configuration.maxConnectionsPerAddress) already open from that address")
                case .rate:
                    // Notice, not warning: each was told why (503, Retry-After); what the operator
                    // may have to act on (an untrusted proxy) is its own warning, said once.
                    serverLogger.notice("port \(port) answered \(report) connection(s) 503 in the last second (latest from \(remote)): more than \(Int(configuration.newConnectionsPerSecond)) new ones a second from that address (NEW_CONNECTIONS_PER_SECOND)")
                }
            }
            return
        }
        if configuration.connectionSetupDelay > 0 {
            acceptQueue.asyncAfter(deadline: .now() + configuration.connectionSetupDelay) { connection.start() }
        } else {
            connection.start()
        }
    }

    /// The answer to a connection past its address's rate (see `admit`): as many seconds as one
    /// new connection's token takes to come back, at least one.
    static func rateRefusal(newConnectionsPerSecond rate: Double) -> [UInt8] {
        let wait = rate > 0 ? max(1, Int(min(3600, (1 / rate).rounded(.up)))) : 1
        let body = "Too many new connections from your address. Try again in \(wait) second\(wait == 1 ? "" : "s").\n"
        return Array(("HTTP/1.1 503 Service Unavailable\r\nRetry-After: \(wait)\r\nContent-Type: text/plain; charset=utf-8\r\n" +
                      "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body).utf8)
    }

    func connectionClosed(_ connection: Connection) {
        let key = AddressRange.limitKey(connection.peer, ipv6Prefix: configuration.ipv6PrefixLength)
        state.withLock { s in
            guard s.connections.removeValue(forKey: connection.id) != nil else { return }
            if let n = s.perAddress[key] { s.perAddress[key] = n > 1 ? n - 1 : nil }
        }
    }

    /// Whether a forwarding header from an untrusted peer was logged (once per process).
    private let warnedAboutForwarding = Atomic<Bool>(false)

    /// Says once, at warning, that a peer not in TRUSTED_PROXIES sends X-Forwarded-For or
    /// Forwarded: the header is ignored, so everyone behind that peer counts as one address (one
    /// address's connections, rate and sign-in attempts for all of them). Nothing else would tell
    /// the operator why, under Compose, every visitor shares the bridge gateway's address.
    func noteForwardingHeaders(_ request: HTTPRequest, peer: String) {
        guard !warnedAboutForwarding.load(ordering: .relaxed) else { return }
        let header = request.headers["X-Forwarded-For"] != nil ? "X-Forwarded-For" : request.headers["Forwarded"] != nil ? "Forwarded" : nil
        guard let header, !configuration.trustedProxies.trusts(peer),
              warnedAboutForwarding.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        serverLogger.warning("""
            port \(port): \(peer) sent \(header) but is not a trusted proxy, so the header is ignored and every client \
            behind it counts as \(peer) (one address's connections, connection rate and sign-in attempts for all of them). \
            If it is your reverse proxy, set TRUSTED_PROXIES=\(peer) (or its network, e.g. 172.16.0.0/12 for Docker's \
            bridge networks). Said once.
            """)
    }

    /// Closes a socket with a reset (SO_LINGER 0): no FIN exchange, no TIME_WAIT.
    private static func reset(_ fd: Int32) {
        var hard = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(fd)
    }

    /// Connections held over their address's share right now.
    public var heldOverShare: Int { state.withLock { $0.held.count } }

    /// Connections refused for their rate, answered and waiting for their client to hang up.
    public var answeredPastRate: Int { state.withLock { $0.answered.count } }

    private func sweep(checkTimeouts: Bool) {
        // Held connections whose time is up (shutdown resets the rest itself).
        let now = monotonicNanos()
        var expired: [Int32] = []
        var finished: [Int32] = []
        state.withLock { s in
            s.held.removeAll { held in
                guard held.until <= now else { return false }
                expired.append(held.fd)
                return true
            }
            // Connections answered 503: drop what they sent; close once the client has hung up
            // (or its time is up), so nothing unread is left at the close and it sends a FIN, not
            // a reset. Under the lock, so shutdown never closes one of these while it is read
            // (non-blocking reads of a few bytes each: microseconds).
            guard !s.answered.isEmpty else { return }
            var scratch = [UInt8](repeating: 0, count: 4096)
            s.answered.removeAll { fd, until in
                var ended = false
                // At most 64 KiB a connection a tick: a client that keeps sending cannot keep the
                // lock (its time runs out all the same).
                for _ in 0..<16 {
                    let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n > 0 { continue }
                    ended = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    break
                }
                guard ended || until <= now else { return false }
                finished.append(fd)
                return true
            }
        }
        expired.forEach(Self.reset)
        for fd in finished { Glibc.close(fd) }
        guard checkTimeouts else { return }
        let connections = state.withLock { s in
            s.connectionRates.forgetRefilled(now: now)
            return Array(s.connections.values)
        }
        for connection in connections {
            // Read the clock on the connection's queue: a reading taken before the hop can be older
            // than a request that starts while the block waits, and the connection would look idle
            // for ages.
            connection.queue.async { connection.checkTimeouts(now: monotonicNanos()) }
        }
    }

    // MARK: Handling

    /// Runs the handler for one request; never throws, so every request gets an answer.
    func respond(to request: HTTPRequest) -> HTTPResponse {
        do {
            return try handler.handle(request)
        } catch let error as any HTTPResponseError {
            return errorResponse(error, request: request)
        } catch {
            serverLogger.error("\(request.method) \(request.path): \(error)")
            return configuration.errorPage(.internalServerError, "Something went wrong on our side. Please try again.", request)
        }
    }

    func errorResponse(_ error: any HTTPResponseError, request: HTTPRequest?) -> HTTPResponse {
        ConnectionStateMachine.errorResponse(error, request: request, errorPage: configuration.errorPage)
    }
}
