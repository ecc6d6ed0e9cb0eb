/// One parsed request. The target is kept as sent; `path` is its path part, still percent-encoded, so
/// that an encoded slash (%2F) can never be mistaken for a separator.
public struct HTTPRequest: Sendable {
    public var method: String
    public var target: String
    public var path: String
    public var query: String?
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    /// The body, unless it was `spooled`.
    public var body: [UInt8]
    /// The body of an upload route that spools (HTTPLimits.Upload.spooled), on disk; `body` is
    /// then empty.
    public var spooled: SpooledBody?
    /// A large upload's share of the server's UploadBudget, held as long as the request is.
    public var uploadReservation: UploadBudget.Reservation?
    /// Path parameters filled in by the router (`/pins/:id` → ["id": "42"]), percent-decoded.
    public var parameters: [String: String] = [:]
    /// The peer's address ("127.0.0.1"), set by the connection.
    public var remoteAddress: String = ""
    /// What per-address limits should count this client under: `remoteAddress`, or for IPv6 its
    /// network ("2001:db8:1:2::/64", ServerConfiguration.ipv6PrefixLength; AddressRange.limitKey).
    public var remoteNetwork: String = ""
    /// The peer is one of TRUSTED_PROXIES: its X-Forwarded-* headers say what the client sent.
    /// From any other peer they are the client's own words, and read for nothing.
    public var fromTrustedProxy = false

    public init(method: String, target: String, version: HTTPVersion = .http11,
                headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        let (path, query) = HTTPRequest.split(target: target)
        self.path = path
        self.query = query
    }

    /// RFC 9112 §9.3: HTTP/1.1 stays open unless "close" is sent; HTTP/1.0 closes unless "keep-alive".
    public var keepAlive: Bool {
        if headers.hasToken("close", in: "Connection") { return false }
        if version == .http10 { return headers.hasToken("keep-alive", in: "Connection") }
        return true
    }

    public var bodyString: String { String(decoding: body, as: UTF8.self) }

    /// The body's size wherever it is.
    public var bodyCount: Int { spooled?.count ?? body.count }

    /// Query items of the target, form-decoded ("+" is a space). Later duplicates are kept in order.
    public var queryItems: [(name: String, value: String)] {
        guard let query else { return [] }
        return FormDecoding.pairs(query)
    }

    /// The first value of `name` in the query, as `queryItems` has it; only that pair is decoded
    /// (a name with no escape and no "+" is compared as it is).
    public func queryValue(_ name: String) -> String? {
        guard let query else { return nil }
        for part in query.utf8.split(separator: UInt8(ascii: "&")) {
            let equals = part.firstIndex(of: UInt8(ascii: "="))
            let key = part[..<(equals ?? part.endIndex)]
            let plain = !key.contains { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }
            guard plain ? key.elementsEqual(name.utf8) : (FormDecoding.percentDecode(Substring(key), plusAsSpace: true) ?? "") == name
            else { continue }
            guard let equals else { return "" }
            return FormDecoding.percentDecode(Substring(part[part.index(after: equals)...]), plusAsSpace: true) ?? ""
        }
        return nil
    }

    /// Body of an application/x-www-form-urlencoded form.
    public var formItems: [(name: String, value: String)] { FormDecoding.pairs(bodyString) }

    public func formValue(_ name: String) -> String? {
        formItems.first { $0.name == name }?.value
    }

    static func split(target: String) -> (String, String?) {
        var t = Substring(target)
        // absolute-form (RFC 9112 §3.2.2): keep only the path and query.
        if !t.hasPrefix("/"), let colon = t.firstIndex(of: ":"), t[colon...].hasPrefix("://") {
            let rest = t[t.index(colon, offsetBy: 3)...]
            t = rest.firstIndex(where: { $0 == "/" || $0 == "?" }).map { rest[$0...] } ?? "/"
            if t.hasPrefix("?") { t = "/" + t }
        }
        if let q = t.firstIndex(of: "?") {
            return (String(t[..<q]), String(t[t.index(after: q)...]))
        }
        return (String(t), nil)
    }
}

public struct HTTPVersion: Sendable, Equatable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public static let http10 = HTTPVersion(major: 1, minor: 0)
    public static let http11 = HTTPVersion(major: 1, minor: 1)
    public var description: String { "HTTP/\(major).\(minor)" }
}

/// Percent-decoding for paths and application/x-www-form-urlencoded data.
public enum FormDecoding {
    public static func pairs(_ s: String) -> [(name: String, value: String)] {
        s.split(separator: "&", omittingEmptySubsequences: true).map { part in
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecode(kv[0], plusAsSpace: true) ?? ""
            let value = kv.count > 1 ? (percentDecode(kv[1], plusAsSpace: true) ?? "") : ""
            return (name, value)
        }
    }

    /// Nil when an escape is malformed or the result is not UTF-8.
    public static func percentDecode(_ s: some StringProtocol, plusAsSpace: Bool = false) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var it = s.utf8.makeIterator()
        while let c = it.next() {
            if c == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else {
                    return nil
                }
                out.append(hv << 4 | lv)
            } else if plusAsSpace && c == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else {
                out.append(c)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
