import WebText

/// One HTTP/1.1 connection's state and every rule about it, as a value: no socket, no Dispatch, no
/// clock. The driver (`Connection`) reports what happened — bytes read, bytes sent, a response ready,
/// a stream started or refused, the peer's EOF, a timer at time `now`, shutdown — and performs the
/// `ConnectionActions` that come back. Times are instants passed in by the caller, so every timeout
/// is tested without sleeping (Tests/HTTPServerTests/ConnectionStateMachineTests).
///
/// The shape follows what PostgresNIO's ConnectionStateMachine and SwiftNIO's
/// HTTPServerPipelineHandler do for their protocols: one enum per independent axis, one mutating
/// method per event, and the answer as data. Three axes are independent here and each is an enum:
/// `answering` (what is owed to the client), `input` (whether and why reading stopped) and
/// `lifecycle` (serving, or draining for shutdown). The rest is bookkeeping that belongs to them: the
/// parser, requests parsed ahead, output not yet sent, and the instants the timeouts are measured from.
///
/// Rules (RFC 9112 §9.3.2): responses leave in request order, so one request is answered at a time and
/// later pipelined ones wait parsed in `pending`; at most `maxPending` wait before reading pauses.
struct ConnectionStateMachine {
    struct Settings {
        var limits = HTTPLimits()
        var requestReadTimeout: Duration = .seconds(10)
        var idleTimeout: Duration = .seconds(60)
        var writeTimeout: Duration = .seconds(30)
        /// The slowest a client may take what it was sent while a response waits on it: below
        /// `minimumSendRate` bytes a second over `sendRateWindow`, it is cut. The write timeout
        /// alone would let a client that reads a few bytes now and then hold a download slot for
        /// ever.
        var minimumSendRate = 16 * 1024
        var sendRateWindow: Duration = .seconds(30)
        /// Pipelined requests parsed ahead of the one being answered, before reading pauses.
        var maxPending = 16
        /// A stream's unsent bytes past which its client is taken to have stopped reading.
        var maxStreamBacklog = 1024 * 1024
        var maxStreamLifetime: Duration = .seconds(600)
        var remoteAddress = ""
        var trustedProxies = TrustedProxies()
        var ipv6PrefixLength = 64
        var errorPage: ErrorPageRenderer = DefaultErrorPage.render
        /// The Date header's text (RFC 9110 §6.6.1); the driver passes `HTTPDate.now`, tests a constant.
        var date: @Sendable () -> String = { HTTPDate.now }

        init() {}

        init(_ configuration: ServerConfiguration, remoteAddress: String) {
            limits = configuration.limits
            requestReadTimeout = Self.duration(configuration.requestReadTimeout)
            idleTimeout = Self.duration(configuration.idleTimeout)
            writeTimeout = Self.duration(configuration.writeTimeout)
            minimumSendRate = max(0, configuration.minimumSendRate)
            sendRateWindow = Self.duration(configuration.sendRateWindow)
            maxStreamLifetime = Self.duration(configuration.maxStreamLifetime)
            errorPage = configuration.errorPage
            self.remoteAddress = remoteAddress
            trustedProxies = configuration.trustedProxies
            ipv6PrefixLength = configuration.ipv6PrefixLength
        }

        static func duration(_ seconds: Double) -> Duration { .seconds(max(0, seconds)) }
    }

    /// The request being answered: what its response needs to know.
    struct Exchange {
        let method: String
        let path: String
        let version: HTTPVersion
        let keepAlive: Bool
        let started: ContinuousClock.Instant
        /// The client as the access log names it (behind a trusted proxy, not the proxy).
        var client = ""
        var isHead: Bool { method == "HEAD" }
    }

    /// What is owed to the client.
    enum Answering {
        /// No handler runs and no stream owns the connection: the next request starts once the
        /// output is flushed.
        case idle
        /// A handler runs for this request; `responseReady` or `handlerRefused` comes next.
        case handling(Exchange)
        /// The handler answered with a stream; the driver asks the executor for a slot and reports
        /// `streamStarted` or `streamRefused`. The head waits here so a refusal can still say 503.
        case startingStream(Exchange, head: [UInt8], status: Int, heartbeat: Duration?)
        /// A stream (Server-Sent Events) owns the connection until either side ends it; `since` bounds
        /// its lifetime.
        case streaming(heartbeat: Duration?, since: ContinuousClock.Instant)
        /// The last response is queued: close once it is sent.
        case closingAfterFlush
        case closed
    }

