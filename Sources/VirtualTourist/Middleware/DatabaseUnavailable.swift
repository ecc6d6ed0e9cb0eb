import Foundation
import HTTPServer
import Log
import Postgres

/// PostgreSQL cannot be reached (stopped, restarting, network cut): every request that needed it
/// answers 503 with Retry-After — a page saying the database is unavailable, or a JSON error for
/// the scripts' routes — instead of the generic 500, since trying again shortly will work. Nothing
/// waits for the database to return: libpq fails at once on a refused connection and within
/// connect_timeout on a silent one, and the pool replaces broken connections on the next request,
/// so service resumes with the first request after the database is back (docs/architecture.md).
struct DatabaseUnavailable: Middleware {
    static let retryAfter = Duration.seconds(2)
    static let message = "The database is unavailable right now, so nothing can be shown or saved. Please try again in a moment."
    private static let logger = Logger(label: "postgres")

    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        do {
            return try next(request)
        } catch let error as PostgresError where error.meansDatabaseUnavailable {
            // Troubleshooting: GET /path: 503,
            Self.logger.warning("\(request.method) \(LoggedPath.redacted(request.path)): 503, \(error.unavailableReason)")
            if Self.wantsJSON(request) {
                var response = HTTPResponse.json(#"{"error":"database_unavailable","message":"\#(Self.message)","retryAfter":\#(HTTPError.retryAfterSeconds(Self.retryAfter))}"#,
                                                 status: .serviceUnavailable)
                response.waitFor(Self.retryAfter)
                return response
            }
            throw HTTPError.unavailable(Self.message, retryAfter: Self.retryAfter)
        }
    }

    /// The routes the page scripts call (album.json, pins.json, the places search) and anything
    /// asking for JSON rather than HTML.
    static func wantsJSON(_ request: HTTPRequest) -> Bool {
        if request.path.hasSuffix(".json") || request.path.hasPrefix("/places/") { return true }
        let accept = request.headers["Accept"] ?? ""
        return accept.contains("application/json") && !accept.contains("text/html")
    }
}
