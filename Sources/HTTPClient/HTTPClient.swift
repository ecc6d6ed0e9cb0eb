import CCurl
import Foundation
import Synchronization
import Waiting

/// Outbound HTTP through libcurl, for photo providers and image downloads.
///
/// Each request runs `curl_easy_perform` on the calling thread; callers are a fixed set of threads
/// (the album workers and the download slots, docs/architecture.md). Every easy handle joins one
/// share handle, so the connection cache, DNS cache and TLS sessions are common to all of them: an
/// album's downloads reuse the connections the previous album (or the warm-up) opened. A per-host
/// cap keeps many albums from hammering one server. Two guards stand between a provider's answer
/// and our own network: an optional `HostPolicy` checked on the first request and every redirect
/// (redirects are followed here, not by curl, so each hop is checked), and the address guard in
/// the C shim, which refuses internal addresses whatever name led to them.
public final class HTTPClient: Sendable {
    public struct Options: Sendable {
        public var connectTimeout: Double = 5
        public var totalTimeout: Double = 30
        /// Responses larger than this are aborted while they arrive (never buffered whole).
        public var maxResponseBytes = 8 * 1024 * 1024
        public var maxRedirects = 3
        public var userAgent = "VirtualTourist/1.0 (self-hosted photo map; +https://github.com/virtual-tourist)"
        /// Concurrent requests to one host (across all albums of this instance), and so the most
        /// connections opened to it.
        public var perHostConcurrency = 32
        /// Keep connections (and DNS answers and TLS sessions) for the next request. false opens a
        /// connection per request, only so `script/bench album` can measure what reuse saves.
        public var reuseConnections = true
        /// Idle connections kept in the shared cache, over all hosts.
        public var maxCachedConnections = 64
        /// Origins ("http://127.0.0.1:8090") the operator configured, which may live on loopback
        /// or a private network (the fixture in tests and demos, a provider on the LAN). Every
        /// other origin is refused when it resolves to an internal address.
        public var internalOrigins: [String] = []
        public init() {}
    }

    public let options: Options
    private let hosts = HostSlots()
    private let internalOrigins: Set<String>
    /// Idle easy handles (each with its address guard), handles lent out, and the shared caches (nil
    /// with `reuseConnections` off, or once shut down). The share is cleaned up only when no handle
    /// uses it.
    private let pool: Mutex<(idle: [Handle], lent: Int, share: SharedCaches?, closed: Bool)>
    /// When each origin last answered, to skip warm-ups for origins with warm connections.
    private let lastUsed = Mutex<[String: ContinuousClock.Instant]>([:])

    public init(options: Options = Options()) {
        _ = HTTPClient.globalInit
        self.options = options
        internalOrigins = Set(options.internalOrigins.compactMap { HostPolicy.origin(of: $0) })
        pool = Mutex(([], 0, options.reuseConnections ? vt_curl_share_create().map(SharedCaches.init) : nil, false))
    }

    deinit { shutdown() }

    /// Closes the cached connections (when the app stops). Requests after this still work, each on
    /// a connection of its own.
    public func shutdown() {
        // The idle handles count as lent until destroyed: curl_easy_cleanup detaches a handle from
        // the share, so the share must outlive every cleanup, whoever ends last destroying it.
        let handles = pool.withLock { state -> [Handle] in
            state.closed = true
            let handles = state.idle
            state.idle = []
            state.lent += handles.count
            return handles
        }
        for handle in handles { giveBack(handle, reusable: false) }
        let share = pool.withLock { state -> SharedCaches? in
            guard state.lent == 0, let share = state.share else { return nil }
            state.share = nil
            return share
        }
        if let share { vt_curl_share_destroy(share.pointer) }
    }

