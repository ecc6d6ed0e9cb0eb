import CCurl
import Foundation
import Synchronization

/// Outbound HTTP through libcurl, for photo providers and image downloads.
///
/// Each request runs `curl_easy_perform` on the calling thread. Callers are already a bounded set
/// of worker threads, so a bounded set of easy handles is simpler than driving curl's multi
/// interface from Dispatch, and just as concurrent for our handful of transfers; a per-host cap
/// keeps many albums from hammering one server (docs/architecture.md).
public final class HTTPClient: Sendable {
    public struct Options: Sendable {
        public var connectTimeout: Double = 5
        public var totalTimeout: Double = 30
        /// Responses larger than this are aborted while they arrive (never buffered whole).
        public var maxResponseBytes = 8 * 1024 * 1024
        public var maxRedirects = 3
        public var userAgent = "VirtualTourist/1.0 (self-hosted photo map; +https://github.com/virtual-tourist)"
        /// Concurrent requests to one host (across all albums of this instance): about what a
        /// browser opens to a photo CDN over HTTP/2.
        public var perHostConcurrency = 32
        public init() {}
    }

    public let options: Options
    private let hosts = HostSlots()

    public init(options: Options = Options()) {
        _ = HTTPClient.globalInit
        self.options = options
    }

    /// curl_global_init is not thread-safe: run it once, before any transfer.
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    /// GET `url`. Throws for transport failures; HTTP error statuses come back as responses.
    public func get(_ url: String, headers: [String: String] = [:]) throws -> HTTPClientResponse {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = parsed.host, !host.isEmpty else {
            throw HTTPClientError.unsupportedURL(url)
        }
        return try hosts.withSlot(host.lowercased(), limit: options.perHostConcurrency) {
            try perform(url, headers: headers)
        }
    }

    private func perform(_ url: String, headers: [String: String]) throws -> HTTPClientResponse {
        guard let curl = curl_easy_init() else { throw HTTPClientError.transport("curl_easy_init failed") }
        defer { curl_easy_cleanup(curl) }
        let sink = ResponseSink(limit: options.maxResponseBytes)
        let sinkPointer = Unmanaged.passRetained(sink)
        defer { sinkPointer.release() }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for (name, value) in headers { headerList = curl_slist_append(headerList, "\(name): \(value)") }

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            vt_curl_set_string(curl, CURLOPT_URL, url)
            vt_curl_set_long(curl, CURLOPT_NOSIGNAL, 1)  // threads: no SIGALRM for DNS timeouts
            vt_curl_set_long(curl, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
            vt_curl_set_long(curl, CURLOPT_TIMEOUT_MS, Int(options.totalTimeout * 1000))
            vt_curl_set_long(curl, CURLOPT_FOLLOWLOCATION, 1)
            vt_curl_set_long(curl, CURLOPT_MAXREDIRS, options.maxRedirects)
            // http and https only, for the first request and every redirect (no file://, gopher://…).
            vt_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, "http,https")
            vt_curl_set_string(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            vt_curl_set_long(curl, CURLOPT_SSL_VERIFYPEER, 1)
            vt_curl_set_long(curl, CURLOPT_SSL_VERIFYHOST, 2)
            vt_curl_set_offset(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxResponseBytes))
            vt_curl_set_string(curl, CURLOPT_USERAGENT, options.userAgent)
            vt_curl_set_string(curl, CURLOPT_ACCEPT_ENCODING, "")  // whatever curl can decode
            if let headerList { vt_curl_set_pointer(curl, CURLOPT_HTTPHEADER, headerList) }
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
            return curl_easy_perform(curl)
        }

        if code != CURLE_OK {
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
        var status = 0
        vt_curl_get_long(curl, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        vt_curl_get_string(curl, CURLINFO_EFFECTIVE_URL, &effective)
        return HTTPClientResponse(status: status, headers: sink.headers, body: sink.body,
                                  url: effective.map { String(cString: $0) } ?? url)
    }
}

public struct HTTPClientResponse: Sendable {
    public let status: Int
    /// Header names lower-cased; of the final response after redirects.
    public let headers: [String: String]
    public let body: [UInt8]
    /// Where the body came from, after redirects.
    public let url: String
}

public enum HTTPClientError: Error, Equatable, CustomStringConvertible {
    case unsupportedURL(String)
    case timedOut(String)
    case tooLarge(limit: Int)
    case tooManyRedirects
    case transport(String)

    public var description: String {
        switch self {
        case .unsupportedURL(let url): return "only http and https addresses can be fetched (\(url))"
        case .timedOut: return "the server took too long to answer"
        case .tooLarge(let limit): return "the response was larger than \(limit / (1024 * 1024)) MB"
        case .tooManyRedirects: return "too many redirects"
        case .transport(let message): return message
        }
    }
}

/// Collects one transfer's body and headers; touched only by the thread running the transfer.
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
    private let counts = Mutex<[String: Int]>([:])
    private let condition = NSCondition()

    func withSlot<T>(_ host: String, limit: Int, _ body: () throws -> T) throws -> T {
        condition.lock()
        while counts.withLock({ $0[host, default: 0] }) >= limit { condition.wait() }
        counts.withLock { $0[host, default: 0] += 1 }
        condition.unlock()
        defer {
            condition.lock()
            counts.withLock { $0[host, default: 1] -= 1 }
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }
}