    /// Whether bytes are read, and if not, why.
    enum Input: Equatable {
        case open
        /// Backpressure: `maxPending` requests wait for answers; the client waits in its send buffer.
        case paused
        /// The peer sent EOF: answer what was received, then close.
        case ended
        /// A framing error: nothing after it can be trusted (request smuggling), so nothing is read.
        case failed
    }

    private enum Pending {
        case request(HTTPRequest)
        case failure(HTTPParseError)
    }

    /// Whether requests after the one in hand will be served.
    enum Lifecycle: Equatable {
        case serving
        /// Shutdown began: the next response is the last and says Connection: close.
        case draining
    }

    let settings: Settings
    private(set) var answering: Answering = .idle
    private(set) var input: Input = .open
    private(set) var lifecycle: Lifecycle = .serving
    private var parser: RequestParser
    private var pending: [Pending] = []
    /// The client asked for 100 Continue for the request now arriving (RFC 9110 §10.1.1).
    private var continueOwed = false
    /// Output not yet sent, as the pieces it was queued in: a large body stays the array the handler
    /// made (no copy), small pieces (heads, stream events) are gathered into the last piece, which
    /// is then ours. The driver sends the first two pieces with one gathering send.
    private var output: [[UInt8]] = []
    /// Bytes of `output[0]` already sent.
    private var outputOffset = 0
    /// A file body queued after `output` (sent with sendfile once `output` is out), and how much of
    /// it is sent. Dropping it closes its descriptor.
    private var fileOutput: FileBody?
    private var fileOffset = 0
    private(set) var unsentCount = 0
    /// Whether the last piece was built here (small pieces may be appended to it without copying a
    /// handler's body).
    private var lastPieceIsOurs = false
    /// Set while the kernel's send buffer is full: when it was found full, or the last progress since.
    /// Non-nil exactly while the driver waits for the socket to become writable.
    private(set) var writeBlockedSince: ContinuousClock.Instant?
    /// While output waits unsent: since when, and how much the client has taken since then
    /// (the send-rate floor, `Settings.minimumSendRate`).
    private var sendWindow: (since: ContinuousClock.Instant, taken: Int)?
    /// When the request now arriving began (or the connection opened, before its first byte).
    private var readStarted: ContinuousClock.Instant?
    private var lastActivity: ContinuousClock.Instant

    init(settings: Settings, now: ContinuousClock.Instant) {
        self.settings = settings
        self.parser = RequestParser(limits: settings.limits)
        self.lastActivity = now
        self.readStarted = now
    }

    // MARK: What the driver asks

    var isClosed: Bool {
        if case .closed = answering { return true }
        return false
    }

    /// The read source is suspended (the driver mirrors this when it cancels the source).
    var readingPaused: Bool { input != .open }

    var awaitingWritable: Bool { writeBlockedSince != nil }

    var hasUnsentOutput: Bool { unsentCount > 0 }

    /// Stop reading further 64 KiB chunks in one go once this much waits unparsed.
    var wantsMoreInput: Bool {
        input == .open && parser.bufferedBytes <= settings.limits.largestBody + 64 * 1024
    }

