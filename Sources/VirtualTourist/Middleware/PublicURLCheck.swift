import Foundation
import HTTPServer
import Log
import Synchronization

/// Says in the log when a request arrives under another scheme or host than PUBLIC_URL names.
/// The links the app sends out (invitations, share links, exports) are built from PUBLIC_URL, and
/// https there is what makes cookies Secure and turns on HSTS: left at its example value behind a
/// TLS proxy, every one of those is silently wrong. Once per origin that arrived, for the first
/// `maxOrigins` of them, because a setting is wrong for every request and one line says it; the
/// line names what arrived, so a scanner's odd Host reads as such, and a stranger's odd Host
/// cannot use up the line a real misconfiguration needs. X-Forwarded-Proto and -Host are read only
/// from TRUSTED_PROXIES (from anyone else they are the client's own words: the request is not
/// compared at all, and the server's own warning names the untrusted proxy).
struct PublicURLCheck: Middleware {
    let scheme: String
    let host: String
    private let warned: Warned
    private let logger = Logger(label: "virtual-tourist")

    /// Origins warned about so far.
    private final class Warned: Sendable {
        let origins = Mutex<Set<String>>([])
        let full = Atomic<Bool>(false)
    }
    static let maxOrigins = 8

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
        if !warned.full.load(ordering: .relaxed), !Self.probes.contains(request.path),
           let arrived = Self.arrived(request), arrived.scheme != scheme || arrived.host != host,
           warned.origins.withLock({ origins in
               guard origins.count < Self.maxOrigins, origins.insert("\(arrived.scheme)://\(arrived.host)").inserted else { return false }
               if origins.count == Self.maxOrigins { warned.full.store(true, ordering: .relaxed) }
               return true
           }) {
            // Troubleshooting: but PUBLIC_URL is
            logger.warning("""
                a request arrived for \(arrived.scheme)://\(arrived.host) but PUBLIC_URL is \(scheme)://\(host): \
                links the app sends (invitations, share links) use PUBLIC_URL, and only https there makes cookies \
                Secure and sends HSTS. If people reach the app at \(arrived.scheme)://\(arrived.host), set \
                PUBLIC_URL to it (behind a proxy, the address people type). Said once per address per start.
                """)
        }
        return try next(request)
    }
}
