import WebText

/// Anything that turns a request into a response. Handlers run on the server's bounded handler
/// executor, never on a connection's event loop, so they may block (a database call) without stalling
/// other connections.
public protocol HTTPHandler: Sendable {
    func handle(_ request: HTTPRequest) throws -> HTTPResponse

    /// The answer when it is already in memory, or nil: then `handle` runs on the executor. Runs on
    /// the connection's event loop, so it must never block (no database, no network) and must do
    /// nothing that counts when it says nil or throws (the request then runs again on the
    /// executor, which also renders any error). It saves two thread hand-offs per request (to a
    /// handler slot and back), which cost more than a cached photo's answer itself.
    func respondInline(_ request: HTTPRequest) throws -> HTTPResponse?
}

extension HTTPHandler {
    public func respondInline(_ request: HTTPRequest) throws -> HTTPResponse? { nil }
}

/// A closure as a handler; `inline`, when given, is its `respondInline`.
public struct ClosureHandler: HTTPHandler {
    let body: @Sendable (HTTPRequest) throws -> HTTPResponse
    let inline: (@Sendable (HTTPRequest) throws -> HTTPResponse?)?

    public init(_ body: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse,
                inline: (@Sendable (HTTPRequest) throws -> HTTPResponse?)? = nil) {
        self.body = body
        self.inline = inline
    }

    public func handle(_ request: HTTPRequest) throws -> HTTPResponse { try body(request) }
    public func respondInline(_ request: HTTPRequest) throws -> HTTPResponse? { try inline?(request) }
}

/// Runs around a handler: may change the request, answer early, or change the response. Also runs
/// around inline answers (`HTTPHandler.respondInline`), on an event loop: it must not block, and
/// must pass on errors it does not know (an inline attempt that gives up is an error to it).
public protocol Middleware: Sendable {
    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse
}

/// Middlewares in order (the first sees the request first) around a handler.
public struct MiddlewareChain: HTTPHandler {
    let middlewares: [any Middleware]
    let handler: any HTTPHandler

    public init(_ middlewares: [any Middleware], handler: any HTTPHandler) {
        self.middlewares = middlewares
        self.handler = handler
    }

    public func handle(_ request: HTTPRequest) throws -> HTTPResponse {
        try run(request, from: 0)
    }

    public func respondInline(_ request: HTTPRequest) throws -> HTTPResponse? {
        do {
            return try runInline(request, from: 0)
        } catch is NotInline {
            return nil
        }
    }

    private func run(_ request: HTTPRequest, from index: Int) throws -> HTTPResponse {
        guard index < middlewares.count else { return try handler.handle(request) }
        return try middlewares[index].handle(request) { try run($0, from: index + 1) }
    }

    /// The handler's nil leaves through the middlewares as an error, which none of them catches.
    private struct NotInline: Error {}

    private func runInline(_ request: HTTPRequest, from index: Int) throws -> HTTPResponse {
        guard index < middlewares.count else {
            guard let response = try handler.respondInline(request) else { throw NotInline() }
            return response
        }
        return try middlewares[index].handle(request) { try runInline($0, from: index + 1) }
    }
}

/// An error that knows its status and what may be shown to the client. Errors that do not conform
/// become a 500 whose page says nothing about the internals; the detail goes to the log.
public protocol HTTPResponseError: Error {
    var status: HTTPStatus { get }
    /// Safe to show to the client.
    var publicMessage: String { get }
    /// Extra headers (Allow on 405, Retry-After on 503…).
    var headers: HTTPHeaders { get }
}

extension HTTPResponseError {
    public var headers: HTTPHeaders { [:] }
}

public struct HTTPError: HTTPResponseError, CustomStringConvertible {
    public let status: HTTPStatus
    public let publicMessage: String
    public let headers: HTTPHeaders

    public init(_ status: HTTPStatus, _ message: String? = nil, headers: HTTPHeaders = [:]) {
        self.status = status
        self.publicMessage = message ?? status.reason
        self.headers = headers
    }

    public var description: String { "\(status): \(publicMessage)" }

    public static let notFound = HTTPError(.notFound, "This page does not exist.")

    /// "Try again later", the one way it is said: 503 when the server, or something behind it,
    /// cannot answer now; 429 (`tooManyRequests`) when this client asked too often. Retry-After in
    /// whole seconds (rounded up, at least 1), and never cached.
    public static func unavailable(_ message: String, retryAfter: Duration) -> HTTPError {
        HTTPError(.serviceUnavailable, message, headers: waitHeaders(retryAfter))
    }

    public static func tooManyRequests(_ message: String, retryAfter: Duration) -> HTTPError {
        HTTPError(.tooManyRequests, message, headers: waitHeaders(retryAfter))
    }

    /// The headers of a "try again later", for responses that are not an error page (JSON, a form
    /// shown again).
    public static func waitHeaders(_ retryAfter: Duration) -> HTTPHeaders {
        ["Retry-After": String(retryAfterSeconds(retryAfter)), "Cache-Control": "no-store"]
    }

    public static func retryAfterSeconds(_ retryAfter: Duration) -> Int64 {
        let (seconds, attoseconds) = retryAfter.components
        return max(1, seconds + (attoseconds > 0 ? 1 : 0))
    }
}

extension HTTPResponse {
    /// Marks a response as a "try again later" (HTTPError.waitHeaders).
    public mutating func waitFor(_ retryAfter: Duration) {
        for (name, value) in HTTPError.waitHeaders(retryAfter) { headers.set(name, value) }
    }
}

extension HTTPParseError: HTTPResponseError {
    public var publicMessage: String { "The request could not be read: \(reason)." }
    public var headers: HTTPHeaders {
        guard let retryAfter else { return [:] }
        return ["Retry-After": String(retryAfter), "Cache-Control": "no-store"]
    }
}

/// Renders an error as a response. The app replaces the default to give error pages its own look.
public typealias ErrorPageRenderer = @Sendable (_ status: HTTPStatus, _ message: String, _ request: HTTPRequest?) -> HTTPResponse

public enum DefaultErrorPage {
    public static let render: ErrorPageRenderer = { status, message, _ in
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(status.code) \(HTMLEscaping.escape(status.reason))</title></head>\
            <body><h1>\(status.code) \(HTMLEscaping.escape(status.reason))</h1><p>\(HTMLEscaping.escape(message))</p></body></html>
            """
        return .html(html, status: status)
    }
}