    /// curl_global_init is not thread-safe: run it once, before any transfer.
    static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    /// GET `url`, following redirects. With `hosts`, the address and every redirect must be one of
    /// its hosts, or `HTTPClientError.refused` is thrown before anything is sent there. Throws for
    /// transport failures; HTTP error statuses come back as responses.
    public func get(_ url: String, headers: [String: String] = [:], hosts policy: HostPolicy? = nil) throws -> HTTPClientResponse {
        var current = url
        var redirects = 0
        while true {
            guard let parsed = URL(string: current), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  let host = parsed.host, !host.isEmpty else {
                throw HTTPClientError.unsupportedURL(current)
            }
            if let policy, !policy.admits(current) {
                throw HTTPClientError.refused("\(HostPolicy.origin(of: current) ?? current) is not one of the provider's image hosts"
                                              + (redirects > 0 ? " (reached by a redirect)" : ""))
            }
            let response = try hosts.withSlot(host.lowercased(), limit: options.perHostConcurrency) {
                try perform(current, method: "GET", headers: headers)
            }
            guard [301, 302, 303, 307, 308].contains(response.status), let next = response.redirectURL else { return response }
            redirects += 1
            guard redirects <= options.maxRedirects else { throw HTTPClientError.tooManyRedirects }
            current = next
        }
    }

    /// AWS Signature Version 4 for one request, computed by libcurl (CURLOPT_AWS_SIGV4): the
    /// provider string ("aws:amz:us-east-1:s3") and the key pair. The caller sends
    /// `x-amz-content-sha256` (S3 requires it); libcurl signs it with the other headers.
    public struct AWSSigV4: Sendable {
        public var provider: String
        public var accessKeyID: String
        public var secretAccessKey: String
        public init(provider: String, accessKeyID: String, secretAccessKey: String) {
            self.provider = provider
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
        }
    }

