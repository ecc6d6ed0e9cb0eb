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

/// An HTTP/1.1 server on non-blocking BSD sockets and epoll event loops (`EventLoop`).
///
/// A Dispatch read source watches the listening socket; each connection is driven by one of the
/// process's event loops (a thread per processor); connections cost a file descriptor and a few
/// KiB, never a thread. Handlers run on a `BoundedExecutor`, so a blocking
/// handler cannot stall socket I/O. The server knows nothing of the application above it.
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration
    let handler: any HTTPHandler
    let executor: BoundedExecutor
    private let acceptQueue = DispatchQueue(label: "http.accept", qos: .userInitiated)
    private let state: Mutex<State>
    /// Sent to a connection past its address's rate.
    private let rateRefusal: [UInt8]

    /// The admission rules (`AdmissionStateMachine`) and what the driver needs beside them.
    private struct State {
        var admission: AdmissionStateMachine
        var connections: [Int: Connection] = [:]
        var port = 0
        var listener: (any DispatchSourceRead)?
        var sweeper: (any DispatchSourceTimer)?
    }

    public init(configuration: ServerConfiguration = ServerConfiguration(), handler: any HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        self.state = Mutex(State(admission: AdmissionStateMachine(settings: .init(configuration))))
        self.rateRefusal = Self.rateRefusal(newConnectionsPerSecond: configuration.newConnectionsPerSecond)
        self.executor = BoundedExecutor(label: "http.handlers", width: configuration.handlerConcurrency,
                                        backlog: configuration.handlerBacklog)
    }

    /// The port bound by `start()` (useful with port 0).
    public var port: Int { state.withLock { $0.port } }

    public var openConnections: Int { state.withLock { $0.connections.count } }

    /// Connections accepted since start (fixtures count them to show connection reuse).
    public var acceptedConnections: Int { state.withLock { $0.admission.accepted } }

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
        // let go every 0.1 s, a few at a time, rather than all at once with their client's
        // reconnects back as one burst.
        let timeoutInterval = max(0.05, min(configuration.requestReadTimeout, configuration.idleTimeout,
                                            configuration.writeTimeout) / 4)
        let tick = min(0.1, timeoutInterval)
        let sweeper = DispatchSource.makeTimerSource(queue: acceptQueue)
        sweeper.schedule(deadline: .now() + tick, repeating: tick, leeway: .milliseconds(20))
        sweeper.setEventHandler { [weak self] in self?.sweep() }

        // Descriptors: the soft limit is raised to the hard one, as servers do, since maxConnections
        // alone is 4,096; held connections take at most a quarter.
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
            $0.admission.started(descriptorCap: descriptorCap,
                                 ticksPerTimeoutCheck: Int((timeoutInterval / tick).rounded()))
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
        let stopping = state.withLock { s -> (AdmissionStateMachine.Stop, [Connection], (any DispatchSourceRead)?, (any DispatchSourceTimer)?)? in
            guard let stop = s.admission.stop() else { return nil }
            defer { s.listener = nil; s.sweeper = nil }
            return (stop, Array(s.connections.values), s.listener, s.sweeper)
        }
        guard case let (stop, connections, listener?, sweeper)? = stopping else { return }
        stop.reset.forEach(Self.reset)
        if stop.resumeListener { listener.resume() }
        listener.cancel()
        sweeper?.cancel()
        for connection in connections { connection.loop.execute { connection.drain() } }

        let deadline = ContinuousClock.now + .seconds(max(0, grace))
        while openConnections > 0 && .now < deadline { usleep(5_000) }
        let stragglers = state.withLock { Array($0.connections.values) }
        if !stragglers.isEmpty {
            // Troubleshooting: still busy after
            serverLogger.warning("closing \(stragglers.count) connection(s) still busy after \(grace)s")
            for connection in stragglers { connection.loop.execute { connection.close() } }
            let hard = ContinuousClock.now + .seconds(1)
            while openConnections > 0 && .now < hard { usleep(5_000) }
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
                    // Troubleshooting: pausing 100ms
                    serverLogger.error("accept: \(String(cString: strerror(errno))); pausing 100ms")
                    pauseAccepting()
                    return
                default:
                    // Troubleshooting: accept: ERROR
                    serverLogger.error("accept: \(String(cString: strerror(errno)))")
                    return
                }
            }
            admit(fd, remote: Socket.address(of: storage))
        }
    }

    private func pauseAccepting() {
        let listener: (any DispatchSourceRead)? = state.withLock { $0.admission.outOfDescriptors() ? $0.listener : nil }
        guard let listener else { return }
        listener.suspend()
        acceptQueue.asyncAfter(deadline: .now() + 0.1) { [weak self] in
            guard let self, state.withLock({ $0.admission.resumeDue() }) else { return }
            listener.resume()
        }
    }

    private func admit(_ fd: Int32, remote: String) {
        enum Admitted { case serve(Connection, reclaiming: Connection?), refused(AdmissionStateMachine.Refusal) }
        let admitted = state.withLock { s -> Admitted in
            let arrival: AdmissionStateMachine.Arrival
            do {
                // A borrowed view of the table, gone before the table changes below (no copy).
                let connections = s.connections
                arrival = s.admission.arrived(fd: fd, from: remote, now: .now) { id in
                    connections[id]?.reclaimable.load(ordering: .relaxed) ?? false
                }
            }
            switch arrival {
            case .refuse(let refusal): return .refused(refusal)
            case .admit(let id, let reclaim):
                let connection = Connection(id: id, fd: fd, remoteAddress: remote, server: self)
                s.connections[id] = connection
                // Not picked twice: the flag is set again only by the connection's next event.
                let reclaimed = reclaim.flatMap { s.connections[$0] }
                reclaimed?.reclaimable.store(false, ordering: .relaxed)
                return .serve(connection, reclaiming: reclaimed)
            }
        }
        switch admitted {
        case .serve(let connection, let reclaimed):
            // Only now the socket is set up: a refusal costs no more syscalls than it must. accept4
            // is not exported to Swift by Glibc; two fcntls do the same.
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            Socket.setNoDelay(fd)
            if let reclaimed { reclaimed.loop.execute { reclaimed.reclaim() } }
            if configuration.connectionSetupDelay > 0 {
                acceptQueue.asyncAfter(deadline: .now() + configuration.connectionSetupDelay) { connection.start() }
            } else {
                connection.start()
            }
        case .refused(let refusal):
            refuse(fd, refusal)
            if let count = refusal.report { report(refusal.reason, count: count, latest: remote) }
        }
    }

    private func refuse(_ fd: Int32, _ refusal: AdmissionStateMachine.Refusal) {
        switch refusal.answer {
        case .busy:
            // Over capacity: say so and hang up; the connections already open keep being served.
            let busy = Array("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
            _ = busy.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            Glibc.shutdown(fd, Int32(SHUT_WR))
            Glibc.close(fd)
        case .pastRate:
            // A fresh socket's send buffer always takes the answer, so it costs one send. Sent
            // before the machine keeps the socket, so the sweep or shutdown never closes it under
            // the send (admit runs on the accept queue alone).
            _ = rateRefusal.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            Glibc.shutdown(fd, Int32(SHUT_WR))
            if !state.withLock({ $0.admission.answeredPastRate(fd: fd, now: .now) }) { Self.reset(fd) }
        case .held:
            break  // unread, a descriptor and no CPU, until the sweep resets it
        case .reset:
            Self.reset(fd)
        }
    }

    private func report(_ reason: AdmissionStateMachine.Refusal.Reason, count: Int, latest remote: String) {
        let port = port
        switch reason {
        // Troubleshooting: already open, none idle
        case .full: serverLogger.warning("port \(port) refused \(count) connection(s) in the last second (latest from \(remote)): \(configuration.maxConnections) already open, none idle")
        // Troubleshooting: already open from that address
        case .perAddress: serverLogger.warning("port \(port) refused \(count) connection(s) in the last second (latest from \(remote)): \(configuration.maxConnectionsPerAddress) already open from that address")
        case .rate:
            // Notice, not warning: each was told why (503, Retry-After); what the operator may have
            // to act on (an untrusted proxy) is its own warning, said once.
            serverLogger.notice("port \(port) answered \(count) connection(s) 503 in the last second (latest from \(remote)): more than \(Int(configuration.newConnectionsPerSecond)) new ones a second from that address (NEW_CONNECTIONS_PER_SECOND)")
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
        state.withLock { s in
            guard s.connections.removeValue(forKey: connection.id) != nil else { return }
            s.admission.closed(connection.id)
        }
    }

    /// Whether a forwarding header from an untrusted peer was logged (once per process).
    private let warnedAboutForwarding = Atomic<Bool>(false)

    /// Says once, at warning, that a peer not in TRUSTED_PROXIES sends X-Forwarded-For: the
    /// header is ignored, so everyone behind that peer counts as one address (one
    /// address's connections, rate and sign-in attempts for all of them). Nothing else would tell
    /// the operator why, under Compose, every visitor shares the bridge gateway's address.
    func noteForwardingHeaders(_ request: HTTPRequest, peer: String) {
        guard !warnedAboutForwarding.load(ordering: .relaxed) else { return }
        let header = "X-Forwarded-For"
        guard request.headers[header] != nil, !configuration.trustedProxies.trusts(peer),
              warnedAboutForwarding.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        // Troubleshooting: but is not a trusted proxy
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
    public var heldOverShare: Int { state.withLock { $0.admission.held.count } }

    /// Connections refused for their rate, answered and waiting for their client to hang up.
    public var answeredPastRate: Int { state.withLock { $0.admission.answered.count } }

    private func sweep() {
        // Under the lock, so shutdown never closes an answered connection while it is read
        // (non-blocking reads of a few bytes each: microseconds).
        var scratch = [UInt8](repeating: 0, count: 4096)
        let (sweep, connections) = state.withLock { s -> (AdmissionStateMachine.Sweep, [Connection]) in
            let sweep = s.admission.tick(now: .now) { fd in
                // At most 64 KiB a connection a tick: a client that keeps sending cannot keep the
                // lock (its time runs out all the same).
                for _ in 0..<16 {
                    let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n > 0 { continue }
                    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                }
                return false
            }
            return (sweep, sweep.checkTimeouts ? Array(s.connections.values) : [])
        }
        sweep.reset.forEach(Self.reset)
        for fd in sweep.close { Glibc.close(fd) }
        // One job per loop for all of its connections. The clock is read on the loop: a reading
        // taken before the hop can be older than a request that starts while the job waits, and
        // the connection would look idle for ages.
        for loop in EventLoop.shared {
            let theirs = connections.filter { $0.loop === loop }
            guard !theirs.isEmpty else { continue }
            loop.execute { for connection in theirs { connection.checkTimeouts(now: .now) } }
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
            // Troubleshooting: Something went wrong on our side
            serverLogger.error("\(request.method) \(configuration.loggedPath(request.path)): \(error)")
            return configuration.errorPage(.internalServerError, "Something went wrong on our side. Please try again.", request)
        }
    }

    /// The handler's inline answer (`HTTPHandler.respondInline`), or nil: then `respond` runs on
    /// the executor. An error is never answered here: rendering it may block (the app's error page
    /// looks up the session), so the executor runs the request again and answers it.
    func respondInline(to request: HTTPRequest) -> HTTPResponse? {
        try? handler.respondInline(request)
    }

    func errorResponse(_ error: any HTTPResponseError, request: HTTPRequest?) -> HTTPResponse {
        ConnectionStateMachine.errorResponse(error, request: request, errorPage: configuration.errorPage)
    }
}
