/// Why a request was refused. The status says which rule; the reason is for logs and the error page.
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: HTTPStatus
    public let reason: String
    /// Seconds for Retry-After (a refusal that passes, as UploadBudget's).
    public var retryAfter: Int?

    public init(_ status: HTTPStatus, _ reason: String, retryAfter: Int? = nil) {
        self.status = status
        self.reason = reason
        self.retryAfter = retryAfter
    }

    public var description: String { "\(status.code) \(reason)" }

    static func bad(_ reason: String) -> HTTPParseError { HTTPParseError(.badRequest, reason) }
}

public enum ParseEvent: Sendable {
    /// A whole request: head and body.
    case request(HTTPRequest)
    /// The head of a request asked for `Expect: 100-continue` and its body has not arrived yet.
    case expectContinue
}

/// An incremental HTTP/1.1 request parser over bytes (RFC 9112). It knows nothing of sockets: feed it
/// what arrived with `append`, then call `next()` until it returns nil. After it throws, the connection
/// must be closed: the parser can no longer tell where the next request starts.
///
/// Strictness is deliberate. Anything a front-end proxy might read differently from us (two lengths,
/// a length and a chunked coding, folded lines, bare CR or LF) is refused, because that disagreement is
/// what request smuggling exploits.
public struct RequestParser: Sendable {
    public let limits: HTTPLimits

    private var buffer: [UInt8] = []
    /// First byte not yet consumed by a finished request.
    private var start = 0
    private var state: State = .head(HeadScan())
    private var failure: HTTPParseError?
    /// Bytes of chunked framing (size lines, extensions, CRLFs, trailers) in the current request.
    /// They carry no body, so they are budgeted separately: without it, one-byte chunks behind
    /// 1 KiB extensions would put a thousand bytes on the wire, and in the buffer, for each byte of
    /// body (docs/performance.md, "HTTP server", ParserBudgetTests).
    private var framingBytes = 0

    private struct HeadScan: Sendable {
        var pos = 0                  // next byte to look at (absolute index)
        var lineStart = 0            // absolute index of the current line
        var requestLine: Range<Int>? // once seen
        var fieldLines = 0
        var emptyLinesSkipped = 0
        var begun = false            // pos/lineStart initialised from `start`
    }

    private enum BodyFraming: Sendable {
        case length(Int)
        case chunked(ChunkState)
    }

    private enum ChunkState: Sendable {
        case sizeLine
        case data(remaining: Int)
        case dataEnd
        case trailers(fieldLines: Int, bytes: Int)
    }

