#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import CEpoll
import Synchronization

/// One client connection's driver: it owns the socket and its place in an `EventLoop`, tells the
/// `ConnectionStateMachine` what happened, and performs the actions it answers with. Every rule
/// (ordering, keep-alive, 100 Continue, timeouts, shutdown) lives in the state machine.
///
/// Concurrency: every mutable property is touched only on `loop`'s thread (events, timers and the
/// jobs other threads hand in with `loop.execute`), which is why the class can be
/// `@unchecked Sendable`. Handlers run on the server's executor and hop back with their response.
final class Connection: EventLoopHandler, @unchecked Sendable {
    let id: Int
    let fd: Int32
    /// The peer's address (for the server's per-address count).
    let peer: String
    /// The loop this connection's events, timers and jobs run on, for its whole life.
    let loop: EventLoop
    /// Mirrors `machine.isIdleBetweenRequests` after every event, for the server to read from any
    /// thread when it needs room; `reclaim()` checks again on the loop.
    let reclaimable = Atomic<Bool>(false)
    private let server: HTTPServer

    private var machine: ConnectionStateMachine
    /// The loop's name for this connection's events, from `start` until closed.
    private var token: UInt64?
    /// What the loop watches the socket for: EPOLLIN unless the machine paused reading, EPOLLOUT
    /// while it waits for writability (`awaitingWritable`).
    private var interest: UInt32 = 0
    private var stream: ResponseStream?
    private var heartbeat: Int?
    /// An inline answer made while handling an event, reported from `resume` after it.
    private var inlineAnswer: HTTPResponse?

    init(id: Int, fd: Int32, remoteAddress: String, server: HTTPServer) {
        self.id = id
        self.fd = fd
        self.peer = remoteAddress
        self.server = server
        self.loop = EventLoop.next()
        self.machine = ConnectionStateMachine(settings: .init(server.configuration, remoteAddress: remoteAddress),
                                              now: .now)
    }

    /// From any thread: the loop starts watching the socket (unless it was closed before that).
    func start() {
        loop.execute { [self] in
            guard !machine.isClosed else { return }
            token = loop.register(self)
            watch(reading: true, writing: false)
        }
    }

    // MARK: Events

    func ready(_ events: UInt32) {
        let failed = events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
        if interest & EPOLLIN.rawValue != 0 && (events & EPOLLIN.rawValue != 0 || failed) { readable() }
        // A socket in error with only writes wanted: the send reports it (EPIPE, ECONNRESET).
        if interest & EPOLLOUT.rawValue != 0 && (events & EPOLLOUT.rawValue != 0 || failed) { flush() }
    }