    /// Lends the first piece of what is not yet sent; report what the kernel took with `sent`.
    func withUnsentOutput<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard let first = output.first else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return first.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[outputOffset...])) }
    }

    /// Lends the first two pieces not yet sent (a head and its body), for one gathering send; the
    /// second is empty when there is one piece. Report what the kernel took with `sent`.
    func withUnsentPair<R>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> R) -> R {
        withUnsentOutput { first in
            guard output.count > 1 else { return body(first, UnsafeRawBufferPointer(start: nil, count: 0)) }
            return output[1].withUnsafeBytes { body(first, $0) }
        }
    }

    /// The first two pieces not yet sent (a head and its body; the second empty when there is one)
    /// and how much of the first is sent, for one gathering send; report what the kernel took with
    /// `sent`. The arrays themselves, not a lent view: to lend one, the driver (a class holding the
    /// machine) copied the whole machine first, on every send.
    var unsentPieces: (first: [UInt8], offset: Int, second: [UInt8])? {
        guard let first = output.first else { return nil }
        return (first, outputOffset, output.count > 1 ? output[1] : [])
    }

    /// The part of a file body still to send, once every byte piece before it is out; nil otherwise.
    var unsentFile: (descriptor: Int32, offset: Int, count: Int)? {
        guard output.isEmpty, let file = fileOutput else { return nil }
        return (file.descriptor, fileOffset, file.count - fileOffset)
    }

    /// A file body waits behind the byte pieces (the driver sends the head with MSG_MORE, so the
    /// head and the file's first bytes leave in one segment).
    var fileFollows: Bool { fileOutput != nil }

    // MARK: Events from the socket

    mutating func bytesRead(_ bytes: UnsafeRawBufferPointer, now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard input == .open, !isClosed else { return actions }
        if readStarted == nil && !parser.hasPartialRequest { readStarted = now }
        parser.append(bytes)
        lastActivity = now
        parse(&actions, now: now)
        advance(&actions, now: now)
        reportReading(wasPaused: false, &actions)
        return actions
    }

    mutating func bytesRead(_ bytes: [UInt8], now: ContinuousClock.Instant) -> ConnectionActions {
        bytes.withUnsafeBytes { bytesRead($0, now: now) }
    }

    /// The peer's EOF (read returned 0).
    mutating func peerClosed(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard !isClosed else { return actions }
        // An event stream's client that hangs up is gone: no EventSource half-closes and reads on.
        // Closing now spares the stream until its next heartbeat, whose write to a half-closed
        // socket would succeed anyway (only the one after fails).
        if case .streaming(_?, _) = answering {
            close(&actions)
            return actions
        }
        let wasPaused = readingPaused
        input = .ended
        advance(&actions, now: now)
        reportReading(wasPaused: wasPaused, &actions)
        return actions
    }

    /// Reading or sending failed (ECONNRESET, EPIPE): the client is gone.
    mutating func socketFailed() -> ConnectionActions {
        var actions = ConnectionActions()
        close(&actions)
        return actions
    }

    /// The kernel took `count` bytes of `withUnsentOutput`.
    mutating func sent(_ count: Int, now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard !isClosed else { return actions }
        var taken = min(count, unsentCount)
        unsentCount -= taken
        if let window = sendWindow { sendWindow = (window.since, window.taken + taken) }
        while taken > 0, !output.isEmpty {
            let left = output[0].count - outputOffset
            if taken < left {
                outputOffset += taken
                taken = 0
                break
            }
            taken -= left
            output.removeFirst()
            outputOffset = 0
        }
        if taken > 0, let file = fileOutput {
            fileOffset += taken
            if fileOffset >= file.count {
                fileOutput = nil
                fileOffset = 0
            }
        }
        if unsentCount > 0 {
            if writeBlockedSince != nil { writeBlockedSince = now }
            return actions
        }
        sendWindow = nil
        output.removeAll(keepingCapacity: true)
        outputOffset = 0
        lastPieceIsOurs = false
        if writeBlockedSince != nil {
            writeBlockedSince = nil
            actions.writable = .stopWaiting
        }
        lastActivity = now
        switch answering {
        case .closingAfterFlush: close(&actions)
        case .streaming: break
        default:
            let wasPaused = readingPaused
            advance(&actions, now: now)
            reportReading(wasPaused: wasPaused, &actions)
        }
        return actions
    }

    /// The send would block (EAGAIN): wait for the socket to become writable, then send again.
    mutating func sendBlocked(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard !isClosed, writeBlockedSince == nil else { return actions }
        writeBlockedSince = now
        if sendWindow == nil { sendWindow = (now, 0) }
        actions.writable = .wait
        return actions
    }

    // MARK: Events from the handler and the executor

    mutating func responseReady(_ response: HTTPResponse, now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard case .handling(let exchange) = answering else { return actions }
        var response = response
        switch response.body {
        case .bytes(let body):
            let keepAlive = exchange.keepAlive && lifecycle == .serving
                && !response.headers.hasToken("close", in: "Connection")
            let head = ResponseHead.serialize(&response, bodyCount: body.count, version: exchange.version,
                                              keepAlive: keepAlive, date: settings.date())
            let sendBody = !exchange.isHead && response.status.allowsBody
            queue(head)
            if sendBody { queue(body) }
            actions.log = ResponseLogRecord(exchange, status: response.status.code,
                                            bytes: sendBody ? body.count : 0)
            answering = keepAlive ? .idle : .closingAfterFlush
            actions.send = true
        case .file(let file):
            let keepAlive = exchange.keepAlive && lifecycle == .serving
                && !response.headers.hasToken("close", in: "Connection")
            let head = ResponseHead.serialize(&response, bodyCount: file.count, version: exchange.version,
                                              keepAlive: keepAlive, date: settings.date())
            let sendBody = !exchange.isHead && response.status.allowsBody && file.count > 0
            queue(head)
            if sendBody {
                fileOutput = file
                fileOffset = 0
                unsentCount += file.count
            }
            actions.log = ResponseLogRecord(exchange, status: response.status.code, bytes: sendBody ? file.count : 0)
            answering = keepAlive ? .idle : .closingAfterFlush
            actions.send = true
        case .stream(let heartbeat, let start):
            // A stream ends with the connection, so it is close-delimited (RFC 9112 §6.3, item 8).
            let head = ResponseHead.serialize(&response, bodyCount: nil, version: exchange.version,
                                              keepAlive: false, date: settings.date())
            if exchange.isHead {
                queue(head)
                actions.log = ResponseLogRecord(exchange, status: response.status.code, bytes: 0)
                answering = .closingAfterFlush
                actions.send = true
            } else {
                let interval = heartbeat.flatMap { $0 > 0 ? Settings.duration($0) : nil }
                answering = .startingStream(exchange, head: head, status: response.status.code, heartbeat: interval)
                actions.startStream = start
            }
        }
        return actions
    }

    /// The executor's backlog is full: the request in hand gets 503 and the connection closes.
    mutating func handlerRefused(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard case .handling(let exchange) = answering else { return actions }
        refuse(exchange, &actions)
        return actions
    }

    /// The executor took the stream's start: the head goes out and the stream owns the connection.
    mutating func streamStarted(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard case .startingStream(let exchange, let head, let status, let heartbeat) = answering else { return actions }
        queue(head)
        actions.log = ResponseLogRecord(exchange, status: status, bytes: 0)
        answering = .streaming(heartbeat: heartbeat, since: now)
        // The client of an event stream hung up while the executor was asked: nobody to stream to.
        if heartbeat != nil && input == .ended {
            close(&actions)
            return actions
        }
        actions.heartbeat = heartbeat
        actions.send = true
        if lifecycle == .draining { finishStream(&actions) }
        return actions
    }

    /// The executor refused the stream's start: nothing was sent yet, so the answer is 503 and close,
    /// never a head without a body on a connection left busy.
    mutating func streamRefused(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard case .startingStream(let exchange, _, _, _) = answering else { return actions }
        refuse(exchange, &actions)
        return actions
    }

    mutating func streamWrite(_ bytes: [UInt8], now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard case .streaming = answering else { return actions }
        // A client that stops reading must not make us buffer without bound.
        if unsentCount > settings.maxStreamBacklog {
            close(&actions)
            return actions
        }
        queue(bytes)
        actions.send = true
        return actions
    }

    /// The application ended the stream: close after what it wrote is sent.
    mutating func streamFinished(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        finishStream(&actions)
        return actions
    }

    // MARK: Events from timers and the server

    /// The stream's heartbeat timer: a comment line after `heartbeat` of silence keeps proxies from
    /// closing the connection and makes a vanished client show up as a failed send.
    mutating func heartbeatDue(now: ContinuousClock.Instant) -> ConnectionActions {
        guard case .streaming(let interval?, _) = answering,
              now >= lastActivity, now - lastActivity >= interval / 10 * 9 else { return ConnectionActions() }
        return streamWrite(Array(": keep-alive\n\n".utf8), now: now)
    }

    /// The server's sweep timer: request read (slowloris → 408), idle keep-alive and write stall.
    /// Whether the read timeout would close this connection as one that never sent a byte: the
    /// driver reads the socket first, since a loop that was busy may not have read what is waiting
    /// there (a request closed unanswered was seen under a full test run's load).
    func closesUnreadOnTimer(now: ContinuousClock.Instant) -> Bool {
        guard !isClosed, case .idle = answering, pending.isEmpty, !hasUnsentOutput, let started = readStarted,
              !parser.hasPartialRequest else { return false }
        return (now > started ? now - started : .zero) > settings.requestReadTimeout
    }

    mutating func timerFired(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard !isClosed else { return actions }
        func elapsed(_ since: ContinuousClock.Instant) -> Duration { now > since ? now - since : .zero }
        if let blocked = writeBlockedSince, elapsed(blocked) > settings.writeTimeout {
            close(&actions)
            return actions
        }
        // A client that takes what it is sent slower than the floor, over a whole window: cut,
        // so it frees what it holds (a zip slot, a handler, a descriptor). Judged per window, so
        // a pause between bursts is forgiven as long as the window's total is enough.
        if let window = sendWindow, settings.minimumSendRate > 0, elapsed(window.since) >= settings.sendRateWindow {
            let seconds = elapsed(window.since) / .seconds(1)
            if Double(window.taken) < Double(settings.minimumSendRate) * seconds {
                close(&actions)
                return actions
            }
            sendWindow = (now, 0)
        }
        // Only event streams (those with a heartbeat) have a lifetime: EventSource reconnects, but a
        // download cut short is a broken file. A download's client that stops reading is closed by
        // the write timeout instead.
        if case .streaming(_?, let since) = answering, elapsed(since) > settings.maxStreamLifetime {
            finishStream(&actions)  // the client's EventSource reconnects
            return actions
        }
        guard case .idle = answering, pending.isEmpty, !hasUnsentOutput else { return actions }
        if let started = readStarted {
            // A large body is given a second for every 32 KiB that has arrived besides the usual
            // wait (a 40 MB photo over a slow uplink); one that trickles slower is still cut off.
            let allowance = settings.requestReadTimeout + .seconds(Double(parser.bodyBytesReceived) / 32_768)
            guard elapsed(started) > allowance else { return actions }
            if parser.hasPartialRequest {
                // Slow headers or body (slowloris): say why, then hang up.
                respondToFailure(HTTPParseError(.requestTimeout, "the request took too long to arrive"),
                                 &actions, now: now)
            } else {
                close(&actions) // opened and never sent a byte
            }
        } else if elapsed(lastActivity) > settings.idleTimeout {
            close(&actions) // RFC 9112 §9.8: an idle keep-alive connection may be closed at any time
        }
        return actions
    }

    /// Server shutdown: the request in hand (or, when idle, the one arriving) is answered with
    /// Connection: close; nothing after it starts. A stream ends after what it wrote.
    mutating func shutdown(now: ContinuousClock.Instant) -> ConnectionActions {
        var actions = ConnectionActions()
        guard !isClosed else { return actions }
        lifecycle = .draining
        switch answering {
        case .streaming: finishStream(&actions)
        case .idle:
            let wasPaused = readingPaused
            advance(&actions, now: now)
            reportReading(wasPaused: wasPaused, &actions)
        default: break
        }
        return actions
    }

    /// Between requests with nothing owed either way: a connection the server may close to make
    /// room for a new one (RFC 9112 §9.8 allows closing an idle keep-alive connection at any time).
    var isIdleBetweenRequests: Bool {
        guard case .idle = answering, pending.isEmpty, !hasUnsentOutput, input == .open else { return false }
        return !parser.hasPartialRequest
    }

    /// The table is full and this connection was picked to make room: it closes if it is still
    /// idle, and carries on otherwise (a request may have arrived since it was picked).
    mutating func reclaim() -> ConnectionActions {
        var actions = ConnectionActions()
        if isIdleBetweenRequests { close(&actions) }
        return actions
    }

    /// Closes at once (the grace period is over).
    mutating func forceClose() -> ConnectionActions {
        var actions = ConnectionActions()
        close(&actions)
        return actions
    }

    // MARK: Rules

    /// Parses what arrived into `pending`, up to `maxPending` requests ahead.
    private mutating func parse(_ actions: inout ConnectionActions, now: ContinuousClock.Instant) {
        guard input == .open else { return }
        while pending.count < settings.maxPending {
            do {
                guard let event = try parser.next() else { break }
                switch event {
                case .request(var request):
                    request.remoteAddress = settings.trustedProxies.clientAddress(peer: settings.remoteAddress, headers: request.headers)
                    request.remoteNetwork = AddressRange.limitKey(request.remoteAddress, ipv6Prefix: settings.ipv6PrefixLength)
                    request.fromTrustedProxy = settings.trustedProxies.trusts(settings.remoteAddress)
                    pending.append(.request(request))
                    // The request the 100 was for is complete: nothing is owed any more.
                    continueOwed = false
                    readStarted = parser.hasPartialRequest ? now : nil
                case .expectContinue:
                    continueOwed = true
                }
            } catch {
                pending.append(.failure(error))
                input = .failed
                return
            }
        }
        if pending.count >= settings.maxPending { input = .paused }
    }

    /// Starts the next request if nothing is in the way; otherwise sends 100 Continue, resumes
    /// reading, or closes when nothing is left to do.
    private mutating func advance(_ actions: inout ConnectionActions, now: ContinuousClock.Instant) {
        guard case .idle = answering, !hasUnsentOutput else { return }
        if input == .paused && pending.count < settings.maxPending / 2 {
            input = .open
            // Bytes already buffered would never raise another read event: parse them now.
            parse(&actions, now: now)
        }
        if !pending.isEmpty {
            switch pending.removeFirst() {
            case .failure(let error):
                // Everything after a framing error is unreliable: answer and close.
                pending.removeAll()
                respondToFailure(error, &actions, now: now)
            case .request(let request):
                answering = .handling(Exchange(method: request.method, path: request.path, version: request.version,
                                               keepAlive: request.keepAlive, started: now, client: request.remoteAddress))
                actions.handle = request
            }
            return
        }
        if continueOwed && parser.hasPartialRequest && input == .open {
            // RFC 9110 §10.1.1: the client waits for this before sending the body. Only now, with
            // every earlier response sent, can it not be mistaken for an answer to an earlier request.
            continueOwed = false
            queue(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            actions.send = true
            return
        }
        if input == .ended || input == .failed || (lifecycle == .draining && !parser.hasPartialRequest) {
            close(&actions)
        }
    }

    /// The read source follows `input`: one suspend when reading stops, one resume when it starts
    /// again (Dispatch counts them, so the driver must never see two of either in a row).
    private func reportReading(wasPaused: Bool, _ actions: inout ConnectionActions) {
        if readingPaused != wasPaused { actions.reading = readingPaused ? .pause : .resume }
    }

    private mutating func refuse(_ exchange: Exchange, _ actions: inout ConnectionActions) {
        var response = Self.errorResponse(HTTPError(.serviceUnavailable, "The server is too busy. Please try again in a moment.",
                                                    headers: ["Retry-After": "1"]),
                                          request: nil, errorPage: settings.errorPage)
        let head = ResponseHead.serialize(&response, bodyCount: response.bodyBytes.count, version: exchange.version,
                                          keepAlive: false, date: settings.date())
        queue(head)
        if !exchange.isHead { queue(response.bodyBytes) }
        actions.log = ResponseLogRecord(exchange, status: response.status.code,
                                        bytes: exchange.isHead ? 0 : response.bodyBytes.count)
        answering = .closingAfterFlush
        actions.send = true
    }

    private mutating func respondToFailure(_ error: HTTPParseError, _ actions: inout ConnectionActions, now: ContinuousClock.Instant) {
        var response = Self.errorResponse(error, request: nil, errorPage: settings.errorPage)
        let head = ResponseHead.serialize(&response, bodyCount: response.bodyBytes.count, version: .http11,
                                          keepAlive: false, date: settings.date())
        queue(head)
        queue(response.bodyBytes)
        actions.log = ResponseLogRecord(method: "-", path: "-", status: error.status.code,
                                        bytes: response.bodyBytes.count, started: readStarted ?? now)
        answering = .closingAfterFlush
        actions.send = true
    }

    private mutating func finishStream(_ actions: inout ConnectionActions) {
        guard case .streaming = answering else { return }
        answering = .closingAfterFlush
        if !hasUnsentOutput { close(&actions) }
    }

    /// Small pieces are gathered into the last piece when it is ours; a large one is kept as the
    /// caller's array, so a 60 KiB body is sent from where the handler put it, never copied.
    private mutating func queue(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        unsentCount += bytes.count
        if bytes.count <= Self.gatherLimit, lastPieceIsOurs, output.count > 1 || outputOffset == 0 {
            output[output.count - 1].append(contentsOf: bytes)
        } else {
            output.append(bytes)
            lastPieceIsOurs = bytes.count <= Self.gatherLimit
        }
    }

    /// Pieces up to this size are copied together (heads, small bodies, stream events).
    static let gatherLimit = 16 * 1024

    /// Leaves `input` and `writeBlockedSince` as they are: the driver reads them to undo its
    /// suspended sources before cancelling them.
    private mutating func close(_ actions: inout ConnectionActions) {
        guard !isClosed else { return }
        answering = .closed
        pending.removeAll()
        // A half-received body goes now, and its share of the upload budget with it.
        parser = RequestParser(limits: settings.limits)
        output = []
        outputOffset = 0
        fileOutput = nil
        fileOffset = 0
        unsentCount = 0
        lastPieceIsOurs = false
        actions.close = true
    }

    static func errorResponse(_ error: any HTTPResponseError, request: HTTPRequest?,
                              errorPage: ErrorPageRenderer) -> HTTPResponse {
        var response = errorPage(error.status, error.publicMessage, request)
        response.status = error.status
        for (name, value) in error.headers { response.headers.set(name, value) }
        return response
    }
}

