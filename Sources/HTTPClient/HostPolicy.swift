import Foundation

/// Where a client may fetch from: a list of hosts, each with the schemes allowed and optionally a
/// port. A photo provider declares its image hosts this way (Flickr: https on *.staticflickr.com),
/// and `HTTPClient.get(_:hosts:)` checks the first address and every redirect against it.
public struct HostPolicy: Sendable, Equatable, CustomStringConvertible {
    public struct Host: Sendable, Equatable {
        /// "live.staticflickr.com", or "*.staticflickr.com" for any name below that domain (never
        /// the bare domain itself, and never a look-alike such as "evilstaticflickr.com").
        public var name: String
        public var schemes: Set<String>
        /// nil: the scheme's default port only.
        public var port: Int?

        public init(_ name: String, schemes: Set<String> = ["https"], port: Int? = nil) {
            self.name = name.lowercased()
            self.schemes = schemes
            self.port = port
        }
    }

    public var hosts: [Host]

    public init(_ hosts: [Host]) { self.hosts = hosts }

    /// Exactly the origin of `address` (scheme, host and port), e.g. a provider at a custom API URL.
    public static func sameOrigin(as address: String) -> HostPolicy {
        guard let url = URL(string: address), let scheme = url.scheme?.lowercased(), let host = url.host else { return HostPolicy([]) }
        return HostPolicy([Host(host, schemes: [scheme], port: url.port)])
    }

    public func admits(_ address: String) -> Bool {
        guard let url = URL(string: address), let scheme = url.scheme?.lowercased(), let rawHost = url.host?.lowercased(),
              !rawHost.isEmpty, url.user == nil, url.password == nil else { return false }
        let host = rawHost.hasSuffix(".") ? String(rawHost.dropLast()) : rawHost
        let port = url.port ?? Self.defaultPort(scheme)
        return hosts.contains { rule in
            guard rule.schemes.contains(scheme), port == (rule.port ?? Self.defaultPort(scheme)) else { return false }
            if rule.name.hasPrefix("*.") { return host.hasSuffix(rule.name.dropFirst()) && host.count > rule.name.count - 1 }
            return host == rule.name
        }
    }

    public var description: String {
        hosts.map { rule in
            let schemes = rule.schemes.sorted().joined(separator: "|")
            return "\(schemes)://\(rule.name)\(rule.port.map { ":\($0)" } ?? "")"
        }.joined(separator: ", ")
    }

    /// scheme://host:port with the port always written, so "http://a" and "http://a:80" compare equal.
    public static func origin(of address: String) -> String? {
        guard let url = URL(string: address), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
              !host.isEmpty else { return nil }
        let port = url.port ?? defaultPort(scheme)
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed):\(port)"
    }

    static func defaultPort(_ scheme: String) -> Int { scheme == "https" ? 443 : scheme == "http" ? 80 : -1 }
}