    private enum State: Sendable {
        case head(HeadScan)
        case body(HTTPRequest, BodyFraming, continueSent: Bool)
    }

    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ string: String) {
        buffer.append(contentsOf: Array(string.utf8))
    }

    /// Bytes the parser holds, consumed or not: what one connection's input costs in memory.
    public var retainedBytes: Int { buffer.count }

    /// Bytes received but not yet part of a finished request.
    public var bufferedBytes: Int { buffer.count - start }

    /// True while a request has begun to arrive but is not complete: the read timeout applies.
    /// The body bytes of the request being read so far (0 while its head is read).
    public var bodyBytesReceived: Int {
        if case .body(let request, _, _) = state { return request.bodyCount }
        return 0
    }

    public var hasPartialRequest: Bool {
        if case .body = state { return true }
        return bufferedBytes > 0
    }

    public mutating func next() throws(HTTPParseError) -> ParseEvent? {
        if let failure { throw failure }
        do {
            return try step()
        } catch {
            failure = error
            throw error
        }
    }

    private mutating func step() throws(HTTPParseError) -> ParseEvent? {
        switch state {
        case .head(var scan):
            guard let headEnd = try scanHead(&scan) else {
                state = .head(scan)
                return nil
            }
            var request = try parseHead(scan: scan)
            let framing = try bodyFraming(of: request)
            // A large upload's body is held whole until its handler runs: counted in the budget as
            // its bytes arrive (a first step now, so a full budget refuses before the body is sent).
            if case .length(let length)? = framing, length > limits.maxBodyBytes {
                try account(&request, holding: min(length, limits.uploadBudget?.step ?? 0))
            }
            // An upload that spools goes to its file from its first byte, and is in the budget
            // from then, however small: each holds a descriptor and disk, so the budget also
            // bounds how many spool files are open at once (its bytes over its step), pipelined
            // requests parsed ahead included.
            if framing != nil, let directory = limits.spoolDirectory, limits.upload(method: request.method, path: request.path)?.spooled == true {
                try account(&request, holding: 1)
                request.spooled = try SpooledBody(directory: directory)
            }
            start = headEnd
            guard let framing else {
                finish()
                return .request(request)
            }
            state = .body(request, framing, continueSent: false)
            return try step()

        case .body(var request, var framing, let continueSent):
            // The state lets go of the request while its body grows: a copy left there would make
            // every append copy the whole body so far (quadratic in a 40 MB upload's reads).
            state = .head(HeadScan())
            if try readBody(&request, &framing) {
                finish()
                return .request(request)
            }
            state = .body(request, framing, continueSent: true)
            // RFC 9110 §10.1.1: answer 100 only if the client asked and the body has not begun.
            if !continueSent, request.headers.hasToken("100-continue", in: "Expect"), request.version == .http11 {
                return .expectContinue
            }
            return nil
        }
    }

    private mutating func finish() {
        state = .head(HeadScan())
        framingBytes = 0
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
            start = 0
        } else if start > 16 * 1024 {
            buffer.removeFirst(start)
            start = 0
        }
    }

    // MARK: Head

    /// Finds the end of the header section. Returns the index just past the blank line, or nil for
    /// "need more". Limits are checked as bytes arrive, so a client cannot make us buffer without bound.
    private func scanHead(_ scan: inout HeadScan) throws(HTTPParseError) -> Int? {
        if !scan.begun {
            scan = HeadScan(pos: start, lineStart: start, begun: true)
        }
        let count = buffer.count
        return try buffer.withUnsafeBufferPointer { (bytes) throws(HTTPParseError) -> Int? in
            var i = scan.pos
            while i < count {
                let b = bytes[i]
                if b == 0x0A {
                    // RFC 9112 §2.2: lines end in CRLF. A bare LF is refused rather than tolerated,
                    // since a peer that tolerates it differently could be desynchronised.
                    guard i > scan.lineStart, bytes[i - 1] == 0x0D else {
                        throw .bad("bare LF in header section")
                    }
                    let lineEnd = i - 1
                    let empty = lineEnd == scan.lineStart
                    if scan.requestLine == nil {
                        if empty {
                            // RFC 9112 §2.2: ignore at least one empty line before the request line.
                            scan.emptyLinesSkipped += 1
                            if scan.emptyLinesSkipped > 8 { throw .bad("too many empty lines") }
                        } else {
                            scan.requestLine = scan.lineStart..<lineEnd
                        }
                    } else if empty {
                        scan.pos = i + 1
                        return i + 1
                    } else {
                        scan.fieldLines += 1
                        if scan.fieldLines > limits.maxHeaderCount {
                            throw HTTPParseError(.headerFieldsTooLarge, "more than \(limits.maxHeaderCount) header fields")
                        }
                    }
                    scan.lineStart = i + 1
                } else if b == 0x0D {
                    // RFC 9112 §2.2: a bare CR is invalid.
                    if i + 1 < count {
                        if bytes[i + 1] != 0x0A { throw .bad("bare CR in header section") }
                    } else {
                        break // wait for the next byte
                    }
                }
                if let requestLine = scan.requestLine {
                    if i - requestLine.upperBound > limits.maxHeaderBytes {
                        throw HTTPParseError(.headerFieldsTooLarge, "header section larger than \(limits.maxHeaderBytes) bytes")
                    }
                } else if i - scan.lineStart >= limits.maxRequestLineBytes {
                    throw HTTPParseError(.uriTooLong, "request line longer than \(limits.maxRequestLineBytes) bytes")
                }
                i += 1
            }
            scan.pos = i
            return nil
        }
    }

    private func parseHead(scan: HeadScan) throws(HTTPParseError) -> HTTPRequest {
        guard let lineRange = scan.requestLine else { throw .bad("missing request line") }
        let (method, target, version) = try parseRequestLine(buffer[lineRange])

        var headers = HTTPHeaders()
        var lineStart = lineRange.upperBound + 2
        let headEnd = scan.pos - 2 // index of the final CRLF
        while lineStart < headEnd {
            var lineEnd = lineStart
            while buffer[lineEnd] != 0x0D { lineEnd += 1 }
            let (name, value) = try parseFieldLine(buffer[lineStart..<lineEnd])
            headers.add(name, value)
            lineStart = lineEnd + 2
        }

        // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with more than one, gets 400.
        let hosts = headers.values("Host")
        if hosts.count > 1 { throw .bad("more than one Host header") }
        if hosts.isEmpty && version == .http11 { throw .bad("missing Host header") }

        return HTTPRequest(method: method, target: target, version: version, headers: headers)
    }

    private func parseRequestLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String, HTTPVersion) {
        // RFC 9112 §3: request-line = method SP request-target SP HTTP-version, single spaces.
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .bad("malformed request line") }
        let methodBytes = parts[0], targetBytes = parts[1], versionBytes = parts[2]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(Self.isTokenChar) else {
            throw .bad("invalid method")
        }
        // RFC 3986 characters only: visible ASCII, no spaces, controls or raw UTF-8.
        guard !targetBytes.isEmpty, targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .bad("invalid request target")
        }
        // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT
        let v = Array(versionBytes)
        guard v.count == 8, v.starts(with: Array("HTTP/".utf8)), v[6] == UInt8(ascii: "."),
              let major = Self.digit(v[5]), let minor = Self.digit(v[7]) else {
            throw .bad("invalid HTTP version")
        }
        guard major == 1 else { throw HTTPParseError(.versionNotSupported, "HTTP/\(major) is not supported") }
        let method = String(decoding: methodBytes, as: UTF8.self)
        let target = String(decoding: targetBytes, as: UTF8.self)
        // RFC 9112 §3.2: origin-form for most requests, absolute-form from proxies, asterisk-form for
        // OPTIONS. authority-form belongs to CONNECT, which a web app does not tunnel.
        let first = targetBytes.first!
        if first == UInt8(ascii: "/") {
        } else if target == "*" {
            guard method == "OPTIONS" else { throw .bad("asterisk-form is for OPTIONS only") }
        } else if target.lowercased().hasPrefix("http://") || target.lowercased().hasPrefix("https://") {
        } else if method == "CONNECT" {
            throw HTTPParseError(.notImplemented, "CONNECT is not supported")
        } else {
            throw .bad("invalid request target")
        }
        return (method, target, HTTPVersion(major: major, minor: minor))
    }

    private func parseFieldLine(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String) {
        // RFC 9112 §5.2: obs-fold (a line starting with whitespace) is refused with 400.
        if let first = line.first, first == 0x20 || first == 0x09 { throw .bad("obsolete line folding") }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .bad("header line without colon") }
        let nameBytes = line[line.startIndex..<colon]
        guard !nameBytes.isEmpty else { throw .bad("empty header name") }
        // RFC 9112 §5.1: no whitespace between field name and colon; a server MUST reject it with 400.
        if let last = nameBytes.last, last == 0x20 || last == 0x09 { throw .bad("whitespace before colon") }
        guard nameBytes.allSatisfy(Self.isTokenChar) else { throw .bad("invalid header name") }
        var valueBytes = line[(colon + 1)...]
        while let f = valueBytes.first, f == 0x20 || f == 0x09 { valueBytes.removeFirst() }
        while let l = valueBytes.last, l == 0x20 || l == 0x09 { valueBytes.removeLast() }
        // RFC 9110 §5.5: field-value is VCHAR, obs-text, SP and HTAB; controls (NUL…) are invalid.
        guard valueBytes.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
            throw .bad("invalid character in header value")
        }
        return (String(decoding: nameBytes, as: UTF8.self), String(decoding: valueBytes, as: UTF8.self))
    }

    /// Decides how the body is delimited (RFC 9112 §6.3), or nil when there is none.
    private func bodyFraming(of request: HTTPRequest) throws(HTTPParseError) -> BodyFraming? {
        let transferEncodings = request.headers.values("Transfer-Encoding")
        let contentLengths = request.headers.values("Content-Length")
        if !transferEncodings.isEmpty {
            // RFC 9112 §6.1: Transfer-Encoding with Content-Length "ought to be handled as an error";
            // we refuse it outright, as the classic smuggling vector.
            if !contentLengths.isEmpty { throw .bad("both Transfer-Encoding and Content-Length") }
            // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
            if request.version == .http10 { throw .bad("Transfer-Encoding in HTTP/1.0") }
            let codings = transferEncodings.flatMap { $0.split(separator: ",") }
                .map { $0.trimmingASCIIWhitespace().lowercased() }
            // RFC 9112 §6.3: if chunked is not the final coding the length cannot be known: 400.
            guard codings.last == "chunked" else { throw .bad("chunked is not the final transfer coding") }
            guard codings.count == 1 else {
                throw HTTPParseError(.notImplemented, "only the chunked transfer coding is supported")
            }
            return .chunked(.sizeLine)
        }
        guard !contentLengths.isEmpty else { return nil }
        // RFC 9110 §8.6 allows collapsing identical duplicates; we refuse any repetition instead.
        guard contentLengths.count == 1 else { throw .bad("more than one Content-Length") }
        let text = contentLengths[0]
        // Content-Length = 1*DIGIT: no sign, no spaces, no lists, and short enough not to overflow.
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              let length = Int(text) else {
            throw .bad("invalid Content-Length")
        }
        let upload = limits.upload(method: request.method, path: request.path)
        if length > upload?.maxBodyBytes ?? limits.maxBodyBytes { throw limits.bodyRefusal(upload) }
        return length == 0 ? nil : .length(length)
    }

    // MARK: Body

    /// A large body's bytes in the server's UploadBudget: the request's reservation grown to hold
    /// `total` bytes, or 503 when the budget has no room (nothing without a budget).
    private func account(_ request: inout HTTPRequest, holding total: Int) throws(HTTPParseError) {
        guard let budget = limits.uploadBudget else { return }
        let reservation = request.uploadReservation ?? budget.reservation()
        request.uploadReservation = reservation
        guard reservation.cover(total) else { throw UploadBudget.refusal }
    }

    /// Body bytes into the request's file when it spools, else into its body (`expecting` more in
    /// all, reserved at once).
    private func append(_ bytes: ArraySlice<UInt8>, to request: inout HTTPRequest, expecting: Int) throws(HTTPParseError) {
        if let spooled = request.spooled { return try spooled.append(bytes) }
        if request.body.isEmpty { request.body.reserveCapacity(expecting) }
        request.body.append(contentsOf: bytes)
    }

    /// Moves body bytes from the buffer into the request. True once the body is complete.
    private mutating func readBody(_ request: inout HTTPRequest, _ framing: inout BodyFraming) throws(HTTPParseError) -> Bool {
        // Consumed bytes leave the buffer as the body advances, not when the request ends: a slow
        // body must cost its decoded size, never everything sent for it.
        defer { dropConsumed() }
        switch framing {
        case .length(let remaining):
            let take = min(remaining, buffer.count - start)
            if take > 0 {
                let count = request.bodyCount
                if count + remaining > limits.maxBodyBytes || request.spooled != nil { try account(&request, holding: count + take) }
                try append(buffer[start..<(start + take)], to: &request, expecting: remaining)
                start += take
            }
            framing = .length(remaining - take)
            return remaining == take

        case .chunked(var chunk):
            defer { framing = .chunked(chunk) }
            while true {
                switch chunk {
                case .sizeLine:
                    guard let line = try takeLine(maxBytes: limits.maxChunkLineBytes) else { return false }
                    try countFraming(line.count + 2, body: request.bodyCount)
                    let size = try Self.chunkSize(line)
                    if request.bodyCount + size > limits.maxBodyBytes {
                        let upload = limits.upload(method: request.method, path: request.path)
                        if request.bodyCount + size > upload?.maxBodyBytes ?? limits.maxBodyBytes { throw limits.bodyRefusal(upload) }
                    }
                    chunk = size == 0 ? .trailers(fieldLines: 0, bytes: 0) : .data(remaining: size)
                case .data(let remaining):
                    let take = min(remaining, buffer.count - start)
                    guard take > 0 else { return false }
                    if request.bodyCount + take > limits.maxBodyBytes || request.spooled != nil { try account(&request, holding: request.bodyCount + take) }
                    try append(buffer[start..<(start + take)], to: &request, expecting: take)
                    start += take
                    chunk = take == remaining ? .dataEnd : .data(remaining: remaining - take)
                case .dataEnd:
                    guard buffer.count - start >= 2 else { return false }
                    guard buffer[start] == 0x0D, buffer[start + 1] == 0x0A else {
                        throw .bad("chunk data not followed by CRLF")
                    }
                    start += 2
                    try countFraming(2, body: request.bodyCount)
                    chunk = .sizeLine
                case .trailers(let fieldLines, let bytes):
                    // RFC 9112 §7.1.2: trailer fields are read and discarded, within the header limits.
                    guard let line = try takeLine(maxBytes: limits.maxHeaderBytes) else { return false }
                    try countFraming(line.count + 2, body: request.bodyCount)
                    if line.isEmpty { return true }
                    _ = try parseFieldLine(line)
                    if fieldLines + 1 > limits.maxHeaderCount || bytes + line.count > limits.maxHeaderBytes {
                        throw HTTPParseError(.headerFieldsTooLarge, "trailer section too large")
                    }
                    chunk = .trailers(fieldLines: fieldLines + 1, bytes: bytes + line.count)
                }
            }
        }
    }

    /// Chunked framing may cost at most `maxChunkFramingBytes` plus the body so far: generous for
    /// any real client (a few bytes a chunk), fatal to a body smuggled out in one-byte chunks.
    private mutating func countFraming(_ bytes: Int, body: Int) throws(HTTPParseError) {
        framingBytes += bytes
        if framingBytes > limits.maxChunkFramingBytes + body {
            throw HTTPParseError(.contentTooLarge, "chunked framing larger than the body it carries")
        }
    }

    /// Forgets bytes already moved into the request once they are a sizeable share of the buffer
    /// (copying the rest down is then cheaper than keeping them).
    private mutating func dropConsumed() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
            start = 0
        } else if start > 16 * 1024, start * 2 >= buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
    }

    /// One CRLF-terminated line from the buffer, without its CRLF; nil when incomplete.
    private mutating func takeLine(maxBytes: Int) throws(HTTPParseError) -> ArraySlice<UInt8>? {
        var i = start
        while i < buffer.count {
            let b = buffer[i]
            if b == 0x0A {
                guard i > start, buffer[i - 1] == 0x0D else { throw .bad("bare LF in chunked body") }
                let line = buffer[start..<(i - 1)]
                start = i + 1
                return line
            }
            if b == 0x0D, i + 1 < buffer.count, buffer[i + 1] != 0x0A { throw .bad("bare CR in chunked body") }
            if i - start >= maxBytes { throw .bad("chunk line too long") }
            i += 1
        }
        return nil
    }

    /// RFC 9112 §7.1: chunk-size = 1*HEXDIG, then optional chunk extensions, which we ignore.
    private static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        var size = 0
        var digits = 0
        var rest = line[...]
        while let c = rest.first, let v = FormDecoding.hexValue(c) {
            digits += 1
            guard digits <= 15 else { throw .bad("chunk size too large") }
            size = size << 4 | Int(v)
            rest.removeFirst()
        }
        guard digits > 0 else { throw .bad("invalid chunk size") }
        while let c = rest.first, c == 0x20 || c == 0x09 { rest.removeFirst() }
        if let c = rest.first, c != UInt8(ascii: ";") { throw .bad("invalid chunk size") }
        return size
    }

    // MARK: Character classes

    /// RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_"
    /// / "`" / "|" / "~" / DIGIT / ALPHA
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func digit(_ c: UInt8) -> Int? {
        c >= 48 && c <= 57 ? Int(c - 48) : nil
    }
}
