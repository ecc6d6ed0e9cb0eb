import Foundation
import HTTPServer
import Log
import Synchronization

/// Says in the log when a request arrives under another scheme or host than PUBLIC_URL names.
/// The links the app sends out (invitations, share links, exports) are built from PUBLIC_URL, and
/// https there is what makes cookies Secure and turns on HSTS: left at its example value behind a
/// TLS proxy, every one of those is silently wrong. Once per origin that arrived, because a setting
/// is wrong for every request and one line says it; the line names what arrived, so a scanner's odd
/// Host reads as such. A stranger chooses the Host (a proxy passes it on) but not the scheme: a
/// scheme that differs has a line of its own that no Host can use up, and the lines for other
/// hosts, `maxOrigins` at most, start again every hour, so a wrong host in PUBLIC_URL is said
/// within the hour whatever strangers send. X-Forwarded-Proto and -Host are read only
/// from TRUSTED_PROXIES (from anyone else they are the client's own words: the request is not
/// compared at all, and the server's own warning names the untrusted proxy).
struct PublicURLCheck: Middleware {
    let scheme: String
    let host: String
    private let warned: Warned
    private let logger = Logger(label: "virtual-tourist")

    /// Origins warned about: schemes for good, hosts in this hour's window.
    private final class Warned: Sendable {
        struct Seen {
            var schemes: Set<String> = []
            var hosts: Set<String> = []
            var since = ContinuousClock.now
        }
        let seen = Mutex(Seen())
        /// Host and forwarded headers as sent, already found to match PUBLIC_URL: the usual
        /// request is recognised without parsing a URL (a few at most: one per proxy spelling).
        let matching = Mutex<Set<String>>([])
    }
    static let maxOrigins = 8
    static let window: Duration = .seconds(3600)

    /// Whether this arrival gets a line: a scheme not said yet, or a host not said in this window
    /// while the window has room.
    private func firstTime(_ arrived: (scheme: String, host: String)) -> Bool {
        let now = ContinuousClock.now
        return warned.seen.withLock { seen in
            if arrived.scheme != scheme { return seen.schemes.insert(arrived.scheme).inserted }
            if now - seen.since >= Self.window { seen.hosts = []; seen.since = now }
            guard seen.hosts.count < Self.maxOrigins else { return false }
            return seen.hosts.insert(arrived.host).inserted
        }
    }

    /// nil when PUBLIC_URL is unset or names no host (then nothing is compared).
    init?(publicURL: String?) {
        guard let publicURL, let url = URLComponents(string: publicURL), let scheme = url.scheme?.lowercased(),
              let host = url.host, !host.isEmpty else { return nil }
        self.scheme = scheme
        self.host = Self.authority(host: host, port: url.port, scheme: scheme)
        warned = Warned()
    }

    /// host[:port] in lower case, the scheme's default port left out (RFC 9110 §4.2.3: an authority
    /// with the default port and one without it name the same origin).
    static func authority(host: String, port: Int?, scheme: String) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        let host = host.lowercased()
        guard let port, port != defaultPort else { return host }
        return "\(host):\(port)"
    }

    /// The scheme and authority the client used: the proxy's X-Forwarded-Proto and -Host when it
    /// sent them (the first value: the one the client-facing proxy set), the Host header otherwise.
    static func arrived(_ request: HTTPRequest) -> (scheme: String, host: String)? {
        let forwarded = request.headers["X-Forwarded-Proto"] != nil || request.headers["X-Forwarded-Host"] != nil
        if forwarded && !request.fromTrustedProxy { return nil }
        func first(_ name: String) -> String? {
            guard let value = request.headers[name] else { return nil }
            let part = value.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            return part.isEmpty ? nil : part
        }
        let scheme = first("X-Forwarded-Proto")?.lowercased() ?? "http"
        guard let sent = first("X-Forwarded-Host") ?? first("Host"),
              let parsed = URLComponents(string: "\(scheme)://\(sent)"), let host = parsed.host, !host.isEmpty else { return nil }
        return (scheme, authority(host: host, port: parsed.port, scheme: scheme))
    }

    /// Probes come from the container's own healthcheck or a monitor on loopback, not from people.
    static let probes: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        let sent = request.fromTrustedProxy
            ? "\(request.headers["X-Forwarded-Proto"] ?? "")|\(request.headers["X-Forwarded-Host"] ?? "")|\(request.headers["Host"] ?? "")"
            : "|\(request.headers["X-Forwarded-Proto"] == nil && request.headers["X-Forwarded-Host"] == nil ? "" : "forwarded")|\(request.headers["Host"] ?? "")"
        if warned.matching.withLock({ $0.contains(sent) }) { return try next(request) }
        if !Self.probes.contains(request.path), let arrived = Self.arrived(request) {
            if arrived.scheme == scheme && arrived.host == host {
                warned.matching.withLock { if $0.count < 16 { $0.insert(sent) } }
            } else if firstTime(arrived) {
                // Troubleshooting: but PUBLIC_URL is
                logger.warning("""
                    a request arrived for \(arrived.scheme)://\(arrived.host) but PUBLIC_URL is \(scheme)://\(host): \
                    links the app sends (invitations, share links) use PUBLIC_URL, and only https there makes cookies \
                    Secure and sends HSTS. If people reach the app at \(arrived.scheme)://\(arrived.host), set \
                    PUBLIC_URL to it (behind a proxy, the address people type). Said once per scheme, and once an hour per host.
                    """)
            }
        }
        return try next(request)
    }
}
