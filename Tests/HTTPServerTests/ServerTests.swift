#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import HTTPServer

/// A real server on port 0, spoken to over loopback.
final class TestServer: @unchecked Sendable {
    let server: HTTPServer
    var port: Int { server.port }
    let streamsClosed = Counter()
    let blockingStarted = Counter()

    init(_ configure: (inout ServerConfiguration) -> Void = { _ in }, router extra: (inout Router) -> Void = { _ in }) throws {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.accessLog = nil
        configure(&configuration)
        var router = Router()
        router.get("/hello") { _ in .text("hello") }
        router.post("/echo") { request in
            HTTPResponse(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: request.body)
        }
        router.get("/path/*rest") { request in .text(request.parameters["rest"] ?? "") }
        router.get("/pins/:id") { request in .text("pin \(request.parameters["id"]!)") }
        router.delete("/pins/:id") { _ in HTTPResponse(status: .noContent) }
        router.get("/slow") { request in
            usleep(UInt32(Int(request.queryValue("ms") ?? "300")! * 1000))
            return .text("slow done")
        }
        router.get("/big") { request in
            let mb = Int(request.queryValue("mb") ?? "8")!
            return HTTPResponse(status: .ok, body: [UInt8](repeating: 0x61, count: mb * 1024 * 1024))
        }
        router.get("/boom") { _ in
            struct Secret: Error { let text = "database password is hunter2" }
            throw Secret()
        }
        extra(&router)
        let started = blockingStarted
        router.get("/blocking") { _ in
            started.add()
            usleep(1_500_000)
            return .text("blocking done")
        }
        let counter = streamsClosed
        router.get("/events") { _ in
            .eventStream(heartbeat: 0.2) { stream in
                stream.onClose { counter.add() }
                stream.send(event: "greeting", data: "line one\nline two", id: "1")
                stream.send(data: "second")
            }
        }
        server = HTTPServer(configuration: configuration, handler: router)
        try server.start()
    }

    deinit { server.shutdown(gracePeriod: 1) }
}

/// A thread-safe counter for closures that run on the server's threads.
final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// Counts this process's open TCP sockets whose local port is `port` (the server side of its
/// connections), from /proc/net/tcp. Unlike a count of all descriptors, it is not disturbed by
/// other tests running in parallel.
func serverSideSockets(port: Int) -> Int {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return -1 }
    let hexPort = String(format: "%04X", port)
    var inodes = Set<String>()
    for line in table.split(separator: "\n").dropFirst() {
        let f = line.split(separator: " ")
        guard f.count > 9, f[1].hasSuffix(":" + hexPort), f[3] != "0A", f[9] != "0" else { continue }
        inodes.insert(String(f[9]))
    }
    // Keep only sockets that are still a descriptor of this process.
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    var open = 0
    for fd in fds {
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
           target.hasPrefix("socket:["), inodes.contains(String(target.dropFirst(8).dropLast())) {
            open += 1
        }
    }
    return open
}

@Suite struct ServerTests {
    /// Regression: the timeout sweep took its clock reading before hopping to the connection's
    /// queue; a request read in between started later than "now", the unsigned difference wrapped,
    /// and a busy keep-alive connection was closed as if it had timed out (wrk saw resets).
    @Test func busyKeepAliveConnectionsSurviveTheTimeoutSweep() throws {
        // A short read timeout makes the sweep run every 50 ms; the idle timeout stays long, since a test
        // thread starved by its neighbours may legitimately pause between requests.
        // Clients connect just before their first request, so none sits silent long enough to be
        // closed for sending nothing.
        let server = try TestServer { $0.requestReadTimeout = 0.5; $0.idleTimeout = 30 }
        let deadline = Date(timeIntervalSinceNow: 3)
        var clients: [TestClient?] = Array(repeating: nil, count: 4)
        var dropped = Set<Int>()
        var served = 0
        while Date() < deadline {
            for i in clients.indices where !dropped.contains(i) {
                if clients[i] == nil { clients[i] = try TestClient(port: server.port) }
                guard let client = clients[i] else { continue }
                do {
                    try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                    #expect(try client.readResponse().status == 200)
                    served += 1
                } catch {
                    Issue.record("connection \(i) dropped after \(served) requests: \(error)")
                    dropped.insert(i)
                }
            }
            if dropped.count == clients.count { break }
        }
        #expect(served > 100)
    }