    /// One request of any method (GET, HEAD, PUT, DELETE, POST), `body` sent as is, optionally
    /// signed with AWS SigV4. Redirects are not followed (the response is returned: an object
    /// store's 301 names a wrong region, nothing to chase). The same guards as get(): http and
    /// https only, the response size cap, the timeouts, the per-host cap and the address guard
    /// (an internal address only for an origin in `internalOrigins`). `timeout` replaces
    /// `options.totalTimeout` for this request; the wait for a per-host slot counts into it, and a
    /// request that found no slot in time throws `timedOut` like one the server did not answer.
    public func send(_ method: String, _ url: String, headers: [String: String] = [:], body: [UInt8]? = nil,
                     file: UploadFile? = nil, sigV4: AWSSigV4? = nil, timeout: Double? = nil) throws -> HTTPClientResponse {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = parsed.host, !host.isEmpty else {
            throw HTTPClientError.unsupportedURL(url)
        }
        guard method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }), !method.isEmpty else { throw HTTPClientError.unsupportedURL("\(method) \(url)") }
        // Clamped once, here: a Double out of Duration's range would trap, and so would NaN (which
        // min() passes through) when it becomes curl's milliseconds.
        let asked = timeout ?? options.totalTimeout
        let total = asked.isNaN ? 1e9 : min(max(asked, 0), 1e9)
        let deadline = ContinuousClock.now + .seconds(total)
        let slot = try hosts.withSlot(host.lowercased(), limit: options.perHostConcurrency, deadline: deadline) {
            // What the wait for the slot left of the request's time, at least a millisecond
            // (CURLOPT_TIMEOUT_MS 0 would mean no limit).
            let left = max(0.001, (deadline - .now) / .seconds(1))
            return try perform(url, method: method, headers: headers, body: body, file: file, sigV4: sigV4, timeout: min(total, left))
        }
        guard let response = slot else { throw HTTPClientError.timedOut(url) }
        return response
    }

    /// Opens a connection to `origin` ahead of need (a HEAD of "/", answer ignored), so the next
    /// requests there find it warm. Errors are ignored: the real request will report them.
    public func preconnect(_ origin: String) {
        guard let host = URL(string: origin)?.host?.lowercased() else { return }
        _ = try? hosts.withSlot(host, limit: options.perHostConcurrency) {
            try perform(origin + "/", method: "HEAD", headers: [:])
        }
    }

    /// True when a request to `origin` finished within `within`: its connections are likely still
    /// open (curl keeps idle connections for about two minutes; servers often less).
    public func isWarm(_ origin: String, within: Duration = .seconds(20)) -> Bool {
        guard options.reuseConnections, let key = HostPolicy.origin(of: origin),
              let last = lastUsed.withLock({ $0[key] }) else { return false }
        return ContinuousClock.now - last < within
    }

    private func perform(_ url: String, method: String, headers: [String: String], body: [UInt8]? = nil, file: UploadFile? = nil,
                         sigV4: AWSSigV4? = nil, timeout: Double? = nil) throws -> HTTPClientResponse {
        let (handle, share) = try takeHandle()
        var reusable = true
        defer { giveBack(handle, reusable: reusable) }
        let curl = handle.curl
        let guardState = handle.guardState
        guardState.pointee.allow_internal = HostPolicy.origin(of: url).map { internalOrigins.contains($0) } == true ? 1 : 0
        guardState.pointee.refused = 0
        let sink = ResponseSink(limit: options.maxResponseBytes)
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for (name, value) in headers { headerList = curl_slist_append(headerList, "\(name): \(value)") }
        if body != nil || file != nil {
            // No "Expect: 100-continue" round trip (curl adds it for large bodies; see also
            // EXPECT_100_TIMEOUT below), and no form Content-Type unless the caller named one.
            // libcurl 7.88 signs an "Expect:" header even though it removes it from the request,
            // so a signed request must not carry one (the server then computes another signature).
            if sigV4 == nil { headerList = curl_slist_append(headerList, "Expect:") }
            if !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
                headerList = curl_slist_append(headerList, "Content-Type: application/octet-stream")
            }
        }
        // The body's bytes must stay put while curl reads them: one copy, freed after the transfer.
        let upload = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, body?.count ?? 0), alignment: 1)
        defer { upload.deallocate() }
        if let body { body.withUnsafeBytes { upload.copyMemory(from: $0) } }
        // A file is read as curl sends it, a piece at a time, from its start on every attempt.
        let reader = file.map { Unmanaged.passRetained(FileReader($0)) }
        defer { reader?.release() }

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            vt_curl_set_string(curl, CURLOPT_URL, url)
            if method == "HEAD" { vt_curl_set_long(curl, CURLOPT_NOBODY, 1) }
            if let body {
                vt_curl_set_offset(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                vt_curl_set_pointer(curl, CURLOPT_POSTFIELDS, upload.baseAddress)
                vt_curl_set_long(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0)  // send the body without waiting for 100
            } else if let file, let reader {
                vt_curl_set_long(curl, CURLOPT_UPLOAD, 1)
                vt_curl_set_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(file.count))
                vt_curl_set_read_function(curl, CURLOPT_READFUNCTION, { buffer, size, count, userdata in
                    Unmanaged<FileReader>.fromOpaque(userdata!).takeUnretainedValue().read(into: buffer!, size * count)
                })
                vt_curl_set_pointer(curl, CURLOPT_READDATA, reader.toOpaque())
                // curl rewinds the body when it sends the request again within one transfer (a
                // reused connection found closed, a refused HTTP/2 stream, a 417 to Expect).
                vt_curl_set_seek_function(curl, CURLOPT_SEEKFUNCTION, { userdata, offset, origin in
                    Unmanaged<FileReader>.fromOpaque(userdata!).takeUnretainedValue().seek(to: offset, origin: origin)
                })
                vt_curl_set_pointer(curl, CURLOPT_SEEKDATA, reader.toOpaque())
                vt_curl_set_long(curl, CURLOPT_EXPECT_100_TIMEOUT_MS, 0)
            }
            if method != "GET" && method != "HEAD" && !(method == "POST" && body != nil) {
                vt_curl_set_string(curl, CURLOPT_CUSTOMREQUEST, method)
            }
            if let sigV4 {
                vt_curl_set_string(curl, CURLOPT_AWS_SIGV4, sigV4.provider)
                vt_curl_set_string(curl, CURLOPT_USERNAME, sigV4.accessKeyID)
                vt_curl_set_string(curl, CURLOPT_PASSWORD, sigV4.secretAccessKey)
            }
            vt_curl_set_long(curl, CURLOPT_NOSIGNAL, 1)  // threads: no SIGALRM for DNS timeouts
            vt_curl_set_long(curl, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
            vt_curl_set_long(curl, CURLOPT_TIMEOUT_MS, max(1, Int((timeout ?? options.totalTimeout) * 1000)))
            // Redirects are followed by get(), which checks each hop against the host policy.
            vt_curl_set_long(curl, CURLOPT_FOLLOWLOCATION, 0)
            // http and https only (no file://, gopher://…); get() checks redirect targets too.
            vt_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, "http,https")
            vt_curl_set_string(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            vt_curl_set_long(curl, CURLOPT_SSL_VERIFYPEER, 1)
            vt_curl_set_long(curl, CURLOPT_SSL_VERIFYHOST, 2)
            // HTTP/2 over TLS where the server offers it (ALPN), HTTP/1.1 otherwise.
            vt_curl_set_long(curl, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            vt_curl_set_offset(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxResponseBytes))
            vt_curl_set_string(curl, CURLOPT_USERAGENT, options.userAgent)
            vt_curl_set_string(curl, CURLOPT_ACCEPT_ENCODING, "")  // whatever curl can decode
            if let headerList { vt_curl_set_pointer(curl, CURLOPT_HTTPHEADER, headerList) }
            vt_curl_set_address_guard(curl, guardState)
            if let share, !pool.withLock({ $0.closed }) {
                vt_curl_use_share(curl, share.pointer)
                // With a shared cache this caps the cache, not the handle (curl_easy_perform copies
                // it to the handle's internal multi, whose default of 4 would close the rest).
                vt_curl_set_long(curl, CURLOPT_MAXCONNECTS, options.maxCachedConnections)
            } else {
                vt_curl_set_long(curl, CURLOPT_FORBID_REUSE, 1)
                vt_curl_set_long(curl, CURLOPT_FRESH_CONNECT, 1)
            }
            vt_curl_set_pointer(curl, CURLOPT_ERRORBUFFER, errors.baseAddress)
            vt_curl_set_write_function(curl, CURLOPT_WRITEFUNCTION, { data, size, count, userdata in
                let sink = Unmanaged<ResponseSink>.fromOpaque(userdata!).takeUnretainedValue()
                return sink.append(data!, size * count) ? size * count : 0  // 0 aborts the transfer
            })
            vt_curl_set_pointer(curl, CURLOPT_WRITEDATA, sinkPointer.toOpaque())
            vt_curl_set_write_function(curl, CURLOPT_HEADERFUNCTION, { data, size, count, userdata in
                let sink = Unmanaged<ResponseSink>.fromOpaque(userdata!).takeUnretainedValue()
                sink.header(data!, size * count)
                return size * count
            })
            vt_curl_set_pointer(curl, CURLOPT_HEADERDATA, sinkPointer.toOpaque())
            let code = curl_easy_perform(curl)
            vt_curl_set_pointer(curl, CURLOPT_ERRORBUFFER, nil)  // the buffer dies with this closure
            return code
        }

        if code != CURLE_OK {
            // The file being sent could not be read: the caller's file, not the server or the network.
            if let failure = reader?.takeUnretainedValue().failure { throw HTTPClientError.unreadableBody(failure) }
            if guardState.pointee.refused != 0 {
                let address = withUnsafeBytes(of: &guardState.pointee.refused_address) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                throw HTTPClientError.refused("\(HostPolicy.origin(of: url) ?? url) resolves to an internal address (\(address))")
            }
            reusable = code != CURLE_OUT_OF_MEMORY
            let detail = errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            switch code {
            case CURLE_OPERATION_TIMEDOUT: throw HTTPClientError.timedOut(url)
            case CURLE_FILESIZE_EXCEEDED: throw HTTPClientError.tooLarge(limit: options.maxResponseBytes)
            case CURLE_WRITE_ERROR where sink.overflowed: throw HTTPClientError.tooLarge(limit: options.maxResponseBytes)
            case CURLE_TOO_MANY_REDIRECTS: throw HTTPClientError.tooManyRedirects
            case CURLE_UNSUPPORTED_PROTOCOL: throw HTTPClientError.unsupportedURL(message)
            default: throw HTTPClientError.transport(message)
            }
        }
        if let key = HostPolicy.origin(of: url) { lastUsed.withLock { $0[key] = .now } }
        var status = 0
        vt_curl_get_long(curl, CURLINFO_RESPONSE_CODE, &status)
        var redirect: UnsafeMutablePointer<CChar>?
        vt_curl_get_string(curl, CURLINFO_REDIRECT_URL, &redirect)
        return HTTPClientResponse(status: status, headers: sink.headers, body: sink.body, url: url,
                                  redirectURL: redirect.map { String(cString: $0) })
    }

    /// An easy handle and the share it joins (nil: a connection of its own).
    private func takeHandle() throws -> (Handle, SharedCaches?) {
        let (idle, share) = pool.withLock { state -> (Handle?, SharedCaches?) in
            state.lent += 1
            return (state.idle.popLast(), state.share)
        }
        if let idle {
            curl_easy_reset(idle.curl)  // options back to defaults; the shared caches stay
            return (idle, share)
        }
        guard let handle = Handle() else {
            giveBack(nil, reusable: false)
            throw HTTPClientError.transport("curl_easy_init failed")
        }
        return (handle, share)
    }

    private func giveBack(_ handle: Handle?, reusable: Bool) {
        let kept = pool.withLock { state -> Bool in
            guard reusable, let handle, state.share != nil, !state.closed else { return false }
            state.idle.append(handle)
            state.lent -= 1
            return true
        }
        if kept { return }
        // Destroyed while still counted as lent, so a shutdown or another handle's return cannot
        // destroy the share under this cleanup (it hung a test run: a freed mutex, locked).
        handle?.destroy()
        let orphanedShare = pool.withLock { state -> SharedCaches? in
            state.lent -= 1
            guard state.closed, state.lent == 0, let share = state.share else { return nil }
            state.share = nil
            return share
        }
        if let orphanedShare { vt_curl_share_destroy(orphanedShare.pointer) }
    }
}

