/// A response status code with its reason phrase (RFC 9110 §15).
public struct HTTPStatus: Sendable, Hashable, CustomStringConvertible {
    public let code: Int
    public let reason: String

    public init(_ code: Int, _ reason: String? = nil) {
        self.code = code
        self.reason = reason ?? HTTPStatus.standardReasons[code] ?? "Status \(code)"
    }

    public var description: String { "\(code) \(reason)" }

    public static func == (a: HTTPStatus, b: HTTPStatus) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// 1xx, 204 and 304 responses never carry a body (RFC 9112 §6.3).
    public var allowsBody: Bool { !(code < 200 || code == 204 || code == 304) }

    public static let `continue` = HTTPStatus(100)
    public static let ok = HTTPStatus(200)
    public static let created = HTTPStatus(201)
    public static let accepted = HTTPStatus(202)
    public static let noContent = HTTPStatus(204)
    public static let movedPermanently = HTTPStatus(301)
    public static let found = HTTPStatus(302)
    public static let seeOther = HTTPStatus(303)
    public static let notModified = HTTPStatus(304)
    public static let badRequest = HTTPStatus(400)
    public static let unauthorized = HTTPStatus(401)
    public static let forbidden = HTTPStatus(403)
    public static let notFound = HTTPStatus(404)
    public static let methodNotAllowed = HTTPStatus(405)
    public static let requestTimeout = HTTPStatus(408)
    public static let conflict = HTTPStatus(409)
    public static let gone = HTTPStatus(410)
    public static let lengthRequired = HTTPStatus(411)
    public static let contentTooLarge = HTTPStatus(413)
    public static let uriTooLong = HTTPStatus(414)
    public static let unsupportedMediaType = HTTPStatus(415)
    public static let expectationFailed = HTTPStatus(417)
    public static let unprocessableContent = HTTPStatus(422)
    public static let tooManyRequests = HTTPStatus(429)
    public static let headerFieldsTooLarge = HTTPStatus(431)
    public static let internalServerError = HTTPStatus(500)
    public static let notImplemented = HTTPStatus(501)
    public static let badGateway = HTTPStatus(502)
    public static let serviceUnavailable = HTTPStatus(503)
    public static let gatewayTimeout = HTTPStatus(504)
    public static let versionNotSupported = HTTPStatus(505)

    static let standardReasons: [Int: String] = [
        100: "Continue", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
        301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        307: "Temporary Redirect", 308: "Permanent Redirect",
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 410: "Gone",
        411: "Length Required", 413: "Content Too Large", 414: "URI Too Long",
        415: "Unsupported Media Type", 417: "Expectation Failed", 422: "Unprocessable Content",
        429: "Too Many Requests", 431: "Request Header Fields Too Large",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
    ]
}
