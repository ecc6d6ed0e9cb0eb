/// Method + path routing. Patterns are literal segments and `:name` parameters
/// ("/pins/:id/photos/:photoID"); a final `*name` takes the rest of the path. A path that matches with
/// another method gets 405 with Allow (RFC 9110 §15.5.6); HEAD is served by the GET route.
public struct Router: HTTPHandler {
    public struct Route: Sendable {
        public let method: String
        public let pattern: String
        let segments: [Segment]
        let handler: any HTTPHandler
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest(String)
    }

    public private(set) var routes: [Route] = []
    /// Indices of the routes a path may match, by the path's first segment: those whose pattern
    /// starts with that literal, and those starting with a parameter (`unindexed`), in the order
    /// they were added. A request tries a handful of routes, not all of them: trying, and
    /// copying, every route would be paid again on every photo request.
    private var byFirstSegment: [String: [Int]] = [:]
    private var unindexed: [Int] = []
    /// Asked when no route's path matches (static files, say). Nil: 404.
    public var fallback: (any HTTPHandler)?

    public init() {}

    public mutating func add(_ method: String, _ pattern: String, _ handler: any HTTPHandler) {
        let segments = pattern.split(separator: "/", omittingEmptySubsequences: true).map { part -> Segment in
            if part.hasPrefix(":") { return .parameter(String(part.dropFirst())) }
            if part.hasPrefix("*") { return .rest(String(part.dropFirst())) }
            return .literal(String(part))
        }
        precondition(!routes.contains { $0.method == method && $0.segments == segments },
                     "route \(method) \(pattern) registered twice")
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler))
        let index = routes.count - 1
        if case .literal(let first)? = segments.first {
            byFirstSegment[first, default: unindexed].append(index)
        } else {
            unindexed.append(index)
            for key in byFirstSegment.keys { byFirstSegment[key]!.append(index) }
        }
    }

    public mutating func get(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) {
        add("GET", pattern, ClosureHandler(handler))
    }

    public mutating func post(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) {
        add("POST", pattern, ClosureHandler(handler))
    }

    public mutating func put(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) {
        add("PUT", pattern, ClosureHandler(handler))
    }

    public mutating func delete(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) {
        add("DELETE", pattern, ClosureHandler(handler))
    }

    public func handle(_ request: HTTPRequest) throws -> HTTPResponse {
        let resolved = try resolve(request)
        if let (handler, request) = resolved.route { return try handler.handle(request) }
        var allowed = resolved.allowed
        if !allowed.isEmpty {
            if allowed.contains("GET") { allowed.append("HEAD") }
            throw HTTPError(.methodNotAllowed, "This address does not accept \(request.method).",
                            headers: ["Allow": allowed.joined(separator: ", ")])
        }
        if let fallback { return try fallback.handle(request) }
        throw HTTPError.notFound
    }

    /// The route's inline answer; a 405, 404 or the fallback are left to `handle`.
    public func respondInline(_ request: HTTPRequest) throws -> HTTPResponse? {
        guard let (handler, request) = try resolve(request).route else { return nil }
        return try handler.respondInline(request)
    }

    /// The route for the request (with its parameters filled in), or the methods the path allows.
    private func resolve(_ request: HTTPRequest) throws -> (route: (any HTTPHandler, HTTPRequest)?, allowed: [String]) {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true)
        var allowed: [String] = []
        var headFallback: (Route, [String: String])?
        let candidates = parts.first.flatMap { byFirstSegment[String($0)] } ?? unindexed
        for index in candidates {
            let route = routes[index]
            guard let parameters = try Self.match(route.segments, parts) else { continue }
            if route.method == request.method {
                var request = request
                request.parameters = parameters
                return ((route.handler, request), [])
            }
            if request.method == "HEAD" && route.method == "GET" { headFallback = (route, parameters) }
            allowed.append(route.method)
        }
        if let (route, parameters) = headFallback {
            var request = request
            request.parameters = parameters
            return ((route.handler, request), [])
        }
        return (nil, allowed)
    }

    /// Parameters when the path matches. An undecodable parameter is a 400, not a miss.
    static func match(_ segments: [Segment], _ parts: [Substring]) throws -> [String: String]? {
        var parameters: [String: String] = [:]
        var i = 0
        for segment in segments {
            switch segment {
            case .literal(let text):
                guard i < parts.count, parts[i] == text else { return nil }
            case .parameter(let name):
                guard i < parts.count else { return nil }
                guard let value = FormDecoding.percentDecode(parts[i]) else {
                    throw HTTPError(.badRequest, "Malformed percent-encoding in the path.")
                }
                parameters[name] = value
            case .rest(let name):
                parameters[name] = parts[i...].joined(separator: "/")
                return parameters
            }
            i += 1
        }
        return i == parts.count ? parameters : nil
    }
}
