#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Log
import Synchronization
import Testing
@testable import HTTPServer

/// A reverse proxy nobody listed in TRUSTED_PROXIES, and IPv6 clients: the per-address limits
/// as an operator meets them (issue 29).
@Suite(.serialized) struct ProxyLimitTests {
    /// One request on its own connection, as nginx's default upstream (HTTP/1.0) sends it; the
    /// status, Retry-After, and how the connection ended ("eof", or the error: a reset shows here).
    static func proxiedRequest(port: Int, client: String) -> (status: Int, retryAfter: String?, ending: String) {
        guard let connection = try? TestClient(port: port, timeout: 5) else { return (0, nil, "connect failed") }
        do {
            try connection.send("GET /hello HTTP/1.0\r\nHost: photos.example.org\r\nX-Forwarded-For: \(client)\r\nX-Forwarded-Proto: https\r\n\r\n")
            let response = try connection.readResponse()
            while try connection.fill() {}
            return (response.status, response.headers["Retry-After"], "eof")
        } catch {
            return (0, nil, "\(error)")
        }
    }

    /// 2,000 requests a second through an untrusted proxy (every one from 127.0.0.1, a new
    /// connection each, with X-Forwarded-For): those past the address's rate get a clear 503 with
    /// Retry-After, none is reset or left without an answer, and the log says once, at warning,
    /// which setting to change.
    @Test func anUntrustedProxyAt2000RequestsASecondGets503sAndOneWarning() throws {
        let t = try TestServer()  // the defaults: 100 new connections a second after a burst of 500
        let lines = Mutex<[String]>([])
        let port = t.port
        let stop = Logger.observe { line in if line.contains("port \(port)") { lines.withLock { $0.append(line) } } }
        defer { stop() }

        let total = 2000, threads = 20
        let results = Mutex<[(status: Int, retryAfter: String?, ending: String)]>([])
        let start = Date().addingTimeInterval(0.05)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var mine: [(status: Int, retryAfter: String?, ending: String)] = []
            for i in stride(from: thread, to: total, by: threads) {
                // Request i is due at i / 2000 s: 2,000 a second, spread evenly.
                let wait = start.addingTimeInterval(Double(i) / 2000).timeIntervalSinceNow
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
                mine.append(Self.proxiedRequest(port: port, client: "198.51.100.\(i % 250 + 1)"))
            }
            results.withLock { $0 += mine }
        }
        let elapsed = Date().timeIntervalSince(start)
        let all = results.withLock { $0 }
        #expect(all.count == total)
        let served = all.filter { $0.status == 200 }.count
        let refused = all.filter { $0.status == 503 }
        #expect(served + refused.count == total, "other answers: \(all.filter { $0.status != 200 && $0.status != 503 }.prefix(5))")
        #expect(all.allSatisfy { $0.ending == "eof" }, "\(all.filter { $0.ending != "eof" }.prefix(5))")
        // The burst (500) and the rate (100 a second over however long the requests took: about a
        // second, longer on a busy machine) were served; the rest were told to wait. The bound comes
        // from the measured time, so a slow run is judged by the same rule, not by the clock.
        let allowed = 500 + Int((100 * elapsed).rounded(.up)) + 20
        #expect(served >= 500 && served <= allowed, "served \(served) in \(elapsed) s (at most \(allowed))")
        #expect(refused.count >= total - allowed, "refused \(refused.count) in \(elapsed) s")
        #expect(refused.allSatisfy { $0.retryAfter == "1" })
        #expect(t.server.heldOverShare == 0)
        #expect(eventually { t.server.answeredPastRate == 0 })

