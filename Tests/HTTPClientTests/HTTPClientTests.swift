import Dispatch
import Foundation
import Testing
import HTTPClient

/// A client allowed to reach `origins` (loopback test servers), with `configure` applied.
func makeClient(for origins: [String], _ configure: (inout HTTPClient.Options) -> Void = { _ in }) -> HTTPClient {
    var options = HTTPClient.Options()
    options.internalOrigins = origins
    configure(&options)
    return HTTPClient(options: options)
}

/// Redirects are followed by get(), one hop at a time, and each hop is checked again: against the
/// host policy and against the address guard. A refused hop is never connected to.
@Suite struct RedirectTests {
    @Test func aRedirectWithinTheAllowedOriginIsFollowed() throws {
        let server = try TestHTTPServer { request in
            request.path == "/start" ? .redirect(to: "/final") : Reply(status: 200, headers: [("X-Which", "final")], body: Array("end".utf8))
        }
        defer { server.stop() }
        let response = try makeClient(for: [server.origin]).get(server.origin + "/start", hosts: .sameOrigin(as: server.origin))
        #expect(response.status == 200)
        #expect(response.body == Array("end".utf8))
        #expect(response.url == server.origin + "/final")
        // The headers are the final response's, not the redirect's.
        #expect(response.headers["x-which"] == "final")
        #expect(response.headers["location"] == nil)
        #expect(server.requests.map(\.path) == ["/start", "/final"])
    }

    @Test func aRedirectOutOfTheHostPolicyIsRefusedBeforeAnyConnection() throws {
        let elsewhere = try TestHTTPServer()
        defer { elsewhere.stop() }
        let allowed = try TestHTTPServer { _ in .redirect(to: elsewhere.origin + "/photo.jpg") }
        defer { allowed.stop() }
        // Both origins pass the address guard: only the policy stands in the way.
        let client = makeClient(for: [allowed.origin, elsewhere.origin])
        #expect {
            _ = try client.get(allowed.origin + "/photo.jpg", hosts: .sameOrigin(as: allowed.origin))
        } throws: { error in
            guard case HTTPClientError.refused(let reason) = error else { return false }
            return reason.contains("redirect") && reason.contains("\(elsewhere.port)")
        }
        #expect(allowed.requests.count == 1)
        #expect(elsewhere.connections == 0)
    }

    @Test func aRedirectToAnUnconfiguredInternalOriginIsRefusedBeforeAnyConnection() throws {
        let inside = try TestHTTPServer()
        defer { inside.stop() }
        let allowed = try TestHTTPServer { _ in .redirect(to: "http://127.0.0.1:\(inside.port)/latest/meta-data/") }
        defer { allowed.stop() }
        // The policy admits both origins; the address guard alone refuses the second hop.
        let policy = HostPolicy([.init("127.0.0.1", schemes: ["http"], port: allowed.port), .init("127.0.0.1", schemes: ["http"], port: inside.port)])
        #expect {
            _ = try makeClient(for: [allowed.origin]).get(allowed.origin + "/", hosts: policy)
        } throws: { error in
            guard case HTTPClientError.refused(let reason) = error else { return false }
            return reason.contains("internal address")
        }
        #expect(allowed.requests.count == 1)
        #expect(inside.connections == 0)
    }

    @Test func aRedirectToTheSameServerByAnotherNameIsRefused() throws {
        let server = try TestHTTPServer { request in request.path == "/" ? .redirect(to: "http://localhost:\(request.headers["host"]!.split(separator: ":").last!)/again") : .ok() }
        defer { server.stop() }
        #expect {
            _ = try makeClient(for: [server.origin]).get(server.origin + "/")
        } throws: { error in
            guard case HTTPClientError.refused = error else { return false }
            return true
        }
        #expect(server.connections == 1)
        #expect(server.requests.map(\.path) == ["/"])
    }

    @Test func aRedirectToAnotherSchemeIsNotFollowed() throws {
        let server = try TestHTTPServer { _ in .redirect(to: "file:///etc/passwd") }
        defer { server.stop() }
        // Refused, or handed back as the 302 it is: either way nothing but the first request is made.
        if case .success(let response) = Result(catching: { try makeClient(for: [server.origin]).get(server.origin + "/") }) {
            #expect(response.status == 302)
        }
        #expect(server.requests.count == 1)
    }

    @Test func moreRedirectsThanTheLimitAreRefused() throws {
        let server = try TestHTTPServer { request in .redirect(to: request.path + "x", status: 301) }
        defer { server.stop() }
        let client = makeClient(for: [server.origin]) { $0.maxRedirects = 3 }
        #expect(throws: HTTPClientError.tooManyRedirects) { _ = try client.get(server.origin + "/") }
        #expect(server.requests.map(\.path) == ["/", "/x", "/xx", "/xxx"])
    }

    /// send() returns a redirect as it is (an object store's 301 names a wrong region).
    @Test func sendDoesNotFollowRedirects() throws {
        let server = try TestHTTPServer { _ in .redirect(to: "/elsewhere", status: 301) }
        defer { server.stop() }
        let response = try makeClient(for: [server.origin]).send("GET", server.origin + "/object")
        #expect(response.status == 301)
        #expect(response.redirectURL == server.origin + "/elsewhere")
        #expect(server.requests.count == 1)
    }
}