    @Test func keepAliveServesManyRequestsOnOneConnection() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        for i in 0..<5 {
            try client.send("GET /pins/\(i) HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try client.readResponse()
            #expect(r.status == 200)
            #expect(r.text == "pin \(i)")
            #expect(r.headers["Connection"] == nil)
        }
    }

    @Test func tenPipelinedRequestsInOneWriteAnswerInOrder() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        var text = ""
        for i in 0..<10 {
            // Alternate slow and fast handlers: order must still be request order.
            text += i % 3 == 0 ? "GET /slow?ms=20 HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /pins/\(i) HTTP/1.1\r\nHost: x\r\n\r\n"
        }
        try client.send(text)
        for i in 0..<10 {
            let r = try client.readResponse()
            #expect(r.text == (i % 3 == 0 ? "slow done" : "pin \(i)"))
        }
    }

    /// More than the 16 requests parsed ahead, all in one write: the rest are already buffered when
    /// reading resumes, and no further read event will come for them.
    @Test func fortyPipelinedRequestsInOneWriteAreAllAnswered() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send((0..<40).map { "GET /pins/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
        for i in 0..<40 {
            #expect(try client.readResponse().text == "pin \(i)")
        }
    }

    @Test func bodySplitOverManyWrites() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        let body = (0..<1000).map { UInt8($0 % 251) }
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        for start in stride(from: 0, to: 1000, by: 100) {
            try client.send(Array(body[start..<(start + 100)]))
            usleep(2_000)
        }
        let r = try client.readResponse()
        #expect(r.status == 200)
        #expect(r.body == body)
    }

    @Test func chunkedRequestBody() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n")
        #expect(try client.readResponse().text == "Wikipedia")
    }

    @Test func expectContinue() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        #expect(try client.readUntil("\r\n\r\n").hasPrefix("HTTP/1.1 100 Continue"))
        try client.send("hello")
        #expect(try client.readResponse().text == "hello")
    }

    @Test func expectContinueWithOversizedBodyGets413AtOnce() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 99999999\r\n\r\n")
        #expect(try client.readResponse().status == 413)
        #expect(client.isClosedByPeer())
    }

    @Test func http10AndHead() throws {
        let t = try TestServer()
        let c1 = try TestClient(port: t.port)
        try c1.send("GET /hello HTTP/1.0\r\n\r\n")
        let r1 = try c1.readResponse()
        #expect(r1.text == "hello")
        #expect(r1.headers["Connection"] == "close")
        #expect(c1.isClosedByPeer())

        let c2 = try TestClient(port: t.port)
        try c2.send("HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try c2.readResponse(head: true)
        #expect(head.status == 200)
        #expect(head.headers["Content-Length"] == "5")
        // The next response starts right where the head ended: HEAD sent no body.
        #expect(try c2.readResponse().text == "hello")
    }

    @Test func routerAnswers404And405WithAllow() throws {
        let t = try TestServer()
        #expect(try TestClient.get("/nowhere", port: t.port).status == 404)
        let client = try TestClient(port: t.port)
        try client.send("POST /pins/3 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        let r = try client.readResponse()
        #expect(r.status == 405)
        #expect(r.headers["Allow"] == "GET, DELETE, HEAD")
    }

    @Test func internalErrorsDoNotLeak() throws {
        let t = try TestServer()
        let r = try TestClient.get("/boom", port: t.port)
        #expect(r.status == 500)
        #expect(!r.text.contains("hunter2"))
        #expect(r.text.contains("went wrong"))
    }

    @Test func malformedRequestGets400AndCloseAndServerKeepsServing() throws {
        let t = try TestServer()
        let bad = try TestClient(port: t.port)
        try bad.send("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        let r = try bad.readResponse()
        #expect(r.status == 400)
        #expect(r.headers["Connection"] == "close")
        #expect(bad.isClosedByPeer())
        #expect(try TestClient.get("/hello", port: t.port).text == "hello")
    }

    @Test func responsesBeforeAMalformedPipelinedRequestStillArrive() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost : x\r\n\r\n")
        #expect(try client.readResponse().text == "hello")
        #expect(try client.readResponse().status == 400)
        #expect(client.isClosedByPeer())
    }

    @Test func clientHangingUpMidResponseDoesNotHurtTheServer() throws {
        let t = try TestServer()
        for _ in 0..<5 {
            let client = try TestClient(port: t.port)
            try client.send("GET /big?mb=8 HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.readUntil("\r\n\r\n")
            client.close() // with megabytes still to send: EPIPE/ECONNRESET, never SIGPIPE
        }
        #expect(try TestClient.get("/hello", port: t.port).text == "hello")
        #expect(eventually(timeout: 10) { t.server.openConnections == 0 }, "still open: \(t.server.openConnections)")
    }

    @Test func slowHeadersGet408AndClose() throws {
        let t = try TestServer { $0.requestReadTimeout = 0.3 }
        let client = try TestClient(port: t.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n")
        let started = Date()
        let r = try client.readResponse()
        #expect(r.status == 408)
        #expect(Date().timeIntervalSince(started) >= 0.25)
        #expect(client.isClosedByPeer())
    }

    @Test func slowlorisTricklingBytesStillTimesOut() throws {
        let t = try TestServer { $0.requestReadTimeout = 0.4 }
        let client = try TestClient(port: t.port)
        var timedOut = false
        for byte in "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".utf8 {
            if (try? client.send([byte])) == nil { timedOut = true; break }
            usleep(20_000)
        }
        if !timedOut { #expect(try client.readResponse().status == 408) }
        #expect(client.isClosedByPeer())
    }

    @Test func silentAndIdleConnectionsAreClosed() throws {
        let t = try TestServer { $0.requestReadTimeout = 0.3; $0.idleTimeout = 0.5 }
        let silent = try TestClient(port: t.port)
        #expect(silent.isClosedByPeer()) // never sent a byte: closed, no response needed

        let idle = try TestClient(port: t.port)
        try idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try idle.readResponse().status == 200)
        let started = Date()
        #expect(idle.isClosedByPeer())
        #expect(Date().timeIntervalSince(started) >= 0.4)
        #expect(eventually { t.server.openConnections == 0 })
    }

    @Test func twoHundredConcurrentClients() throws {
        let t = try TestServer()
        let clients = try (0..<200).map { _ in try TestClient(port: t.port) }
        #expect(eventually { t.server.openConnections == 200 })
        for (i, c) in clients.enumerated() { try c.send("GET /pins/\(i) HTTP/1.1\r\nHost: x\r\n\r\n") }
        for (i, c) in clients.enumerated() { #expect(try c.readResponse().text == "pin \(i)") }
    }

    /// A full table makes room by closing an idle keep-alive connection; when every connection is
    /// at work, the newcomer is refused cleanly and the others carry on.
    @Test func aFullTableMakesRoomFromIdleConnectionsOnly() throws {
        let t = try TestServer { $0.maxConnections = 5 }
        let held = try (0..<5).map { _ in try TestClient(port: t.port) }
        for c in held { try c.send("GET /hello HTTP/1.1\r\nHo") }  // each halfway through a request
        #expect(eventually { t.server.openConnections == 5 })
        usleep(1_000_000)  // let each connection read its half request (a second: the machine may be busy)
        let extra = try TestClient(port: t.port)
        #expect(try extra.readResponse().status == 503)
        for c in held {
            try c.send("st: x\r\n\r\n")
            #expect(try c.readResponse().text == "hello")
        }
        // Now all five are idle keep-alive connections: a newcomer is served in place of one.
        let newcomer = try TestClient(port: t.port)
        try newcomer.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try newcomer.readResponse().text == "hello")
        #expect(eventually { held.filter { $0.isClosedByPeer() }.count == 1 })
        #expect(eventually { t.server.openConnections == 5 })
    }

    /// One address cannot take the whole table; a trusted proxy (which carries everyone) can.
    @Test func oneAddressCannotTakeTheWholeTable() throws {
        let t = try TestServer { $0.maxConnectionsPerAddress = 3; $0.overShareHold = 0 }
        var held = try (0..<3).map { _ in try TestClient(port: t.port) }
        #expect(eventually { t.server.openConnections == 3 })
        // Past its share an address is reset at once, with no answer.
        #expect(TestClient.refusedAtOnce(port: t.port))
        held[0].close()
        held.removeFirst()
        #expect(eventually { t.server.openConnections == 2 })
        let again = try TestClient(port: t.port)
        try again.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try again.readResponse().text == "hello")

        let proxied = try TestServer { $0.maxConnectionsPerAddress = 3; $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")! }
        let many = try (0..<6).map { _ in try TestClient(port: proxied.port) }
        for c in many {
            try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().text == "hello")
        }
    }

    @Test func connectionRatesAreTokenBucketsPerAddress() {
        let second = Duration.seconds(1)
        let t0 = ContinuousClock.now
        var rates = ConnectionRates(rate: 2, burst: 3)
        func take(_ n: Int, _ address: String, at offset: Duration) -> [Bool] { (0..<n).map { _ in rates.take(address, now: t0 + offset) } }
        // A burst of three, then none until time passes; another address has its own.
        var taken = take(4, "a", at: second * 10)
        #expect(taken == [true, true, true, false])
        taken = take(1, "b", at: second * 10)
        #expect(taken == [true])
        // Two a second: half a second later one more, and no more.
        taken = take(2, "a", at: second * 10 + second / 2)
        #expect(taken == [true, false])
        // A bucket full again is forgotten: "b" is by 11 s, "a" (refused ones do not count) by 12.
        #expect(rates.count == 2)
        rates.forgetRefilled(now: t0 + second * 11)
        #expect(rates.count == 1)
        rates.forgetRefilled(now: t0 + second * 13)
        #expect(rates.count == 0)
        taken = take(4, "a", at: second * 13)
        #expect(taken == [true, true, true, false])
        // A clock read out of order never adds tokens.
        taken = take(1, "a", at: second * 12)
        #expect(taken == [false])
        // Rate 0: no limit.
        var open = ConnectionRates(rate: 0, burst: 1)
        let all = (0..<100).map { _ in open.take("a", now: t0) }
        #expect(all.allSatisfy { $0 })
    }

    /// An address opening connections faster than its rate is told so at once: 503 with
    /// Retry-After, then a clean close (EOF, not a reset), however few it keeps open; a trusted
    /// proxy is not limited.
    @Test func connectionsPastTheRateAreAnswered503() throws {
        // One a second: the four below take far less than the second a fifth would need to refill,
        // however busy the machine; a held connection would wait 1.5 s at least.
        let t = try TestServer { $0.newConnectionsPerSecond = 1; $0.newConnectionBurst = 4; $0.overShareHold = 3 }
        // One at a time, each closed before the next: never over the share, only over the rate.
        for _ in 0..<4 {
            let response = try TestClient.get("/hello", port: t.port)
            #expect(response.text == "hello")
        }
        let started = Date()
        let refused = try TestClient(port: t.port, timeout: 2)
        try refused.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let answer = try refused.readResponse()
        #expect(answer.status == 503)
        #expect(answer.headers["Retry-After"] == "1")
        #expect(answer.headers["Connection"] == "close")
        #expect(answer.text.contains("Too many new connections"))
        #expect(refused.isClosedByPeer(), "closed with a FIN after the answer, not reset")
        #expect(Date().timeIntervalSince(started) < 1.5, "answered, not held")
        #expect(eventually { t.server.answeredPastRate == 0 })
        #expect(t.server.heldOverShare == 0)
        // A second per connection: a little later one is served again.
        usleep(1_200_000)
        #expect(try TestClient.get("/hello", port: t.port).text == "hello")

        let proxied = try TestServer {
            $0.newConnectionsPerSecond = 5; $0.newConnectionBurst = 4; $0.trustedProxies = TrustedProxies(parsing: "127.0.0.1")!
        }
        for _ in 0..<10 { #expect(try TestClient.get("/hello", port: proxied.port).text == "hello") }
    }

    /// Past its share, a connection is held unread and then reset, so a client that reconnects
    /// when refused cannot loop; only so many are held, the rest are reset at once; shutdown
    /// lets them go.
    @Test func connectionsPastTheShareAreHeldThenReset() throws {
        let t = try TestServer {
            $0.maxConnectionsPerAddress = 2; $0.overShareHold = 3; $0.maxHeldOverShare = 2
            $0.requestReadTimeout = 0.4  // sweeps every 0.1 s
        }
        // Two within the share, kept alive between requests (a request is due within 0.4 s).
        let served = try (0..<2).map { _ in try TestClient(port: t.port) }
        for client in served {
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "hello")
        }
        #expect(eventually { t.server.openConnections == 2 })
        let started = Date()
        let held = try (0..<2).map { _ in try TestClient(port: t.port, timeout: 10) }
        for client in held { try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") }
        #expect(eventually { t.server.heldOverShare == 2 })
        // A third past the share finds the hold full: reset at once.
        let third = Date()
        #expect(TestClient.refusedAtOnce(port: t.port))
        #expect(Date().timeIntervalSince(third) < 1.4, "reset at once, not held (1.5 s at least)")
        // The held ones get no answer, then a reset once their time is up (1.5 to 4.5 s).
        for client in held { #expect((try? client.readResponse()) == nil) }
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 1.45 && waited < 9, "held for \(waited) s")
        #expect(t.server.heldOverShare == 0)
        // Those within the share are still served.
        for client in served {
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "hello")
        }
        // Held at shutdown: reset then, not left open.
        let late = try TestClient(port: t.port, timeout: 5)
        #expect(eventually { t.server.heldOverShare == 1 })
        t.server.shutdown(gracePeriod: 0.2)
        #expect(t.server.heldOverShare == 0)
        #expect((try? late.readResponse()) == nil)
    }

    @Test func gracefulShutdownFinishesTheRequestInFlight() throws {
        let t = try TestServer()
        let port = t.port
        let client = try TestClient(port: port)
        let idle = try TestClient(port: port)
        try client.send("GET /blocking HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(eventually { t.blockingStarted.value == 1 })
        let done = Counter()
        let started = Date()
        DispatchQueue.global().async {
            t.server.shutdown(gracePeriod: 5)
            done.add()
        }
        let r = try client.readResponse()
        #expect(r.status == 200)
        #expect(r.text == "blocking done")
        #expect(r.headers["Connection"] == "close")
        #expect(idle.isClosedByPeer())
        #expect(eventually { done.value == 1 })
        #expect(Date().timeIntervalSince(started) < 4)
        #expect(throws: (any Error).self) { _ = try TestClient(port: port) }
    }

    @Test func descriptorsReturnToBaselineAfter2000Connections() throws {
        // 2,000 as fast as the test can open them, from one address: past any rate a client may
        // open connections at (connectionsPastTheRateAreHeld), so without that limit here.
        let t = try TestServer { $0.newConnectionsPerSecond = 0 }
        for i in 0..<2000 {
            let client = try TestClient(port: t.port)
            if i % 2 == 0 {
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                _ = try client.readResponse()
            } else if i % 4 == 1 {
                try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") // client closes first
                _ = try client.readResponse()
            } // else: connect and hang up without a byte
        }
        #expect(eventually(timeout: 10) { t.server.openConnections == 0 })
        #expect(eventually(timeout: 10) { serverSideSockets(port: t.port) == 0 })
    }

    @Test func serverSentEventsStreamAndEndWhenTheClientLeaves() throws {
        let t = try TestServer()
        let client = try TestClient(port: t.port)
        try client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try client.readUntil("\r\n\r\n")
        #expect(head.contains("200 OK"))
        #expect(head.contains("text/event-stream"))
        #expect(!head.contains("Content-Length"))
        let first = try client.readUntil("\n\n")
        #expect(first == "event: greeting\nid: 1\ndata: line one\ndata: line two\n\n")
        #expect(try client.readUntil("\n\n") == "data: second\n\n")
        #expect(try client.readUntil("\n\n") == ": keep-alive\n\n") // heartbeat after 0.2 s of silence
        client.close()
        #expect(eventually { t.streamsClosed.value == 1 })
        #expect(eventually { t.server.openConnections == 0 })
    }

    /// The client's hang-up ends an event stream when it happens, not at the next heartbeat's
    /// failed write: here the heartbeat is an hour away and the stream's lifetime ten minutes.
    @Test func anEventStreamEndsWhenItsClientHangsUpBetweenHeartbeats() throws {
        let closed = Counter()
        let t = try TestServer(router: { router in
            router.get("/quiet") { _ in
                .eventStream(heartbeat: 3600) { stream in
                    stream.onClose { closed.add() }
                    stream.send(data: "hello")
                }
            }
        })
        let client = try TestClient(port: t.port)
        try client.send("GET /quiet HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readUntil("\r\n\r\n").contains("text/event-stream"))
        #expect(try client.readUntil("\n\n") == "data: hello\n\n")
        #expect(closed.value == 0)
        client.close()
        #expect(eventually { closed.value == 1 })
        #expect(eventually { t.server.openConnections == 0 })
    }

    @Test func busyExecutorAnswers503() throws {
        let t = try TestServer { $0.handlerConcurrency = 1; $0.handlerBacklog = 1 }
        let a = try TestClient(port: t.port), b = try TestClient(port: t.port), c = try TestClient(port: t.port)
        try a.send("GET /slow?ms=500 HTTP/1.1\r\nHost: x\r\n\r\n")
        usleep(50_000)
        try b.send("GET /slow?ms=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        usleep(50_000)
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().status == 503)
        #expect(try a.readResponse().status == 200)
        #expect(try b.readResponse().status == 200)
    }
}