        let warnings = lines.withLock { $0 }.filter { $0.contains(" warning ") }
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("127.0.0.1 sent X-Forwarded-For but is not a trusted proxy") == true)
        #expect(warnings.first?.contains("set TRUSTED_PROXIES=127.0.0.1") == true)
        // The refusals themselves are summed up at notice, at most once a second.
        let notices = lines.withLock { $0 }.filter { $0.contains(" notice ") && $0.contains("answered") }
        // Once a second over however long the run took (a busy machine takes longer), and one more
        // for the second the run ended in.
        #expect(!notices.isEmpty && notices.count <= Int(elapsed.rounded(.up)) + 2, "\(notices) in \(elapsed) s")
    }

    /// Listed as trusted, the same proxy is neither limited nor warned about.
    @Test func aTrustedProxyIsNotWarnedAboutOrLimited() throws {
        let t = try TestServer {
            $0.newConnectionsPerSecond = 5; $0.newConnectionBurst = 5; $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")!
        }
        let lines = Mutex<[String]>([])
        let port = t.port
        let stop = Logger.observe { line in if line.contains("port \(port)") { lines.withLock { $0.append(line) } } }
        defer { stop() }
        for i in 0..<30 {
            let result = Self.proxiedRequest(port: port, client: "203.0.113.\(i + 1)")
            #expect(result.status == 200 && result.ending == "eof")
        }
        #expect(lines.withLock { $0 }.isEmpty)
    }

    /// The limits' key: an IPv6 client is its /64 (or the prefix configured), IPv4 is itself.
    @Test func ipv6AddressesAreKeyedByTheirNetwork() {
        func key(_ address: String, _ prefix: Int = 64) -> String { AddressRange.limitKey(address, ipv6Prefix: prefix) }
        // Two addresses of one /64 share a key (a privacy address and the stable one, say).
        #expect(key("2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(key("2001:db8:1:2:a1b2:c3d4:e5f6:7788") == "2001:db8:1:2::/64")
        #expect(key("2001:DB8:1:2:0:0:0:ff") == "2001:db8:1:2::/64")
        // The next /64 is someone else.
        #expect(key("2001:db8:1:3::1") == "2001:db8:1:3::/64")
        // Other prefixes: a /56 puts the neighbouring /64s together; 128 is each address.
        #expect(key("2001:db8:1:2::1", 56) == key("2001:db8:1:3::1", 56))
        #expect(key("2001:db8:1:2::1", 56) == "2001:db8:1::/56")
        #expect(key("2001:db8:1:2::1", 128) == "2001:db8:1:2::1")
        #expect(key("2001:db8:1:2::1", 128) != key("2001:db8:1:2::2", 128))
        #expect(key("2001:db8:1:2:8000::1", 65) == "2001:db8:1:2:8000::/65")
        // IPv4 (and IPv4 as a dual-stack socket reports it) is the address itself.
        #expect(key("192.0.2.7") == "192.0.2.7")
        #expect(key("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(key("::1") == "::/64")
        #expect(key("not an address") == "not an address")

        // The connection rate per key: two addresses of one /64 draw from one bucket.
        var rates = ConnectionRates(rate: 1, burst: 2)
        let t0 = ContinuousClock.now
        let taken = ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::3", "2001:db8:1:3::1"].map { rates.take(key($0), now: t0) }
        #expect(taken == [true, true, false, true])
    }

    /// Over real IPv6 loopback (where the machine has ::1): the requests see their network as
    /// `remoteNetwork`, and the per-address share counts ::1 under its /64 while an IPv4 client
    /// keeps its own.
    @Test func ipv6ClientsAreCountedByTheirNetworkOverLoopback() throws {
        var probe = sockaddr_in6()
        probe.sin6_family = sa_family_t(AF_INET6)
        probe.sin6_addr = in6addr_loopback
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        let bindable = withUnsafePointer(to: &probe) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        } == 0
        close(fd)
        try #require(bindable, "this machine has no ::1")

        let t = try TestServer({ $0.host = "::"; $0.maxConnectionsPerAddress = 2; $0.overShareHold = 0 }, router: { router in
            router.get("/network") { request in .text(request.remoteAddress + " " + request.remoteNetwork) }
        })
        func connect6() throws -> Int32 {
            let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(t.port).bigEndian)
            address.sin6_addr = in6addr_loopback
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
            guard connected == 0 else { close(fd); throw TestClient.Failure(description: "connect to [::1]: errno \(errno)") }
            return fd
        }
        func exchange(_ fd: Int32, _ request: String) -> String {
            _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var reply: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                reply += chunk[0..<n]
                if String(decoding: reply, as: UTF8.self).contains("::/64") { break }
            }
            return String(decoding: reply, as: UTF8.self)
        }
        let first = try connect6(), second = try connect6()
        defer { close(first); close(second) }
        #expect(exchange(first, "GET /network HTTP/1.1\r\nHost: x\r\n\r\n").hasSuffix("::1 ::/64"))
        #expect(exchange(second, "GET /network HTTP/1.1\r\nHost: x\r\n\r\n").hasSuffix("::1 ::/64"))
        #expect(eventually { t.server.openConnections == 2 })
        // The network's share is taken: a third connection from it is refused…
        let third = try connect6()
        let refused = exchange(third, "GET /network HTTP/1.1\r\nHost: x\r\n\r\n")
        close(third)
        #expect(refused.isEmpty, "\(refused)")
        // …while an IPv4 client on the same dual-stack listener has its own.
        #expect(try TestClient.get("/network", port: t.port).text == "127.0.0.1 127.0.0.1")
    }
}