/// The share handle, passed between threads under HTTPClient's mutex (libcurl locks its insides).
private struct SharedCaches: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<vt_curl_share>
}

/// An easy handle and the address guard its open-socket callback writes to. Used by one thread at
/// a time (taken from and returned to HTTPClient's idle list under its mutex).
private final class Handle: @unchecked Sendable {
    let curl: UnsafeMutableRawPointer
    let guardState: UnsafeMutablePointer<vt_address_guard>

    init?() {
        guard let curl = curl_easy_init() else { return nil }
        self.curl = curl
        guardState = .allocate(capacity: 1)
        guardState.initialize(to: vt_address_guard())
    }

    func destroy() {
        curl_easy_cleanup(curl)  // detaches from the share; its connections stay in the cache
        guardState.deallocate()
    }
}

public struct HTTPClientResponse: Sendable {
    public let status: Int
    /// Header names lower-cased; of the final response after redirects.
    public let headers: [String: String]
    public let body: [UInt8]
    /// Where the body came from, after redirects.
    public let url: String
    /// The Location of a redirect (resolved against `url`), which get() checks and follows.
    public var redirectURL: String? = nil
}

public enum HTTPClientError: Error, Equatable, CustomStringConvertible {
    case unsupportedURL(String)
    case timedOut(String)
    case tooLarge(limit: Int)
    case tooManyRedirects
    case transport(String)
    /// The request's body file could not be read as it was sent (UploadFile).
    case unreadableBody(String)
    /// Not fetched: the address is outside the allowed hosts or resolves to an internal address.
    case refused(String)