/// What the driver does after an event, in this order: suspend or resume reading, wait or stop
/// waiting for writability, run a handler or a stream's start, start the heartbeat, log, send the
/// unsent output, close. A plain struct rather than a list: no allocation per event.
struct ConnectionActions {
    enum Interest: Equatable { case pause, resume }
    enum Writable: Equatable { case wait, stopWaiting }

    var reading: Interest?
    var writable: Writable?
    /// Run the handler for this request on the executor; report `responseReady` or `handlerRefused`.
    var handle: HTTPRequest?
    /// Submit this stream's start to the executor; report `streamStarted` or `streamRefused`.
    var startStream: (@Sendable (ResponseStream) -> Void)?
    /// Start the stream's heartbeat timer with this interval; report `heartbeatDue`.
    var heartbeat: Duration?
    var log: ResponseLogRecord?
    /// Output is waiting: send it (`withUnsentOutput`) and report `sent` or `sendBlocked`.
    var send = false
    var close = false
}

/// One access-log line before its duration is known (the driver reads the clock).
struct ResponseLogRecord: Equatable {
    let method: String
    let path: String
    let status: Int
    let bytes: Int
    let started: ContinuousClock.Instant
    /// Empty: the connection's peer.
    var client = ""

    init(method: String, path: String, status: Int, bytes: Int, started: ContinuousClock.Instant, client: String = "") {
        self.method = method
        self.path = path
        self.status = status
        self.bytes = bytes
        self.started = started
        self.client = client
    }