/// The per-host cap and the total timeout: a request waits for a slot on its host, the wait counts
/// into its timeout, and a request that found none in time throws `timedOut`. Bounds are generous
/// (a loaded two-core machine): they tell "gave up near the timeout" from "waited for the holder".
@Suite struct SlotAndTimeoutTests {
    /// A server that holds every request to "/hold" until released (or twenty seconds pass).
    final class Holding: Sendable {
        let server: TestHTTPServer
        let arrived = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)

        init() throws {
            let arrived = arrived, release = release
            server = try TestHTTPServer { request in
                if request.path == "/hold" {
                    arrived.signal()
                    _ = release.wait(timeout: .now() + 20)
                }
                return .ok("done")
            }
        }

        /// Runs `request` on a thread of its own; the returned semaphore is signalled when it ends.
        func inBackground(_ request: @escaping @Sendable () throws -> HTTPClientResponse) -> (Locked<Result<Int, any Error>?>, DispatchSemaphore) {
            let result = Locked<Result<Int, any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread {
                let outcome = Result { try request().status }
                result.change { $0 = outcome }
                done.signal()
            }.start()
            return (result, done)
        }

        func stop() {
            release.signal()
            server.stop()
        }
    }

    /// The slot is the host's, whatever the port: a prompt server on 127.0.0.1 is not reached
    /// while another server on 127.0.0.1 holds the only slot.
    @Test func aRequestThatFindsNoSlotInTimeTimesOutWithoutConnecting() throws {
        let holding = try Holding()
        defer { holding.stop() }
        let prompt = try TestHTTPServer()
        defer { prompt.stop() }
        let client = makeClient(for: [holding.server.origin, prompt.origin]) { $0.perHostConcurrency = 1 }
        let (first, firstDone) = holding.inBackground { try client.send("GET", holding.server.origin + "/hold") }
        #expect(holding.arrived.wait(timeout: .now() + 10) == .success)

        let started = ContinuousClock.now
        #expect(throws: HTTPClientError.timedOut(prompt.origin + "/second")) {
            _ = try client.send("GET", prompt.origin + "/second", timeout: 1)
        }
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(500))  // it waited for the slot…
        #expect(waited < .seconds(5))          // …and not for the holder
        #expect(prompt.connections == 0)        // and never connected

        holding.release.signal()
        #expect(firstDone.wait(timeout: .now() + 10) == .success)
        #expect(try first.value?.get() == 200)
        // With the slot free again, the next request goes through.
        #expect(try client.send("GET", prompt.origin + "/third", timeout: 10).status == 200)
        #expect(prompt.requests.map(\.path) == ["/third"])
    }

    @Test func theCapIsPerHost() throws {
        let holding = try Holding()
        defer { holding.stop() }
        let other = try TestHTTPServer()
        defer { other.stop() }
        let otherByName = "http://localhost:\(other.port)"
        let client = makeClient(for: [holding.server.origin, otherByName]) { $0.perHostConcurrency = 1 }
        let (_, firstDone) = holding.inBackground { try client.send("GET", holding.server.origin + "/hold") }
        #expect(holding.arrived.wait(timeout: .now() + 10) == .success)
        // Another host name has a slot of its own while 127.0.0.1's only one is taken.
        #expect(try client.send("GET", otherByName + "/", timeout: 10).status == 200)
        #expect(try client.get(otherByName + "/").status == 200)
        holding.release.signal()
        #expect(firstDone.wait(timeout: .now() + 10) == .success)
    }

    @Test func aServerThatDoesNotAnswerInTimeIsGivenUp() throws {
        let holding = try Holding()
        defer { holding.stop() }
        let url = holding.server.origin + "/hold"
        let started = ContinuousClock.now
        #expect(throws: HTTPClientError.timedOut(url)) {
            _ = try makeClient(for: [holding.server.origin]).send("GET", url, timeout: 1)
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(holding.server.connections == 1)
    }

    @Test(arguments: [Double.infinity, .nan, 1e300, Double.greatestFiniteMagnitude])
    func anAbsurdTimeoutDoesNotTrap(timeout: Double) throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        #expect(try makeClient(for: [server.origin]).send("GET", server.origin + "/", timeout: timeout).status == 200)
        #expect(server.requests.count == 1)
    }
}

