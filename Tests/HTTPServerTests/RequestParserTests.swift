import Testing
@testable import HTTPServer

/// The parser on in-memory bytes: no sockets, so every rule of RFC 9112 it enforces is checked
/// directly, including each request-smuggling shape.
@Suite struct RequestParserTests {
    /// Feeds `text` (all at once, or byte by byte) and returns the requests, or the error.
    func parse(_ text: String, limits: HTTPLimits = HTTPLimits(), byteByByte: Bool = false) -> Result<[HTTPRequest], HTTPParseError> {
        var parser = RequestParser(limits: limits)
        var requests: [HTTPRequest] = []
        let bytes = Array(text.utf8)
        let chunks: [[UInt8]] = byteByByte ? bytes.map { [$0] } : [bytes]
        do {
            for chunk in chunks {
                parser.append(chunk)
                while let event = try parser.next() {
                    if case .request(let r) = event { requests.append(r) }
                }
            }
            return .success(requests)
        } catch {
            return .failure(error)
        }
    }

    func one(_ text: String) throws -> HTTPRequest {
        let requests = try parse(text).get()
        try #require(requests.count == 1, "expected one request, got \(requests.count)")
        return requests[0]
    }

    func status(_ text: String, limits: HTTPLimits = HTTPLimits()) -> Int? {
        if case .failure(let e) = parse(text, limits: limits) { return e.status.code }
        return nil
    }

    @Test func simpleGet() throws {
        let r = try one("GET /pins/7?x=1&y=a+b HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\n\r\n")
        #expect(r.method == "GET")
        #expect(r.path == "/pins/7")
        #expect(r.query == "x=1&y=a+b")
        #expect(r.queryValue("y") == "a b")
        #expect(r.headers["host"] == "example.org")
        #expect(r.version == .http11)
        #expect(r.keepAlive)
        #expect(r.body.isEmpty)
    }

    /// queryValue decodes only the pair it finds, and finds what queryItems has first.
    @Test func queryValueAgreesWithQueryItems() {
        let queries = ["w=256", "a=1&w=2&w=3", "w", "w=", "&&w=1&", "x%3D=1&w%20x=2&w+x=3", "%77=escaped&w=plain",
                       "w=%ZZ&w=2", "w=a%20b+c", "=1&w=2", "q=%E2%9C%93&%E2%9C%93=tick"]
        for query in queries {
            let request = HTTPRequest(method: "GET", target: "/p?" + query)
            for name in ["w", "w x", "x=", "", "q", "✓", "missing"] {
                #expect(request.queryValue(name) == request.queryItems.first { $0.name == name }?.value, "\(query) \(name)")
            }
        }
        #expect(HTTPRequest(method: "GET", target: "/p").queryValue("w") == nil)
    }

