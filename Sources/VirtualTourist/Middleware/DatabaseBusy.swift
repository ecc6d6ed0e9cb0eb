import HTTPServer
import Postgres

/// Every pooled connection busy for the whole wait: 503 with Retry-After rather than a 500, since
/// trying again shortly will work.
struct DatabaseBusy: Middleware {
    func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        do {
            return try next(request)
        } catch PostgresError.poolTimeout {
            throw HTTPError.unavailable("The server is busy right now. Please try again in a moment.", retryAfter: .seconds(2))
        }
    }
}