    public var description: String {
        switch self {
        case .unsupportedURL(let url): return "only http and https addresses can be fetched (\(url))"
        case .timedOut: return "the server took too long to answer"
        case .tooLarge(let limit): return "the response was larger than \(limit / (1024 * 1024)) MB"
        case .tooManyRedirects: return "too many redirects"
        case .transport(let message): return message
        case .unreadableBody(let reason): return "the file being sent could not be read: \(reason)"
        case .refused(let reason): return "refused: \(reason)"
        }
    }
}

/// Collects one transfer's body and headers; touched only by the thread running the transfer.
/// A request body read from a file as it is sent: `count` bytes from `offset` of `descriptor`,
/// which the caller keeps open until the request returns.
public struct UploadFile: Sendable {
    public let descriptor: Int32
    public let offset: Int
    public let count: Int

    public init(descriptor: Int32, offset: Int, count: Int) {
        (self.descriptor, self.offset, self.count) = (descriptor, offset, count)
    }
}

/// curl's READFUNCTION and SEEKFUNCTION for an UploadFile: pread from where the last piece ended.
private final class FileReader: @unchecked Sendable {
    // @unchecked: used by the one transfer that owns it.
    let file: UploadFile
    var sent = 0
    /// Why the file could not be read, once it could not.
    var failure: String?