    @Test func everyShapeByteByByte() throws {
        let texts = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
            "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
            "GET / HTTP/1.0\r\n\r\n",
            "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET http://example.org/a?b=c HTTP/1.1\r\nHost: example.org\r\n\r\n",
        ]
        for text in texts {
            let whole = try parse(text).get()
            let bytewise = try parse(text, byteByByte: true).get()
            #expect(whole.count == 1)
            #expect(bytewise.count == 1)
            #expect(whole.first?.body == bytewise.first?.body)
            #expect(whole.first?.path == bytewise.first?.path)
        }
    }

    @Test func chunkedBodyIsDecoded() throws {
        let r = try one("POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n")
        #expect(r.bodyString == "hello world")
    }

    @Test func absoluteFormKeepsPathAndQuery() throws {
        let r = try one("GET http://example.org/a/b?c=d HTTP/1.1\r\nHost: example.org\r\n\r\n")
        #expect(r.path == "/a/b")
        #expect(r.query == "c=d")
    }

    @Test func http10ClosesUnlessKeepAlive() throws {
        #expect(try one("GET / HTTP/1.0\r\n\r\n").keepAlive == false)
        #expect(try one("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepAlive == true)
        #expect(try one("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keepAlive == false)
    }

    @Test func leadingEmptyLinesAreIgnored() throws {
        // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line.
        #expect(try one("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").path == "/")
    }

    @Test func pipelinedRequestsSplitAtBodyBoundaries() throws {
        let text = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
            + "GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
            + "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nGET "
            + "GET /d HTTP/1.1\r\nHost: h\r\n\r\n"
        for byteByByte in [false, true] {
            let requests = try parse(text, byteByByte: byteByByte).get()
            #expect(requests.map(\.path) == ["/a", "/b", "/c", "/d"])
            #expect(requests.map(\.bodyString) == ["abc", "", "GET ", ""])
        }
    }

    @Test func expectContinueIsSignalledOnce() throws {
        var parser = RequestParser()
        parser.append("PUT /f HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        guard case .expectContinue = try #require(try parser.next()) else {
            Issue.record("expected expectContinue")
            return
        }
        #expect(try parser.next() == nil)
        parser.append("abc")
        guard case .request(let r) = try #require(try parser.next()) else {
            Issue.record("expected the request")
            return
        }
        #expect(r.bodyString == "abc")
    }

    // MARK: Request smuggling: every ambiguity is refused with 400.

    @Test(arguments: [
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n two\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: one\r\n\ttwo\r\n\r\n",
        "GET / HTTP/1.1\nHost: a\n\n",
        "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHo(st: a\r\n\r\n",
        "GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nNo colon here\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{0}b\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
        "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.x\r\nHost: a\r\n\r\n",
        "GET / HTTP/11\r\nHost: a\r\n\r\n",
        "GET nothing HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET * HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
    ])
    func ambiguousFramingIsRefused(_ text: String) {
        let code = status(text)
        #expect(code == 400, "got \(code.map(String.init) ?? "success") for \(text.debugDescription)")
    }

    @Test func unsupportedCodingsAndVersions() {
        #expect(status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501)
        #expect(status("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 505)
        #expect(status("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org\r\n\r\n") == 501)
    }

    @Test func errorsAreSticky() {
        var parser = RequestParser()
        parser.append("GET / HTTP/1.1\r\nHost : a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try parser.next() }
        #expect(throws: HTTPParseError.self) { try parser.next() }
    }

    // MARK: Limits

    @Test func longRequestLineIs414EvenBeforeItEnds() {
        let long = "GET /" + String(repeating: "a", count: 9000)
        #expect(status(long) == 414)
        #expect(status(long + " HTTP/1.1\r\nHost: a\r\n\r\n") == 414)
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = 100
        #expect(status("GET /" + String(repeating: "a", count: 120) + " HTTP/1.1\r\n", limits: limits) == 414)
        #expect(status("GET /" + String(repeating: "a", count: 50) + " HTTP/1.1\r\nHost: a\r\n\r\n", limits: limits) == nil)
    }

    @Test func tooManyHeadersIs431() {
        var text = "GET / HTTP/1.1\r\nHost: a\r\n"
        for i in 0..<100 { text += "X-\(i): v\r\n" }
        #expect(status(text + "\r\n") == 431)
        #expect(status(text) == 431) // before the head even ends
        var ok = "GET / HTTP/1.1\r\nHost: a\r\n"
        for i in 0..<99 { ok += "X-\(i): v\r\n" }
        #expect(status(ok + "\r\n") == nil)
    }

    @Test func largeHeaderSectionIs431() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + String(repeating: "b", count: 33 * 1024)
        #expect(status(text) == 431)
    }

    @Test func largeBodyIs413BeforeItArrives() {
        #expect(status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n") == 413)
        var limits = HTTPLimits()
        limits.maxBodyBytes = 10
        #expect(status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n", limits: limits) == 413)
        #expect(status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789", limits: limits) == nil)
    }

    @Test func partialRequestIsReported() throws {
        var parser = RequestParser()
        #expect(!parser.hasPartialRequest)
        parser.append("GET / HT")
        #expect(try parser.next() == nil)
        #expect(parser.hasPartialRequest)
        parser.append("TP/1.1\r\nHost: a\r\n\r\n")
        #expect(try parser.next() != nil)
        #expect(!parser.hasPartialRequest)
    }
}

extension ParseEvent: Equatable {
    public static func == (a: ParseEvent, b: ParseEvent) -> Bool {
        switch (a, b) {
        case (.expectContinue, .expectContinue): return true
        case (.request(let x), .request(let y)): return x.target == y.target && x.body == y.body
        default: return false
        }
    }
}