    private func readable() {
        while !machine.isClosed {
            let n = withUnsafeTemporaryAllocation(byteCount: 65536, alignment: 16) { buffer -> Int in
                let n = read(fd, buffer.baseAddress, buffer.count)
                if n > 0 {
                    perform(machine.bytesRead(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), now: .now))
                }
                return n
            }
            if n > 0 {
                // A full buffer: more is likely waiting, unless the machine has enough for now.
                if n < 65536 || !machine.wantsMoreInput { return }
                continue
            }
            if n == 0 { return perform(machine.peerClosed(now: .now)) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return
            default: return perform(machine.socketFailed())
            }
        }
    }

    func resume() {
        guard let response = inlineAnswer else { return }
        inlineAnswer = nil
        perform(machine.responseReady(response, now: .now))
    }

    func streamWrite(_ bytes: [UInt8], handingOff count: Int = 0) {
        perform(machine.streamWrite(bytes, now: .now))
        if count > 0 { stream?.connectionHolds(unsent: machine.unsentCount, handedOff: count) }
    }

    func streamFinish() { perform(machine.streamFinished(now: .now)) }

    func checkTimeouts(now: ContinuousClock.Instant) {
        // Bytes waiting unread are a request arriving, not a silent client: read them before the
        // timer may call the connection one.
        if interest & EPOLLIN.rawValue != 0 && machine.closesUnreadOnTimer(now: now) { readable() }
        perform(machine.timerFired(now: now))
    }

    /// Server shutdown: finish the request in hand, close when idle.
    func drain() { perform(machine.shutdown(now: .now)) }

    func close() { perform(machine.forceClose()) }

    func reclaim() { perform(machine.reclaim()) }

    // MARK: Actions

    private func perform(_ actions: ConnectionActions) {
        defer { reclaimable.store(machine.isIdleBetweenRequests && !machine.isClosed, ordering: .relaxed) }
        if actions.reading != nil || actions.writable != nil {
            watch(reading: actions.reading.map { $0 == .resume } ?? (interest & EPOLLIN.rawValue != 0),
                  writing: actions.writable.map { $0 == .wait } ?? (interest & EPOLLOUT.rawValue != 0))
        }
        if let request = actions.handle { run(request) }
        if let start = actions.startStream { startStream(start) }
        if let interval = actions.heartbeat { startHeartbeat(every: interval) }
        if let record = actions.log { log(record) }
        if actions.close { return closeConnection() }
        if actions.send { flush() }
    }

    private func run(_ request: HTTPRequest) {
        server.noteForwardingHeaders(request, peer: peer)
        // An answer already in memory is made here, on the loop: a hop to a handler slot and back
        // cost more. It is reported once this event is handled (`resume`, the same thread),
        // not from here: sending it may start the next pipelined request, whose inline answer would
        // nest another level, as deep as a client cares to pipeline.
        if let response = server.respondInline(to: request) {
            inlineAnswer = response
            loop.later(self)
            return
        }
        let accepted = server.executor.submit { [self] in
            let response = server.respond(to: request)
            loop.execute { [self] in perform(machine.responseReady(response, now: .now)) }
        }
        if !accepted { perform(machine.handlerRefused(now: .now)) }
    }

    private func startStream(_ start: @escaping @Sendable (ResponseStream) -> Void) {
        let stream = ResponseStream(connection: self)
        self.stream = stream
        // The stream's writes hop onto the loop, so they arrive after the head queued below.
        let accepted = server.executor.submit { start(stream) }
        perform(accepted ? machine.streamStarted(now: .now) : machine.streamRefused(now: .now))
    }

    /// Sends what the kernel takes; the rest waits in the machine for EPOLLOUT.
    private func flush() {
        while machine.hasUnsentOutput {
            let n: Int
            if let file = machine.unsentFile {
                // The kernel copies from the page cache to the socket. SIGPIPE is ignored
                // process-wide (HTTPServer), so a vanished client is EPIPE here.
                var offset = off_t(file.offset)
                n = sendfile(fd, file.descriptor, &offset, min(file.count, 1 << 30))
                // 0: the file is shorter than when it was opened; the promised length cannot be kept.
                if n == 0 { return perform(machine.socketFailed()) }
            } else {
                // A head and its body in one gathering send (sendmsg, for MSG_NOSIGNAL); a head
                // before a file says MSG_MORE, so it leaves with the file's first bytes.
                let flags = Int32(MSG_NOSIGNAL) | (machine.fileFollows ? Int32(MSG_MORE) : 0)
                let fd = self.fd
                n = machine.unsentPieces.map { pieces in
                    pieces.first.withUnsafeBytes { whole -> Int in
                        let first = UnsafeRawBufferPointer(rebasing: whole[pieces.offset...])
                        if pieces.second.isEmpty { return Glibc.send(fd, first.baseAddress, first.count, flags) }
                        return pieces.second.withUnsafeBytes { second -> Int in
                            var iov = (iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
                                       iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count))
                            return withUnsafeMutableBytes(of: &iov) { raw in
                                var message = msghdr()
                                message.msg_iov = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
                                message.msg_iovlen = 2
                                return sendmsg(fd, &message, flags)
                            }
                        }
                    }
                } ?? 0
            }
            if n > 0 {
                perform(machine.sent(n, now: .now))
                stream?.connectionHolds(unsent: machine.unsentCount)
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return perform(machine.sendBlocked(now: .now))
            }
            // EPIPE, ECONNRESET: the client is gone.
            return perform(machine.socketFailed())
        }
    }

    /// Tells the loop what to watch the socket for.
    private func watch(reading: Bool, writing: Bool) {
        guard let token else { return }
        let wanted = (reading ? EPOLLIN.rawValue : 0) | (writing ? EPOLLOUT.rawValue : 0)
        loop.setInterest(fd, token: token, from: interest, to: wanted)
        interest = wanted
    }

    private func startHeartbeat(every beat: Duration) {
        heartbeat = loop.schedule(after: beat, repeating: true) { [unowned self] in
            perform(machine.heartbeatDue(now: .now))
        }
    }

    private func log(_ record: ResponseLogRecord) {
        guard let accessLog = server.configuration.accessLog else { return }
        let now = ContinuousClock.now
        let seconds = now > record.started ? (now - record.started) / .seconds(1) : 0
        accessLog(AccessLogEntry(method: record.method, path: server.configuration.loggedPath(record.path), status: record.status,
                                 bytes: record.bytes, seconds: seconds,
                                 remoteAddress: record.client.isEmpty ? machine.settings.remoteAddress : record.client))
    }

    // MARK: Closing

    /// Only once the loop has let go of the fd may it be closed (and its number reused).
    private func closeConnection() {
        if let heartbeat { loop.cancelTimer(heartbeat) }
        heartbeat = nil
        if let token {
            loop.setInterest(fd, token: token, from: interest, to: 0)
            loop.deregister(token)
        }
        token = nil
        interest = 0
        let stream = self.stream
        self.stream = nil
        _ = Glibc.close(fd)
        server.connectionClosed(self)
        stream?.connectionClosed()
    }
}
