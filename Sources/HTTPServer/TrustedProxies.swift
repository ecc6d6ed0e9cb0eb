#if canImport(Glibc)
import Glibc
#endif

/// Who the client is when a reverse proxy stands in front (TRUSTED_PROXIES). The peer's address
/// is the proxy's, for every person: throttling by it locks everyone out at once, and logs and
/// metrics say nothing. Forwarding headers are honoured only from peers listed here, and read from
/// the right: each trusted proxy appends the address it saw, so the rightmost address that is not
/// one of ours was written by our own proxy and is the client; anything to its left came from the
/// client and is ignored.
public struct TrustedProxies: Sendable, Equatable {
    public let ranges: [AddressRange]

    public init(_ ranges: [AddressRange] = []) { self.ranges = ranges }

    /// "10.0.0.0/8, 192.168.1.5, fd00::/8" → ranges; nil when any part is not an address or CIDR.
    public init?(parsing text: String) {
        var ranges: [AddressRange] = []
        for part in text.split(separator: ",") {
            let item = part.trimmingCharacters(in: " \t")
            if item.isEmpty { continue }
            guard let range = AddressRange(item) else { return nil }
            ranges.append(range)
        }
        self.ranges = ranges
    }

    public func trusts(_ address: String) -> Bool {
        guard let bytes = AddressRange.bytes(of: address) else { return false }
        return ranges.contains { $0.contains(bytes) }
    }

    /// The client's address for a request that arrived from `peer`: from `X-Forwarded-For` alone.
    /// RFC 7239 `Forwarded` is never read: the proxies people run (nginx, Caddy, Traefik, HAProxy)
    /// write X-Forwarded-For but pass a client's own `Forwarded` through untouched, so reading it
    /// let any client choose the address every per-address limit counts (docs/admin.md).
    public func clientAddress(peer: String, headers: HTTPHeaders) -> String {
        guard !ranges.isEmpty, trusts(peer) else { return peer }
        var hops: [String] = []
        for value in headers.values("X-Forwarded-For") {
            hops += value.split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        }
        var client = peer
        for hop in hops.reversed().prefix(32) {
            guard AddressRange.bytes(of: hop) != nil else { return client }  // not an address: stop at the last good one
            client = hop
            if !trusts(hop) { return hop }
        }
        return client
    }
}

/// An IPv4 or IPv6 address with a prefix length. IPv4-mapped IPv6 peers (::ffff:a.b.c.d, how a
/// dual-stack socket reports IPv4 clients) match IPv4 ranges.
public struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    let network: [UInt8]
    let prefix: Int
    public let description: String

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.bytes(of: String(parts[0])) else { return nil }
        let bits = bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard parts[1].count <= 3, let n = Int(parts[1]), (0...bits).contains(n) else { return nil }
            prefix = n
        }
        network = bytes
        self.prefix = prefix
        description = text
    }

    /// What an address's per-address limits are kept under: an IPv4 address itself; for IPv6 its
    /// first `ipv6Prefix` bits ("2001:db8:1:2::/64"). One IPv6 client is handed a whole /64 and
    /// may use any address in it (privacy addresses, RFC 8981, change by themselves), so a limit
    /// per address would be one per guess. IPv4-mapped addresses count as the IPv4 address;
    /// anything that is not an address is its own key.
    public static func limitKey(_ address: String, ipv6Prefix: Int) -> String {
        // The common case first: the accept path calls this for every connection.
        guard address.utf8.contains(UInt8(ascii: ":")) else { return address }
        guard var bytes = bytes(of: address) else { return address }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let prefix = min(128, max(0, ipv6Prefix))
        for i in bytes.indices {
            let keep = min(8, max(0, prefix - i * 8))
            bytes[i] &= UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        var v6 = in6_addr()
        withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count)) != nil else { return address }
        let network = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return prefix == 128 ? network : "\(network)/\(prefix)"
    }

    func contains(_ address: [UInt8]) -> Bool {
        guard address.count == network.count else { return false }
        var remaining = prefix
        for i in network.indices where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if address[i] & mask != network[i] & mask { return false }
            remaining -= take
        }
        return true
    }

    /// 4 bytes for IPv4 (and IPv4-mapped IPv6), 16 for IPv6; nil for anything else.
    static func bytes(of text: String) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes[12...]) }
            return bytes
        }
        return nil
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var s = self
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
