/// A response: status, headers and either bytes or a stream the handler keeps writing to.
public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        /// A long-lived response (Server-Sent Events). The connection writes the head, then calls the
        /// closure with a stream that any thread may write to until either side closes it.
        /// `heartbeat` seconds of silence send a comment line, so proxies keep the connection open and
        /// a vanished client is noticed on the next write.
        case stream(heartbeat: Double?, @Sendable (ResponseStream) -> Void)
        /// An open file, sent with sendfile(2) (FileBody); Content-Length is its size.
        case file(FileBody)
    }

    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: Body

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = .bytes(body)
    }

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = [:], body: Body) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var bodyBytes: [UInt8] {
        if case .bytes(let b) = body { return b }
        return []
    }

    public var bodyString: String { String(decoding: bodyBytes, as: UTF8.self) }

    public static func text(_ text: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array(text.utf8))
    }

    public static func html(_ html: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/html; charset=utf-8"], body: Array(html.utf8))
    }

    public static func json(_ json: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(json.utf8))
    }

    /// 303 See Other: the answer to a form POST (post/redirect/get).
    public static func redirect(to location: String, status: HTTPStatus = .seeOther) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Location": location])
    }

    /// A Server-Sent Events response (text/event-stream).
    public static func eventStream(heartbeat: Double? = 15, _ start: @escaping @Sendable (ResponseStream) -> Void) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: [
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        ], body: .stream(heartbeat: heartbeat, start))
    }
}