/// `isWarm`: an origin is warm for `within` after a request there answered, and only with
/// connection reuse on.
@Suite struct WarmTests {
    @Test func anOriginIsWarmRightAfterARequestAndNotBefore() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = makeClient(for: [server.origin])
        #expect(!client.isWarm(server.origin))
        _ = try client.get(server.origin + "/a")
        #expect(client.isWarm(server.origin))
        #expect(client.isWarm(server.origin + "/any/path"))
        #expect(client.isWarm("HTTP://127.0.0.1:\(server.port)", within: .seconds(60)))
        #expect(!client.isWarm(server.origin, within: .zero))
        // Another origin on the same host is not.
        #expect(!client.isWarm("http://127.0.0.1:\(server.port == 1 ? 2 : 1)"))
    }

    @Test func aRefusedRequestWarmsNothing() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = HTTPClient()
        _ = try? client.get(server.origin + "/")
        #expect(!client.isWarm(server.origin))
    }

    @Test func withoutReuseNothingIsWarm() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = makeClient(for: [server.origin]) { $0.reuseConnections = false }
        #expect(try client.get(server.origin + "/").status == 200)
        #expect(!client.isWarm(server.origin))
    }
}

/// What a response looks like to the caller, and what the request looks like to the server:
/// statuses come back (not thrown), header names lower-cased, bodies capped while they arrive.
@Suite struct ResponseTests {
    @Test func anErrorStatusIsAResponseWithItsHeadersAndBody() throws {
        let server = try TestHTTPServer { _ in Reply(status: 404, headers: [("X-Reason", "  Not Here "), ("Content-Type", "text/plain")], body: Array("missing".utf8)) }
        defer { server.stop() }
        let response = try makeClient(for: [server.origin]).get(server.origin + "/nothing")
        #expect(response.status == 404)
        #expect(response.body == Array("missing".utf8))
        #expect(response.headers["x-reason"] == "Not Here")
        #expect(response.headers["content-type"] == "text/plain")
        #expect(response.headers["X-Reason"] == nil)
        #expect(response.url == server.origin + "/nothing")
        #expect(response.redirectURL == nil)
    }

    @Test func theRequestCarriesTheCallersHeadersAndTheUserAgent() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = makeClient(for: [server.origin]) { $0.userAgent = "TestAgent/2" }
        _ = try client.get(server.origin + "/p?q=1", headers: ["X-Api-Key": "k1"])
        let seen = try #require(server.requests.first)
        #expect(seen.method == "GET")
        #expect(seen.path == "/p?q=1")
        #expect(seen.headers["x-api-key"] == "k1")
        #expect(seen.headers["user-agent"] == "TestAgent/2")
    }

    @Test func sendCarriesTheMethodAndTheBodyAsIs() throws {
        let server = try TestHTTPServer { request in Reply(status: 201, body: request.body) }
        defer { server.stop() }
        let client = makeClient(for: [server.origin])
        let body: [UInt8] = Array(0...255) + Array(repeating: 7, count: 100_000)
        let put = try client.send("PUT", server.origin + "/object", body: body)
        #expect(put.status == 201)
        #expect(put.body == body)
        #expect(try client.send("DELETE", server.origin + "/object").status == 201)
        #expect(try client.send("POST", server.origin + "/form", headers: ["Content-Type": "application/json"], body: Array("{}".utf8)).status == 201)
        let head = try client.send("HEAD", server.origin + "/object")
        #expect(head.status == 201)
        #expect(head.body.isEmpty)
        let seen = server.requests
        #expect(seen.map(\.method) == ["PUT", "DELETE", "POST", "HEAD"])
        #expect(seen[0].body == body)
        #expect(seen[0].headers["content-type"] == "application/octet-stream")  // unless the caller names one…
        #expect(seen[2].headers["content-type"] == "application/json")          // …as here
        #expect(seen[0].headers["expect"] == nil)  // no 100-continue round trip
    }

    @Test func onlyHTTPAndUpperCaseMethodsAreSent() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = makeClient(for: [server.origin])
        for address in ["ftp://127.0.0.1:\(server.port)/", "file:///etc/passwd", "gopher://127.0.0.1:\(server.port)/", "not a url", "http:///x"] {
            #expect(throws: HTTPClientError.self, "\(address)") { _ = try client.get(address) }
            #expect(throws: HTTPClientError.self, "\(address)") { _ = try client.send("GET", address) }
        }
        for method in ["get", "", "GET /x HTTP/1.1\r\nX:", "PUT\r\n"] {
            #expect(throws: HTTPClientError.self, "\(method)") { _ = try client.send(method, server.origin + "/") }
        }
        #expect(server.connections == 0)
    }

    @Test(arguments: [true, false])
    func aBodyOverTheLimitIsAbortedAndOneAtTheLimitArrives(declaresLength: Bool) throws {
        let limit = 64 * 1024
        let server = try TestHTTPServer { request in
            let size = request.path == "/big" ? limit + 1 : limit
            return Reply(status: 200, body: Array(repeating: 0x61, count: size), sendsLength: declaresLength)
        }
        defer { server.stop() }
        let client = makeClient(for: [server.origin]) { $0.maxResponseBytes = limit }
        #expect(throws: HTTPClientError.tooLarge(limit: limit)) { _ = try client.get(server.origin + "/big") }
        #expect(throws: HTTPClientError.tooLarge(limit: limit)) { _ = try client.send("GET", server.origin + "/big") }
        #expect(try client.get(server.origin + "/exact").body.count == limit)
    }

    @Test func aClosedPortIsATransportError() throws {
        let server = try TestHTTPServer()
        let origin = server.origin
        server.stop()
        #expect {
            _ = try makeClient(for: [origin]).get(origin + "/")
        } throws: { error in
            guard case HTTPClientError.transport = error else { return false }
            return true
        }
    }

    @Test func errorsDescribeThemselvesForPeople() {
        #expect(HTTPClientError.tooLarge(limit: 8 * 1024 * 1024).description == "the response was larger than 8 MB")
        #expect(HTTPClientError.refused("x").description == "refused: x")
        #expect(HTTPClientError.timedOut("http://a/").description == "the server took too long to answer")
    }
}