    init(_ file: UploadFile) { self.file = file }

    func read(into buffer: UnsafeMutablePointer<CChar>, _ room: Int) -> Int {
        let wanted = min(room, file.count - sent)
        guard wanted > 0 else { return 0 }
        while true {
            let n = pread(file.descriptor, buffer, wanted, off_t(file.offset + sent))
            if n < 0 && errno == EINTR { continue }
            // A file that ends early, or fails: curl aborts the transfer rather than send less.
            guard n > 0 else {
                failure = n == 0 ? "it ended \(file.count - sent) bytes early" : String(cString: strerror(errno))
                return Int(CURL_READFUNC_ABORT)
            }
            sent += n
            return n
        }
    }

    func seek(to offset: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, offset >= 0, offset <= curl_off_t(file.count) else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        sent = Int(offset)
        return Int32(CURL_SEEKFUNC_OK)
    }
}

private final class ResponseSink: @unchecked Sendable {
    let limit: Int
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    var overflowed = false

    init(limit: Int) { self.limit = limit }

    func append(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Bool {
        guard body.count + count <= limit else {
            overflowed = true
            return false
        }
        data.withMemoryRebound(to: UInt8.self, capacity: count) { body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count)) }
        return true
    }

    func header(_ data: UnsafeMutablePointer<CChar>, _ count: Int) {
        let line = data.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }.trimmingCharacters(in: .whitespacesAndNewlines)
        // A new status line starts the headers of the next response (after a redirect or 100).
        if line.hasPrefix("HTTP/") { headers = [:]; return }
        guard let colon = line.firstIndex(of: ":") else { return }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
}

/// A counting semaphore per host.
private final class HostSlots: Sendable {
    private let counts = Waitable<[String: Int]>([:])

    func withSlot<T>(_ host: String, limit: Int, _ body: () throws -> T) throws -> T {
        try withSlot(host, limit: limit, deadline: nil, body)!
    }

    /// nil when no slot came free before `deadline`.
    func withSlot<T>(_ host: String, limit: Int, deadline: ContinuousClock.Instant?, _ body: () throws -> T) throws -> T? {
        let take = { (counts: inout [String: Int]) -> Bool? in
            guard counts[host, default: 0] < limit else { return nil }
            counts[host, default: 0] += 1
            return true
        }
        if let deadline {
            guard counts.wait(for: take, timeout: max(.zero, deadline - .now)) != nil else { return nil }
        } else {
            _ = counts.wait(for: take)
        }
        defer { counts.change { $0[host, default: 1] -= 1 } }
        return try body()
    }
}
