import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 client over a real loopback socket with a cookie jar: enough of a browser to
/// sign up, keep a session and post forms. One connection per request (Connection: close), so a
/// response ends at EOF and the client stays trivially correct.
public final class Browser {
    public let port: Int
    public private(set) var cookies: [String: String] = [:]
    /// Sent as the client address is seen by the server: all loopback here.
    public init(port: Int) { self.port = port }

    public struct Page: CustomStringConvertible {
        public let status: Int
        public let headers: [(name: String, value: String)]
        public let body: String
        /// The body as it came (gzip stays gzip).
        public var bodyBytes: [UInt8] = []

        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
        public func headerValues(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }
        /// The CSRF token of the first form on the page.
        public var csrfToken: String? { body.firstMatch(of: /name="_csrf" value="([^"]*)"/).map { String($0.1) } }
        public var description: String { "\(status) \(body.prefix(300))" }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public func get(_ path: String, headers: [(String, String)] = []) throws -> Page {
        try request("GET", path, headers: headers)
    }

    /// Posts a form; `csrf: true` adds the token of `from` (or of a fresh GET of `path`).
    public func post(_ path: String, form: [(String, String)], headers: [(String, String)] = []) throws -> Page {
        let body = form.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        return try request("POST", path, body: Array(body.utf8),
                           headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers)
    }

    public func request(_ method: String, _ path: String, body: [UInt8] = [], headers: [(String, String)] = []) throws -> Page {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if !cookies.isEmpty {
            head += "Cookie: " + cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") + "\r\n"
        }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        let raw = try exchange(Array(head.utf8) + body)
        let page = try Self.parse(raw)
        for line in page.headerValues("Set-Cookie") { store(cookie: line) }
        return page
    }

    public func clearCookies() { cookies = [:] }
    public func setCookie(_ name: String, _ value: String) { cookies[name] = value }

    private func store(cookie line: String) {
        let attributes = line.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let pair = attributes.first, let eq = pair.firstIndex(of: "=") else { return }
        let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
        let expired = attributes.contains { $0.lowercased() == "max-age=0" }
        cookies[name] = expired || value.isEmpty ? nil : value
    }

    private func exchange(_ bytes: [UInt8]) throws -> [UInt8] {
        let fd = try connectLoopback(port: port, receiveTimeout: 30)
        defer { close(fd) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
            sent += n
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { response += buffer[0..<n]; continue }
            if n == 0 { break }
            if errno == EINTR { continue }
            throw Failure(description: "recv: errno \(errno) after \(response.count) bytes")
        }
        return response
    }

    static func parse(_ raw: [UInt8]) throws -> Page {
        guard let end = raw.firstRange(of: [13, 10, 13, 10]) else {
            throw Failure(description: "no complete response head in \(raw.count) bytes")
        }
        let head = String(decoding: raw[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure(description: "bad status line \(head[0])") }
        let headers = head.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(raw[end.upperBound...])
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased().contains("chunked") }) {
            body = dechunk(body)
        }
        return Page(status: status, headers: headers, body: String(decoding: body, as: UTF8.self), bodyBytes: body)
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [], i = 0
        while let lineEnd = bytes[i...].firstRange(of: [13, 10]) {
            let sizeText = String(decoding: bytes[i..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";")[0]
            guard let size = Int(sizeText, radix: 16), size > 0 else { break }
            let start = lineEnd.upperBound
            out += bytes[start..<min(start + size, bytes.count)]
            i = start + size + 2
            if i >= bytes.count { break }
        }
        return out
    }

    public static func encode(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
