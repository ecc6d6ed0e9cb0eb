#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
@preconcurrency import Dispatch

/// One client connection: a state machine driven by a read source, with a write source only while
/// the kernel's send buffer is full.
///
/// Concurrency: every mutable property is touched only on `queue` (a serial queue per connection),
/// which is why the class can be `@unchecked Sendable`. Handlers run elsewhere and hop back here with
/// their response. Responses leave in request order (RFC 9112 §9.3.2): one request is handled at a
/// time, later pipelined ones wait parsed in `pending`.
final class Connection: @unchecked Sendable {
    let id: Int
    let fd: Int32
    let remoteAddress: String
    let queue: DispatchQueue
    private let server: HTTPServer
    private let configuration: ServerConfiguration

    private var parser: RequestParser
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var readSuspended = false
    private var writeSourceResumed = false

    private enum Pending {
        case request(HTTPRequest)
        case failure(HTTPParseError)
    }
    private var pending: [Pending] = []
    private var output: [UInt8] = []
    private var outputOffset = 0

    /// A handler is running for the current request, or a stream owns the connection.
    private var busy = false
    private var closeWhenFlushed = false
    /// The peer sent EOF: answer what was received, then close.
    private var peerClosedRead = false
    private var parserFailed = false
    private var draining = false
    private var continueOwed = false
    private(set) var closed = false
    private var sourcesToCancel = 0
    private var stream: ResponseStream?
    private var heartbeat: (any DispatchSourceTimer)?

    /// When the request now being read began (or the connection opened, before its first request).
    private var readStarted: UInt64?
    private var lastActivity: UInt64
    private var writeStalledSince: UInt64?

    /// Pipelined requests parsed ahead of the one being answered, before reading pauses.
    private static let maxPending = 16

    init(id: Int, fd: Int32, remoteAddress: String, server: HTTPServer) {
        self.id = id
        self.fd = fd
        self.remoteAddress = remoteAddress
        self.server = server
        self.configuration = server.configuration
        self.queue = DispatchQueue(label: "http.connection", target: server.ioQueue)
        self.parser = RequestParser(limits: server.configuration.limits)
        let now = monotonicNanos()
        self.lastActivity = now
        self.readStarted = now
    }

