import Testing
@testable import HTTPServer

/// Who the client is behind a proxy: forwarding headers count only from listed proxies, read from
/// the right, so a client cannot name itself by sending the header.
@Suite struct TrustedProxiesTests {
    func headers(_ pairs: (String, String)...) -> HTTPHeaders {
        var h = HTTPHeaders()
        for (name, value) in pairs { h.add(name, value) }
        return h
    }

    @Test func parsesAddressesAndCIDRs() throws {
        let proxies = try #require(TrustedProxies(parsing: "10.0.0.0/8, 192.168.1.5 ,fd00::/8,::1"))
        #expect(proxies.ranges.count == 4)
        for yes in ["10.1.2.3", "192.168.1.5", "fd12::1", "::1", "::ffff:10.9.9.9"] { #expect(proxies.trusts(yes), "\(yes)") }
        for no in ["11.0.0.1", "192.168.1.6", "fe80::1", "2001:db8::1", "", "not an address", "::ffff:11.0.0.1"] { #expect(!proxies.trusts(no), "\(no)") }
        for bad in ["10.0.0.0/33", "fd00::/129", "10.0.0.0/-1", "example.org", "10.0.0.0/8/8", "1.2.3.4/99999999999999999999"] {
            #expect(TrustedProxies(parsing: bad) == nil, "\(bad)")
        }
        #expect(TrustedProxies(parsing: "")?.ranges.isEmpty == true)
    }

    @Test func rightmostUntrustedHopIsTheClient() throws {
        let proxies = try #require(TrustedProxies(parsing: "127.0.0.1, 10.0.0.0/8"))
        // Spoofed entries on the left are ignored: our proxy appended the real peer last.
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("X-Forwarded-For", "6.6.6.6, 203.0.113.5"))) == "203.0.113.5")
        // A chain of our own proxies is walked through.
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("X-Forwarded-For", "203.0.113.5, 10.0.0.7"))) == "203.0.113.5")
        // Several header lines are one list.
        #expect(proxies.clientAddress(peer: "10.0.0.2", headers: headers(("X-Forwarded-For", "1.1.1.1"), ("X-Forwarded-For", "198.51.100.2"))) == "198.51.100.2")
        // An untrusted peer's header is its own say-so.
        #expect(proxies.clientAddress(peer: "203.0.113.9", headers: headers(("X-Forwarded-For", "1.2.3.4"))) == "203.0.113.9")
        // No header: the proxy itself.
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers()) == "127.0.0.1")
        // Garbage stops the walk at the last real address.
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("X-Forwarded-For", "203.0.113.5, <script>"))) == "127.0.0.1")
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("X-Forwarded-For", "<script>, 203.0.113.5"))) == "203.0.113.5")
        // Nothing configured: nothing trusted.
        #expect(TrustedProxies().clientAddress(peer: "127.0.0.1", headers: headers(("X-Forwarded-For", "1.2.3.4"))) == "127.0.0.1")
    }

    /// RFC 7239 Forwarded is never read, even from a trusted proxy: nginx and Caddy pass a
    /// client's own through untouched, so it would let the client pick its address.
    @Test func aForwardedHeaderIsNeverRead() throws {
        let proxies = try #require(TrustedProxies(parsing: "127.0.0.1"))
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("Forwarded", "for=192.0.2.60;proto=https"))) == "127.0.0.1")
        #expect(proxies.clientAddress(peer: "127.0.0.1", headers: headers(("Forwarded", "for=198.51.100.7"), ("X-Forwarded-For", "203.0.113.5")))
                == "203.0.113.5")
    }
}