    init(_ exchange: ConnectionStateMachine.Exchange, status: Int, bytes: Int) {
        self.init(method: exchange.method, path: exchange.path, status: status, bytes: bytes, started: exchange.started, client: exchange.client)
    }
}

enum ResponseHead {
    /// The status line and header section. Adds Date, Content-Length and Connection as needed.
    /// Written straight into bytes (no String to build and copy out): this runs for every response.
    static func serialize(_ response: inout HTTPResponse, bodyCount: Int?, version: HTTPVersion,
                          keepAlive: Bool, date: String) -> [UInt8] {
        var head: [UInt8] = []
        head.reserveCapacity(256)
        TextBytes.append("HTTP/1.1 ", to: &head)
        TextBytes.appendDecimal(response.status.code, to: &head)
        head.append(UInt8(ascii: " "))
        head.append(contentsOf: response.status.reason.utf8)
        TextBytes.append("\r\n", to: &head)
        var hasDate = false, hasLength = false
        for (name, _) in response.headers {
            if name.equalsIgnoringASCIICase("Date") { hasDate = true }
            if name.equalsIgnoringASCIICase("Content-Length") { hasLength = true }
        }
        if !hasDate {
            TextBytes.append("Date: ", to: &head)
            head.append(contentsOf: date.utf8)
            TextBytes.append("\r\n", to: &head)
        }
        if let bodyCount, response.status.allowsBody || response.status.code == 304 {
            if response.status.code != 304 && !hasLength {
                TextBytes.append("Content-Length: ", to: &head)
                TextBytes.appendDecimal(bodyCount, to: &head)
                TextBytes.append("\r\n", to: &head)
            }
        }
        if !keepAlive {
            TextBytes.append("Connection: close\r\n", to: &head)
        } else if version == .http10 {
            TextBytes.append("Connection: keep-alive\r\n", to: &head)
        }
        // Connection is ours to set: it must agree with what the connection will actually do.
        for (name, value) in response.headers where !name.equalsIgnoringASCIICase("Connection") {
            head.append(contentsOf: name.utf8)
            TextBytes.append(": ", to: &head)
            head.append(contentsOf: value.utf8)
            TextBytes.append("\r\n", to: &head)
        }
        TextBytes.append("\r\n", to: &head)
        return head
    }
}