    func start() {
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [unowned self] in self.readable() }
        source.setCancelHandler { [self] in self.sourceCancelled() }
        readSource = source
        sourcesToCancel += 1
        source.resume()
    }

    // MARK: Reading

    private func readable() {
        guard !closed else { return }
        var sawData = false
        readLoop: while true {
            let n = withUnsafeTemporaryAllocation(byteCount: 65536, alignment: 16) { buffer -> Int in
                let n = read(fd, buffer.baseAddress, buffer.count)
                if n > 0 {
                    if readStarted == nil && !parser.hasPartialRequest { readStarted = monotonicNanos() }
                    parser.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                }
                return n
            }
            if n > 0 {
                sawData = true
                if n < 65536 { break }
                // A full buffer: more is likely waiting, but stop once enough is queued.
                if parser.bufferedBytes > configuration.limits.maxBodyBytes + 64 * 1024 { break }
                continue
            }
            if n == 0 {
                peerClosedRead = true
                suspendReading()
                break
            }
            switch errno {
            case EINTR: continue readLoop
            case EAGAIN, EWOULDBLOCK: break readLoop
            default:
                close()
                return
            }
        }
        if sawData { lastActivity = monotonicNanos() }
        parseAvailable()
        process()
    }

    private func parseAvailable() {
        guard !parserFailed else { return }
        while pending.count < Self.maxPending {
            do {
                guard let event = try parser.next() else { break }
                switch event {
                case .request(var request):
                    request.remoteAddress = remoteAddress
                    pending.append(.request(request))
                    readStarted = parser.hasPartialRequest ? monotonicNanos() : nil
                case .expectContinue:
                    continueOwed = true
                }
            } catch {
                parserFailed = true
                pending.append(.failure(error))
                suspendReading()
                return
            }
        }
        // Backpressure: a client pipelining faster than we answer waits in its own send buffer.
        if pending.count >= Self.maxPending { suspendReading() }
    }

    private func suspendReading() {
        guard !readSuspended, let readSource else { return }
        readSuspended = true
        readSource.suspend()
    }

    private func resumeReading() {
        guard readSuspended, !peerClosedRead, !parserFailed, !closed, let readSource else { return }
        readSuspended = false
        readSource.resume()
    }

    // MARK: Answering

    /// Starts the next request if nothing is in the way; closes when there is nothing left to do.
    private func process() {
        while !closed && !busy && outputOffset == output.count && !closeWhenFlushed {
            guard !pending.isEmpty else { break }
            let item = pending.removeFirst()
            switch item {
            case .failure(let error):
                // Everything after a framing error is unreliable: answer and close.
                pending.removeAll()
                respondWithError(error)
                return
            case .request(let request):
                if draining {
                    pending.removeAll()
                    close()
                    return
                }
                busy = true
                let started = monotonicNanos()
                let accepted = server.executor.submit { [self] in
                    let response = server.respond(to: request)
                    queue.async { self.complete(request, response, started: started) }
                }
                if !accepted {
                    busy = false
                    var response = server.errorResponse(HTTPError(.serviceUnavailable, "The server is too busy. Please try again in a moment.", headers: ["Retry-After": "1"]), request: request)
                    response.headers.set("Connection", "close")
                    send(response, for: request, keepAlive: false, started: started)
                    return
                }
            }
        }
        guard !closed else { return }
        if !busy && pending.isEmpty && outputOffset == output.count {
            if continueOwed && parser.hasPartialRequest && !peerClosedRead {
                // RFC 9110 §10.1.1: the client waits for this before sending the body.
                continueOwed = false
                write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                return
            }
            if peerClosedRead || (draining && !parser.hasPartialRequest) {
                close()
                return
            }
        }
        if pending.count < Self.maxPending / 2 { resumeReading() }
    }

    private func complete(_ request: HTTPRequest, _ response: HTTPResponse, started: UInt64) {
        busy = false
        guard !closed else { return }
        // After a parse error the failure waits in `pending` and closes the connection itself.
        let keepAlive = request.keepAlive && !draining
            && !response.headers.hasToken("close", in: "Connection")
        send(response, for: request, keepAlive: keepAlive, started: started)
    }

    private func send(_ response: HTTPResponse, for request: HTTPRequest, keepAlive: Bool, started: UInt64) {
        var response = response
        let isHead = request.method == "HEAD"
        switch response.body {
        case .bytes(let body):
            let head = ResponseHead.serialize(&response, bodyCount: body.count, version: request.version,
                                              keepAlive: keepAlive)
            var bytes = head
            let sendBody = !isHead && response.status.allowsBody
            if sendBody { bytes.append(contentsOf: body) }
            log(request, response.status, bytes: sendBody ? body.count : 0, started: started)
            if !keepAlive { closeWhenFlushed = true }
            write(bytes)
        case .stream(let heartbeatInterval, let start):
            // A stream ends with the connection, so it is close-delimited (RFC 9112 §6.3, item 8).
            let head = ResponseHead.serialize(&response, bodyCount: nil, version: request.version,
                                              keepAlive: false)
            log(request, response.status, bytes: 0, started: started)
            if isHead {
                closeWhenFlushed = true
                write(head)
                return
            }
            busy = true
            let stream = ResponseStream(connection: self)
            self.stream = stream
            write(head)
            if let interval = heartbeatInterval, interval > 0 { startHeartbeat(every: interval) }
            server.executor.submit { start(stream) }
        }
    }

    private func respondWithError(_ error: HTTPParseError) {
        var response = server.errorResponse(error, request: nil)
        let head = ResponseHead.serialize(&response, bodyCount: response.bodyBytes.count, version: .http11,
                                          keepAlive: false)
        accessLogLine(method: "-", path: "-", status: error.status.code, bytes: response.bodyBytes.count,
                      started: readStarted ?? monotonicNanos())
        closeWhenFlushed = true
        write(head + response.bodyBytes)
    }

    private func log(_ request: HTTPRequest, _ status: HTTPStatus, bytes: Int, started: UInt64) {
        accessLogLine(method: request.method, path: request.path, status: status.code, bytes: bytes, started: started)
    }

    private func accessLogLine(method: String, path: String, status: Int, bytes: Int, started: UInt64) {
        guard let accessLog = configuration.accessLog else { return }
        let seconds = Double(monotonicNanos() - started) / 1e9
        accessLog(AccessLogEntry(method: method, path: path, status: status, bytes: bytes,
                                 seconds: seconds, remoteAddress: remoteAddress))
    }

    // MARK: Writing

    /// Sends at once what the kernel takes; keeps the rest for the write source.
    func write(_ bytes: [UInt8]) {
        guard !closed else { return }
        if outputOffset == output.count {
            output = bytes
            outputOffset = 0
        } else {
            output.append(contentsOf: bytes)
        }
        flush()
    }

    private func flush() {
        while outputOffset < output.count {
            let n = output.withUnsafeBytes { buffer in
                Glibc.send(fd, buffer.baseAddress! + outputOffset, buffer.count - outputOffset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                outputOffset += n
                writeStalledSince = nil
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if writeStalledSince == nil { writeStalledSince = monotonicNanos() }
                waitUntilWritable()
                return
            }
            // EPIPE, ECONNRESET: the client is gone.
            close()
            return
        }
        output.removeAll(keepingCapacity: output.capacity <= 256 * 1024)
        outputOffset = 0
        writeStalledSince = nil
        if writeSourceResumed {
            writeSourceResumed = false
            writeSource?.suspend()
        }
        lastActivity = monotonicNanos()
        if closeWhenFlushed {
            close()
        } else if stream == nil {
            process()
        }
    }

    private func waitUntilWritable() {
        if writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in self.flush() }
            source.setCancelHandler { [self] in self.sourceCancelled() }
            writeSource = source
            sourcesToCancel += 1
            writeSourceResumed = true
            source.resume()
        } else if !writeSourceResumed {
            writeSourceResumed = true
            writeSource?.resume()
        }
    }

    // MARK: Streams (Server-Sent Events)

    func streamWrite(_ bytes: [UInt8]) {
        guard !closed, stream != nil else { return }
        // A client that stops reading must not make us buffer without bound.
        if output.count - outputOffset > 1024 * 1024 {
            close()
            return
        }
        write(bytes)
    }

    func streamFinish() {
        guard !closed, stream != nil else { return }
        closeWhenFlushed = true
        if outputOffset == output.count { close() }
    }

    private func startHeartbeat(every interval: Double) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(100))
        timer.setEventHandler { [unowned self] in
            let idle = Double(monotonicNanos() - self.lastActivity) / 1e9
            if idle >= interval * 0.9 { self.streamWrite(Array(": keep-alive\n\n".utf8)) }
        }
        heartbeat = timer
        timer.resume()
    }

    // MARK: Timeouts and shutdown

    func checkTimeouts(now: UInt64) {
        guard !closed else { return }
        func elapsed(_ since: UInt64) -> Double { now > since ? Double(now - since) / 1e9 : 0 }
        if let stalled = writeStalledSince, elapsed(stalled) > configuration.writeTimeout {
            close()
            return
        }
        guard !busy, pending.isEmpty, outputOffset == output.count else { return }
        if let started = readStarted {
            guard elapsed(started) > configuration.requestReadTimeout else { return }
            if parser.hasPartialRequest {
                // Slow headers or body (slowloris): say why, then hang up.
                respondWithError(HTTPParseError(.requestTimeout, "the request took too long to arrive"))
            } else {
                close() // opened and never sent a byte
            }
        } else if elapsed(lastActivity) > configuration.idleTimeout {
            close() // RFC 9112 §9.8: an idle keep-alive connection may be closed at any time
        }
    }

    /// Server shutdown: finish the request in hand, close when idle.
    func drain() {
        guard !closed else { return }
        draining = true
        if stream != nil {
            streamFinish()
        } else if !busy && outputOffset == output.count {
            close()
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        pending.removeAll()
        heartbeat?.cancel()
        heartbeat = nil
        let stream = self.stream
        self.stream = nil
        // A suspended source never delivers its cancel handler: resume before cancelling.
        if let readSource {
            if readSuspended { readSource.resume() }
            readSource.cancel()
        }
        if let writeSource {
            if !writeSourceResumed { writeSource.resume() }
            writeSource.cancel()
        }
        if sourcesToCancel == 0 { closeDescriptor() }
        stream?.connectionClosed()
    }

    private func sourceCancelled() {
        sourcesToCancel -= 1
        if sourcesToCancel == 0 { closeDescriptor() }
    }

    /// Only now, with every source on this fd cancelled, may the fd be closed and reused.
    private func closeDescriptor() {
        readSource = nil
        writeSource = nil
        _ = Glibc.close(fd)
        server.connectionClosed(self)
    }
}

enum ResponseHead {
    /// The status line and header section. Adds Date, Content-Length and Connection as needed.
    static func serialize(_ response: inout HTTPResponse, bodyCount: Int?, version: HTTPVersion,
                          keepAlive: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(response.status.code) \(response.status.reason)\r\n"
        head.reserveCapacity(256)
        if !response.headers.contains("Date") { head += "Date: \(HTTPDate.now)\r\n" }
        if let bodyCount, response.status.allowsBody || response.status.code == 304 {
            if response.status.code != 304 && !response.headers.contains("Content-Length") {
                head += "Content-Length: \(bodyCount)\r\n"
            }
        }
        if !keepAlive {
            head += "Connection: close\r\n"
        } else if version == .http10 {
            head += "Connection: keep-alive\r\n"
        }
        // Connection is ours to set: it must agree with what the connection will actually do.
        for (name, value) in response.headers where !name.equalsIgnoringASCIICase("Connection") {
            head += name
            head += ": "
            head += value
            head += "\r\n"
        }
        head += "\r\n"
        return Array(head.utf8)
    }
}
