import Testing
@testable import HTTPServer

/// Answers made on the connection's queue (`HTTPHandler.respondInline`): they go through the
/// middlewares, keep request order among executor answers, and hand everything else (nil, any
/// error) to the executor, which answers from the start.
@Suite struct InlineAnswerTests {
    struct Tag: Middleware {
        func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
            var response = try next(request)
            response.headers.add("X-Tag", "seen")
            return response
        }
    }

    /// /n/:n answers inline when n % 3 == 0, says nil when 1 and throws when 2.
    static func server() throws -> HTTPServer {
        var router = Router()
        router.add("GET", "/n/:n", ClosureHandler({ request in
            .text("executor \(request.parameters["n"]!)")
        }, inline: { request in
            let n = Int(request.parameters["n"]!)!
            if n % 3 == 1 { return nil }
            if n % 3 == 2 { throw HTTPError(.notFound) }
            return .text("inline \(n)")
        }))
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.accessLog = nil
        let server = HTTPServer(configuration: configuration, handler: MiddlewareChain([Tag()], handler: router))
        try server.start()
        return server
    }

    /// Hundreds pipelined in one write, inline answers among executor ones: all in request order.
    @Test func inlineAnswersAndFallbacksKeepRequestOrder() throws {
        let server = try Self.server()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: server.port)
        let count = 600
        try client.send((0..<count).map { "GET /n/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
        for i in 0..<count {
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.text == (i % 3 == 0 ? "inline \(i)" : "executor \(i)"))
            #expect(response.headers["X-Tag"] == "seen")
        }
    }

    @Test func routesWithoutAnInlineAnswerAndUnknownPathsUseTheExecutor() throws {
        let server = try Self.server()
        defer { server.shutdown(gracePeriod: 1) }
        #expect(try TestClient.get("/n/4", port: server.port).text == "executor 4")
        #expect(try TestClient.get("/nothing", port: server.port).status == 404)
        #expect(try TestClient.get("/n/3", port: server.port).text == "inline 3")
    }
}