/// A body sent from a file (UploadFile, the photo store's PUT of an upload) is read by curl as it
/// goes, and rewound when curl sends the request again within one transfer: here the server
/// closes a kept-alive connection instead of answering the next request (an object store's idle
/// timeout meeting it), and curl sends it again on a fresh connection, the file from its start. A file that
/// turns out shorter than it says is an unreadable body, not a network failure.
@Suite struct FileBodyTests {
    static func spooled(_ bytes: [UInt8]) throws -> Int32 {
        let path = NSTemporaryDirectory() + "/upload-\(UInt64.random(in: 0...UInt64.max))"
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        unlink(path)
        return fd
    }

    @Test func aFileBodyIsRewoundWhenTheRequestIsSentAgain() throws {
        let body = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9) }
        let received = Locked<[(connection: Int, method: String, body: [UInt8])]>([])
        let connections = Locked(0)
        let server = try LoopbackServer { connection in
            let number = connections.change { $0 += 1; return $0 }
            while let requestLine = connection.readLine(), !requestLine.isEmpty {
                var length = 0
                while let line = connection.readLine(), !line.isEmpty {
                    let lower = line.lowercased()
                    if lower.hasPrefix("content-length:") { length = Int(lower.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0 }
                }
                let method = String(requestLine.prefix { $0 != " " })
                // The first connection's second request: read, then closed with no answer.
                if number == 1 && method == "PUT" {
                    _ = connection.read(count: length)
                    return
                }
                let got = connection.read(count: length) ?? []
                received.change { $0.append((number, method, got)) }
                connection.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            }
        }
        defer { server.stop() }
        let fd = try Self.spooled([0, 0, 0] + body)
        defer { close(fd) }
        let origin = "http://127.0.0.1:\(server.port)"
        let client = makeClient(for: [origin])
        #expect(try client.send("GET", origin + "/warm").status == 200)
        let response = try client.send("PUT", origin + "/blob", file: UploadFile(descriptor: fd, offset: 3, count: body.count))
        #expect(response.status == 200)
        let requests = received.value
        #expect(requests.map(\.method) == ["GET", "PUT"] && requests.last?.connection == 2, "\(requests.map { "\($0.method) on \($0.connection)" })")
        let whole = requests.last?.body == body
        #expect(whole, "the body sent again is the whole file from its start (\(requests.last?.body.count ?? 0) bytes)")

        let short = UploadFile(descriptor: fd, offset: body.count - 10, count: 100)
        do {
            _ = try makeClient(for: [origin]).send("PUT", origin + "/blob", file: short)
            Issue.record("a file shorter than it says was sent")
        } catch let error as HTTPClientError {
            guard case .unreadableBody = error else { Issue.record("\(error)"); return }
        }
    }
}
